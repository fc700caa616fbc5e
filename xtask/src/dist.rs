//! `cargo xtask dist`: what a user copies to a benchmark host. A static musl binary (the eBPF
//! object is embedded), its man pages and shell completions generated from the CLI definition,
//! a tarball and a .deb, each checked before it is called done: the binary is static and runs,
//! a real trace with it is trusted, and the .deb installs and removes cleanly in an empty root.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail, ensure};

use crate::util::{self, root};

/// The static target of this machine's architecture (`cargo xtask test` packs and checks it).
pub const HOST_TARGET: &str = "x86_64-unknown-linux-musl";

/// Targets `dist` knows: (rust target, Debian architecture, linker override).
const TARGETS: &[(&str, &str, Option<&str>)] = &[
    ("x86_64-unknown-linux-musl", "amd64", None),
    // Rust ships musl's crt objects and rust-lld links them; ring's C and assembly (rustls)
    // need a C compiler for the target: Debian's gcc-aarch64-linux-gnu (cross_env).
    ("aarch64-unknown-linux-musl", "arm64", Some("rust-lld")),
];

/// Environment a cross build for `target` needs: the linker override of [`TARGETS`] and, for
/// aarch64, Debian's cross gcc and ar as the C toolchain (`cargo xtask setup` installs
/// gcc-aarch64-linux-gnu; ring's C uses no glibc interface, musl's libc resolves it).
pub fn cross_env(target: &str) -> Vec<(String, String)> {
    let key = target.replace('-', "_");
    let mut env = vec![];
    if let Some((_, _, Some(l))) = TARGETS.iter().find(|t| t.0 == target) {
        env.push((
            format!("CARGO_TARGET_{}_LINKER", key.to_uppercase()),
            l.to_string(),
        ));
    }
    if target.starts_with("aarch64") && !std::env::consts::ARCH.starts_with("aarch64") {
        env.push((format!("CC_{key}"), "aarch64-linux-gnu-gcc".into()));
        env.push((format!("AR_{key}"), "aarch64-linux-gnu-ar".into()));
    }
    env
}

/// Options of `cargo xtask dist`.
pub struct Options {
    /// Rust targets to build (default: x86_64 musl).
    pub targets: Vec<String>,
    /// Skip the checks that need root and a build of the e2e tests (the trace run).
    pub no_trace_check: bool,
}

fn version() -> Result<String> {
    let toml = std::fs::read_to_string(root().join("Cargo.toml"))?;
    toml.lines()
        .skip_while(|l| l.trim() != "[workspace.package]")
        .find_map(|l| l.strip_prefix("version = "))
        .map(|v| v.trim_matches('"').to_string())
        .context("workspace version")
}

fn output(cmd: &mut Command) -> Result<String> {
    let o = cmd.output().with_context(|| format!("spawn {cmd:?}"))?;
    ensure!(
        o.status.success(),
        "{cmd:?} exited with {}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Builds every requested target, packages and checks; prints what it wrote. Returns the
/// static binary of the host's architecture.
pub fn run(opts: &Options) -> Result<PathBuf> {
    let version = version()?;
    let dist = root().join("target/dist");
    let _ = std::fs::remove_dir_all(&dist);
    std::fs::create_dir_all(&dist)?;
    let mut built = vec![];
    for t in &opts.targets {
        let Some(&(target, deb_arch, _)) = TARGETS.iter().find(|(n, ..)| n == t) else {
            bail!(
                "unknown target {t} (known: {})",
                TARGETS.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")
            );
        };
        let bin = build(target)?;
        check_static(&bin)?;
        built.push((target, deb_arch, bin));
    }
    // Man pages and completions do not depend on the architecture: generate them with a
    // binary that runs here.
    let host = built
        .iter()
        .find(|(t, ..)| t.starts_with(std::env::consts::ARCH))
        .map(|(.., b)| b.clone())
        .context("dist needs the host architecture among the targets to generate the docs")?;
    let share = dist.join("share");
    util::run(Command::new(&host).args([
        "generate",
        "--man-dir",
        share.join("man").to_str().context("utf-8")?,
        "--completions-dir",
        share.join("completions").to_str().context("utf-8")?,
    ]))?;
    check_version(&host)?;
    for (target, deb_arch, bin) in &built {
        let tarball = tarball(&dist, &version, target, bin, &share)?;
        let deb = deb(&dist, &version, deb_arch, bin, &share)?;
        println!("xtask dist: {}", tarball.display());
        println!("xtask dist: {}", deb.display());
        if bin == &host {
            check_deb(&deb)?;
        }
    }
    if !opts.no_trace_check {
        check_trace(&host)?;
    }
    Ok(host)
}

/// Installs the standard library of `target` (`rustup target add`: a no-op when present).
pub fn add_target(target: &str) -> Result<()> {
    util::run(Command::new("rustup").args(["target", "add", target]))
}

/// Builds the release binary for `target` (cargo's no-op when it is fresh); returns its path.
pub fn build(target: &str) -> Result<PathBuf> {
    add_target(target)?;
    let mut cargo = util::cargo_cmd();
    // No `-p`: features resolve over the workspace's default members, as `cargo xtask test`'s
    // build for this target resolves them, so after it this is cargo's no-op (with `-p
    // trapdetect` the dependencies compiled again).
    cargo
        .args(["build", "--release", "--target", target])
        .args(["--bin", "trapdetect"])
        .current_dir(root());
    cargo.envs(cross_env(target));
    util::run(&mut cargo).with_context(|| format!("build for {target}"))?;
    Ok(root()
        .join("target")
        .join(target)
        .join("release/trapdetect"))
}

/// `file` and `ldd` agree the binary needs no shared library (not even the host's glibc).
fn check_static(bin: &Path) -> Result<()> {
    let file = output(Command::new("file").arg("-b").arg(bin))?;
    ensure!(
        file.contains("statically linked") || file.contains("static-pie linked"),
        "{} is not static: {file}",
        bin.display()
    );
    // ldd exits 1 on a static binary ("not a dynamic executable"); only its text matters.
    let ldd = Command::new("ldd").arg(bin).output()?;
    let text = String::from_utf8_lossy(&ldd.stdout) + String::from_utf8_lossy(&ldd.stderr);
    ensure!(
        text.contains("not a dynamic executable") || text.contains("statically linked"),
        "ldd {}: {text}",
        bin.display()
    );
    eprintln!("xtask dist: {} is static ({})", bin.display(), file.trim());
    Ok(())
}

/// `--version` names the commit, the build date and the embedded object's hash.
fn check_version(bin: &Path) -> Result<()> {
    let v = output(Command::new(bin).arg("--version"))?;
    for key in ["commit ", "built ", "eBPF object  sha256:"] {
        ensure!(v.contains(key), "--version lacks `{key}`: {v}");
    }
    eprintln!("xtask dist: {} --version:\n{v}", bin.display());
    Ok(())
}

/// `trapdetect-<version>-<target>.tar.gz`: the binary, man pages, completions, README.
fn tarball(dist: &Path, version: &str, target: &str, bin: &Path, share: &Path) -> Result<PathBuf> {
    let name = format!("trapdetect-{version}-{target}");
    let dir = dist.join(&name);
    std::fs::create_dir_all(dir.join("man/man1"))?;
    std::fs::create_dir_all(dir.join("completions"))?;
    std::fs::copy(bin, dir.join("trapdetect"))?;
    std::fs::copy(root().join("README.md"), dir.join("README.md"))?;
    for e in std::fs::read_dir(share.join("man"))? {
        let p = e?.path();
        std::fs::copy(&p, dir.join("man/man1").join(p.file_name().expect("name")))?;
    }
    for e in std::fs::read_dir(share.join("completions"))? {
        let p = e?.path();
        std::fs::copy(
            &p,
            dir.join("completions").join(p.file_name().expect("name")),
        )?;
    }
    let out = dist.join(format!("{name}.tar.gz"));
    util::run(
        Command::new("tar")
            .args(["--owner=0", "--group=0", "-czf"])
            .arg(&out)
            .arg("-C")
            .arg(dist)
            .arg(&name),
    )?;
    std::fs::remove_dir_all(&dir)?;
    Ok(out)
}

/// Where the .deb puts each generated file (Debian's usual places).
fn deb_files(share: &Path) -> Result<Vec<(PathBuf, String, bool)>> {
    let mut files = vec![];
    for e in std::fs::read_dir(share.join("man"))? {
        let p = e?.path();
        let name = p.file_name().expect("name").to_string_lossy().into_owned();
        files.push((p, format!("usr/share/man/man1/{name}.gz"), true));
    }
    for (src, dst) in [
        (
            "trapdetect.bash",
            "usr/share/bash-completion/completions/trapdetect",
        ),
        (
            "_trapdetect",
            "usr/share/zsh/vendor-completions/_trapdetect",
        ),
        (
            "trapdetect.fish",
            "usr/share/fish/vendor_completions.d/trapdetect.fish",
        ),
    ] {
        files.push((share.join("completions").join(src), dst.to_string(), false));
    }
    files.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(files)
}

/// `trapdetect_<version>_<arch>.deb`, built with dpkg-deb (no maintainer scripts needed).
fn deb(dist: &Path, version: &str, arch: &str, bin: &Path, share: &Path) -> Result<PathBuf> {
    let stage = dist.join(format!("deb-{arch}"));
    let put = |rel: &str, data: &[u8], mode: u32| -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let p = stage.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent"))?;
        std::fs::write(&p, data)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    put("usr/bin/trapdetect", &std::fs::read(bin)?, 0o755)?;
    for (src, dst, gz) in deb_files(share)? {
        let data = std::fs::read(&src)?;
        let data = if gz {
            let mut c = Command::new("gzip")
                .args(["-9n", "-c"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()?;
            {
                use std::io::Write;
                c.stdin.take().expect("stdin").write_all(&data)?;
            }
            let o = c.wait_with_output()?;
            ensure!(o.status.success(), "gzip failed");
            o.stdout
        } else {
            data
        };
        put(&dst, &data, 0o644)?;
    }
    put(
        "usr/share/doc/trapdetect/copyright",
        b"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
          Upstream-Name: trapdetect\n\nFiles: *\nLicense: MIT or Apache-2.0\n",
        0o644,
    )?;
    let size_kib = walk_size(&stage)?.div_ceil(1024);
    let control = format!(
        "Package: trapdetect\nVersion: {version}\nArchitecture: {arch}\n\
         Maintainer: trapdetect developers <trapdetect@localhost>\nSection: utils\n\
         Priority: optional\nInstalled-Size: {size_kib}\n\
         Description: finds the environment traps that silently falsify server benchmarks\n \
         A static binary (eBPF tracepoints, embedded object): trace, preflight, load,\n \
         wait-drain. Tracing needs root (or CAP_BPF and CAP_PERFMON) and kernel BTF.\n"
    );
    put("DEBIAN/control", control.as_bytes(), 0o644)?;
    let out = dist.join(format!("trapdetect_{version}_{arch}.deb"));
    util::run(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "--build"])
            .arg(&stage)
            .arg(&out),
    )?;
    std::fs::remove_dir_all(&stage)?;
    Ok(out)
}

fn walk_size(p: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(p)? {
        let e = e?;
        let m = e.metadata()?;
        n += if m.is_dir() {
            walk_size(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(n)
}

/// Installs the .deb with dpkg into an empty root (its own dpkg database: nothing of the
/// host's is touched or relied on), checks the binary runs from there, that `man` finds
/// every page and the completions are in place, then removes it and checks nothing is left.
fn check_deb(deb: &Path) -> Result<()> {
    let listing = output(Command::new("dpkg-deb").arg("-c").arg(deb))?;
    let r = root().join("target/dist/deb-root");
    let _ = std::fs::remove_dir_all(&r);
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
    ] {
        std::fs::create_dir_all(r.join(d))?;
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "")?;
    std::fs::write(r.join("var/lib/dpkg/available"), "")?;
    let dpkg = |args: &[&str]| -> Result<String> {
        output(
            Command::new("dpkg")
                .arg(format!("--root={}", r.display()))
                .args(["--log=/dev/null", "--force-script-chrootless"])
                .args(args),
        )
    };
    dpkg(&["-i", deb.to_str().context("utf-8")?])?;
    let status = dpkg(&["-s", "trapdetect"])?;
    ensure!(status.contains("Status: install ok installed"), "{status}");
    let installed = r.join("usr/bin/trapdetect");
    check_version(&installed)?;
    let manpath = r.join("usr/share/man");
    for page in std::fs::read_dir(manpath.join("man1"))? {
        let page = page?.file_name().to_string_lossy().into_owned();
        let name = page.trim_end_matches(".1.gz");
        let text = output(
            Command::new("man")
                .arg("-M")
                .arg(&manpath)
                .arg(name)
                .env("MANPAGER", "cat")
                .env("MANWIDTH", "100"),
        )?;
        let want = format!("{name}(1)");
        ensure!(
            text.starts_with(&want) && text.contains("Exit codes"),
            "man {name}: no {want} title or no exit codes in:\n{text}"
        );
    }
    for want in [
        "trapdetect.1.gz",
        "trapdetect-trace.1.gz",
        "trapdetect-preflight.1.gz",
        "trapdetect-load.1.gz",
        "trapdetect-wait-drain.1.gz",
        "trapdetect-run.1.gz",
        "trapdetect-report.1.gz",
        "trapdetect-compare.1.gz",
        "trapdetect-explain.1.gz",
    ] {
        ensure!(
            manpath.join("man1").join(want).is_file(),
            "{want} not installed"
        );
    }
    for c in [
        "usr/share/bash-completion/completions/trapdetect",
        "usr/share/zsh/vendor-completions/_trapdetect",
        "usr/share/fish/vendor_completions.d/trapdetect.fish",
    ] {
        ensure!(r.join(c).is_file(), "{c} not installed");
        ensure!(listing.contains(c), "{c} not listed by dpkg-deb -c");
    }
    // bash must be able to source the completion and register it.
    output(Command::new("bash").arg("-c").arg(format!(
        "source {} && complete -p trapdetect",
        r.join("usr/share/bash-completion/completions/trapdetect")
            .display()
    )))?;
    dpkg(&["-r", "trapdetect"])?;
    let left: Vec<String> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|p| !p.ends_with('/'))
        .map(|p| p.trim_start_matches("./").to_string())
        .filter(|p| r.join(p).exists())
        .collect();
    ensure!(left.is_empty(), "dpkg -r left files behind: {left:?}");
    std::fs::remove_dir_all(&r)?;
    eprintln!(
        "xtask dist: {} installs (binary, {} man pages, 3 completions) and removes cleanly",
        deb.display(),
        std::fs::read_dir(root().join("target/dist/share/man"))?.count()
    );
    Ok(())
}

/// A real trace with the static binary: the end-to-end test of a server walking a slow FUSE
/// mount, run against this binary instead of the workspace's (it asserts a trusted report
/// with exact counts).
fn check_trace(bin: &Path) -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!("the trace check needs root (eBPF); run as root or pass --no-trace-check");
    }
    util::run(
        util::cargo_cmd()
            // No `-p`: the executable `cargo xtask test` built (see vm.rs test_binaries).
            .args(["test", "--release", "--test", "trace", "--"])
            .arg("non_php_server_that_chdirs_per_request_is_detected_too")
            .args(["--exact", "--nocapture"])
            .env("TRAPDETECT_BIN", bin)
            .current_dir(root()),
    )
    .context("trace with the static binary")
}
