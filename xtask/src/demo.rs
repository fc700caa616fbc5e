//! `cargo xtask demo`: the seed's trap, staged for real. php-fpm behind nginx, started once
//! from a directory seven levels deep in a slow, serialized FUSE mount (what WSL2's DrvFs is
//! under concurrency) and once from a native directory. trapdetect traces both; then a short
//! saturation run shows what each really delivers next to the ceiling trapdetect predicted.

use std::time::Duration;

use anyhow::{Context, Result};
use trapdetect_e2e::{TempDir, Tracer, servers::PhpStack, slowfs::SlowFs, target_file};

fn trace(stack: &PhpStack) -> Result<(String, serde_json::Value)> {
    let pid = stack.fpm.pid().to_string();
    let json = stack.dir.path().join("report.json");
    let t = Tracer::start(&[
        "--pid",
        &pid,
        "--url",
        &stack.url(),
        "--rate",
        "25",
        "--duration",
        "5s",
        "--json-out",
        json.to_str().context("utf-8 path")?,
    ]);
    let out = t.wait();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json)?)?;
    Ok((text, report))
}

fn saturate(url: &str) -> Result<f64> {
    crate::util::wrk(url, 3)
}

pub fn run() -> Result<()> {
    unsafe {
        std::env::set_var(
            "TRAPDETECT_TARGET_DIR",
            crate::util::root().join("target/release"),
        )
    };
    let _ = target_file("trapdetect");
    println!(
        "== 1. php-fpm started from a directory 7 levels deep in a slow FUSE mount (200 µs per operation, one global lock)"
    );
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let trapped = PhpStack::start(&deep, 4, "<?php echo \"ok\\n\";");
    let (text, report) = trace(&trapped)?;
    println!(
        "$ sudo trapdetect --pid {} --url {} --rate 25 --duration 5s\n{text}",
        trapped.fpm.pid(),
        trapped.url()
    );
    let predicted = report["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["id"] == "fs.cwd-slow"))
        .and_then(|f| f["evidence"]["predicted_ceiling_rps_if_serialized"].as_f64());
    let trapped_rps = saturate(&trapped.url())?;
    drop(trapped);

    println!("== 2. the same server started from a native directory");
    let native = TempDir::new("demo-native");
    let native_dir = native.path().join("a/b/c/d/e/f/g");
    std::fs::create_dir_all(&native_dir)?;
    let clean = PhpStack::start(&native_dir, 4, "<?php echo \"ok\\n\";");
    let (text, _) = trace(&clean)?;
    println!(
        "$ sudo trapdetect --pid {} --url {} --rate 25 --duration 5s\n{text}",
        clean.fpm.pid(),
        clean.url()
    );
    let clean_rps = saturate(&clean.url())?;
    drop(clean);
    std::thread::sleep(Duration::from_millis(100));

    println!(
        "== side by side: wrk -t1 -c8 -d3s, same binary, same config, same docroot; only the working directory differs"
    );
    println!(
        "  cwd deep in the slow mount  {trapped_rps:>8.0} req/s   (trapdetect predicted ≈ {} req/s from the walk cost alone)",
        predicted
            .map(|p| format!("{p:.0}"))
            .unwrap_or_else(|| "-".into())
    );
    println!(
        "  cwd on ext4                 {clean_rps:>8.0} req/s   ({:.1}x)",
        clean_rps / trapped_rps.max(1.0)
    );
    Ok(())
}
