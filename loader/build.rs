//! Builds the eBPF object with aya-build (nightly, `-Z build-std=core`, bpf-linker) so a plain
//! `cargo build` builds everything. `TRAPDETECT_EBPF_OBJ=<file>` uses a prebuilt object instead.
//! Also stamps what `--version` prints: the git commit, the build date and the object's hash,
//! so a binary copied to a benchmark host still says exactly what it is.
use std::{path::Path, process::Command};

use anyhow::{Context as _, anyhow};
use sha2::{Digest, Sha256};

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=TRAPDETECT_EBPF_OBJ");
    let out_dir = std::path::PathBuf::from(std::env::var_os("OUT_DIR").context("OUT_DIR")?);
    if let Some(obj) = std::env::var_os("TRAPDETECT_EBPF_OBJ") {
        let obj = std::path::PathBuf::from(obj);
        println!("cargo:rerun-if-changed={}", obj.display());
        std::fs::copy(&obj, out_dir.join("trapdetect"))
            .with_context(|| format!("copy {}", obj.display()))?;
    } else {
        build_ebpf()?;
    }
    stamp(&out_dir.join("trapdetect"))
}

/// `TRAPDETECT_GIT_COMMIT`, `TRAPDETECT_BUILD_DATE` and `TRAPDETECT_EBPF_SHA256` for `env!`.
/// Outside a git checkout (a source tarball) the commit is `unknown`, unless the packager
/// sets `TRAPDETECT_GIT_COMMIT`; `SOURCE_DATE_EPOCH` pins the date for reproducible builds.
fn stamp(obj: &Path) -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=TRAPDETECT_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let bytes = std::fs::read(obj).with_context(|| format!("read {}", obj.display()))?;
    let hash: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo:rustc-env=TRAPDETECT_EBPF_SHA256={hash}");
    let commit = match std::env::var("TRAPDETECT_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => git_commit().unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=TRAPDETECT_GIT_COMMIT={commit}");
    let epoch = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(s) => s
            .trim()
            .parse::<i64>()
            .context("SOURCE_DATE_EPOCH is not a number")?,
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
    };
    println!("cargo:rustc-env=TRAPDETECT_BUILD_DATE={}", ymd(epoch));
    Ok(())
}

/// HEAD's commit (12 hex digits); the script reruns when HEAD moves.
fn git_commit() -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let git = |args: &[&str]| -> Option<String> {
        let o = Command::new("git")
            .args(args)
            .current_dir(&dir)
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    // HEAD, the branch it points to and packed-refs decide the commit: rerun when they change.
    // Only files that exist: cargo counts a missing one as changed on every build, which
    // recompiled the loader at each cargo command of `cargo xtask test` (1m43 each here).
    let watch = |f: String| {
        if Path::new(&f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    };
    for p in ["HEAD", "packed-refs"] {
        if let Some(f) = git(&["rev-parse", "--path-format=absolute", "--git-path", p]) {
            watch(f);
        }
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(f) = git(&["rev-parse", "--path-format=absolute", "--git-path", &r])
    {
        watch(f);
    }
    // No `-dirty` mark: cargo reruns this script only when HEAD or the eBPF sources change,
    // so a mark computed here would go stale.
    Some(commit)
}

/// `YYYY-MM-DD` (UTC) of a Unix time (days-to-civil, proleptic Gregorian).
fn ymd(epoch: i64) -> String {
    let z = epoch.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn build_ebpf() -> anyhow::Result<()> {
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let pkg = metadata
        .packages
        .into_iter()
        .find(|p| p.name.as_str() == "trapdetect-ebpf")
        .ok_or_else(|| anyhow!("package trapdetect-ebpf not found"))?;
    let root = pkg
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("no parent for {}", pkg.manifest_path))?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: pkg.name.as_str(),
            root_dir: root.as_str(),
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
}
