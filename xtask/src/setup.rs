//! Installs what trapdetect's build and tests need, idempotently, saying what it installs.
//! The toolchain recipe is the one verified in shared/DESIGN.md.

use std::{path::Path, process::Command};

use anyhow::{Context, Result, bail};

use crate::util::{self, has};

/// What a command needs installed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Building only (`build`, `dist --no-trace-check`, `setup --build-only`).
    Build,
    /// Building and the real components the tests, demo and benches exercise.
    All,
}

/// Packages for building: the LLVM that bpf-linker links against. Each entry lists
/// alternatives, first match wins (Debian and Ubuntu share these names).
const APT_BUILD: &[&[&str]] = &[
    &["llvm-22-dev"],
    &["libpolly-22-dev"],
    &["libzstd-dev"],
    &["zlib1g-dev"],
    // `cargo xtask dist`: the musl C toolchain (x86_64-linux-musl-gcc) for the crates that
    // compile C (ring, under rustls) into the static binary.
    &["musl-tools"],
    // The fuzz targets (`cargo xtask test` builds them before the test packages are in):
    // libfuzzer-sys compiles libFuzzer's C++.
    &["g++"],
];

/// Packages for the tests: the real components the end-to-end tests exercise (php-fpm, nginx,
/// FUSE, iproute2 for namespaces, the peers). Alternatives where Ubuntu's names differ:
/// php-fpm is php8.2-fpm on Debian 12, the distribution's default (`php-fpm`) elsewhere;
/// nginx-light is gone from newer releases (`nginx`).
const APT_TEST: &[&[&str]] = &[
    &["php8.2-fpm", "php-fpm"],
    &["nginx-light", "nginx"],
    // Debian's full nginx: the TLS and HTTP/2 listeners `load https://` and `--http2` are
    // tested against (nginx -V: --with-http_ssl_module --with-http_v2_module).
    &["nginx"],
    &["openssl"],
    &["fuse3"],
    // A remote filesystem on this host (tests/src/sshfs.rs): sshfs over a private sshd.
    &["sshfs"],
    &["openssh-server"],
    // A FUSE passthrough whose daemon costs CPU, not waiting (tests/src/bindfs.rs).
    &["bindfs"],
    // An encrypted FUSE filesystem whose entries the kernel caches (tests/src/gocryptfs.rs).
    &["gocryptfs"],
    &["iproute2"],
    &["strace"],
    &["bpftool", "linux-tools-common"],
    &["wrk"],
    &["hey"],
    &["procps"],
    &["python3"],
    &["sqlite3"],
    // The server zoo (tests/src/zoo.rs): gunicorn's sync workers, Node's http module, Go's
    // net/http (built offline from the stdlib).
    &["python3-gunicorn"],
    // uWSGI's `--http-socket`: answers HTTP/1.1 without `Connection: close`, then closes.
    &["uwsgi"],
    &["uwsgi-plugin-python3"],
    // lighttpd: one process, a stat cache (it stats a file about once a second).
    &["lighttpd"],
    &["nodejs"],
    &["golang-go"],
    &["util-linux"],
    // The HTML reports are rendered in a real browser in the tests; the OpenMetrics export is
    // checked with the reference Python parser.
    &["chromium"],
    &["python3-prometheus-client"],
    // `trapdetect agent` is scraped by a real Prometheus in tests/tests/agent.rs.
    &["prometheus"],
    // The kernel matrix (xtask/src/vm.rs): qemu for TCG guests, a static busybox for their
    // initramfs, xz for compressed modules, the archive keys for the older suites.
    &["qemu-system-x86"],
    // `cargo xtask dist --target aarch64-unknown-linux-musl`: ring's C for aarch64
    // (xtask/src/dist.rs cross_env), and the C library headers it includes (only recommended
    // by the compiler: a fresh machine lacked them, `bits/libc-header-start.h`).
    &["gcc-aarch64-linux-gnu"],
    &["libc6-dev-arm64-cross"],
    // The syscall tables' unit test reads both architectures' numbers from these headers.
    &["linux-libc-dev"],
    &["busybox-static"],
    &["xz-utils"],
    &["debian-archive-keyring"],
    // `cargo xtask dist`'s checks (run by `cargo xtask test`): `file` says the binary is
    // static, `man` reads the installed pages.
    &["file"],
    &["man-db"],
    // preflight's runtime-mode traps (issue 23) on real servers: Xdebug (left disabled: the
    // tests load it with -d zend_extension=xdebug.so), Express from Debian (node-express,
    // found through NODE_PATH=/usr/share/nodejs), a Go server (golang-go, above) built with
    // and without -race (the race runtime needs cgo, so gcc).
    &["php8.2-xdebug", "php-xdebug"],
    // The other classic PHP deployment (verdicts.rs: a pool that grows under load): Apache's
    // prefork children running mod_php.
    &["apache2"],
    &["libapache2-mod-php8.2", "libapache2-mod-php"],
    &["node-express"],
    // net.nagle on Java's built-in HttpServer (verdicts.rs compiles its server with javac).
    &["openjdk-17-jdk-headless", "default-jdk-headless"],
    &["gcc"],
];

fn installed(p: &str) -> bool {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", p])
        .output();
    matches!(out, Ok(o) if String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

/// Whether apt knows a package it could install.
fn available(p: &str) -> bool {
    Command::new("apt-cache")
        .args(["policy", p])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim().starts_with("Candidate:") && !l.contains("(none)"))
        })
}

/// For each entry not satisfied by an installed alternative: the first alternative apt
/// offers (or the first one, so apt names it when it fails).
fn missing_packages(scope: Scope) -> Vec<&'static str> {
    let lists: &[&[&[&str]]] = match scope {
        Scope::Build => &[APT_BUILD],
        Scope::All => &[APT_BUILD, APT_TEST],
    };
    lists
        .iter()
        .flat_map(|l| l.iter())
        .filter(|alts| !alts.iter().any(|p| installed(p)))
        .map(|alts| {
            alts.iter()
                .copied()
                .find(|p| available(p))
                .unwrap_or(alts[0])
        })
        .collect()
}

/// `ID` and `VERSION_CODENAME` from /etc/os-release.
fn os_release() -> (String, String) {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default()
    };
    (get("ID="), get("VERSION_CODENAME="))
}

/// Ubuntu has no LLVM 22 in its archive: add LLVM's own apt repository (apt.llvm.org, same
/// package names) for this release, once.
fn ensure_llvm_repo() -> Result<()> {
    let (id, codename) = os_release();
    if id != "ubuntu" || available("llvm-22-dev") || codename.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: adding apt.llvm.org (llvm-toolchain-{codename}-22) for llvm-22-dev");
    util::run(Command::new("sh").arg("-c").arg(format!(
        "set -e; apt-get install -y -q --no-install-recommends curl ca-certificates; \
         install -d /etc/apt/keyrings; \
         curl -fsSL https://apt.llvm.org/llvm-snapshot.gpg.key -o /etc/apt/keyrings/apt.llvm.org.asc; \
         echo 'deb [signed-by=/etc/apt/keyrings/apt.llvm.org.asc] http://apt.llvm.org/{codename}/ llvm-toolchain-{codename}-22 main' \
           > /etc/apt/sources.list.d/llvm-22.list; \
         apt-get update -q"
    )))
}

/// Installs `pkgs`; apt's output goes to `log` when given (it runs beside a build), to ours
/// otherwise.
fn apt_install(pkgs: &[&str], log: Option<&Path>) -> Result<()> {
    eprintln!("xtask: installing Debian packages: {}", pkgs.join(" "));
    let apt = |args: &[&str]| -> Result<()> {
        let mut c = Command::new("apt-get");
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        if let Some(l) = log {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(l)?;
            c.stdout(f.try_clone()?).stderr(f);
        }
        util::run(&mut c)
    };
    let install = |update: bool| -> Result<()> {
        if update {
            apt(&["update", "-q"])?;
        }
        let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
        args.extend_from_slice(pkgs);
        apt(&args)
    };
    // Try without refreshing the lists first; refresh only if that fails.
    install(false).or_else(|_| install(true))
}

fn rust_src_installed() -> bool {
    Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", "nightly"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.starts_with("rust-src"))
        })
}

fn bpf_linker_works() -> bool {
    Command::new("bpf-linker")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Installs everything `scope` needs that is missing.
/// Debian enables Xdebug for every SAPI when it installs it; every php-fpm the tests and the
/// demo start would then run instrumented (about 14× slower calls, and a runtime.xdebug fail).
/// Only the test that wants it loads it, so it is disabled here, idempotently.
fn disable_xdebug() -> Result<()> {
    let enabled = std::fs::read_dir("/etc/php")
        .into_iter()
        .flatten()
        .flatten()
        .any(|v| {
            ["fpm", "cli"]
                .iter()
                .any(|sapi| v.path().join(sapi).join("conf.d/20-xdebug.ini").exists())
        });
    if enabled && has("phpdismod") {
        eprintln!("xtask: disabling Xdebug for every PHP SAPI (phpdismod xdebug)");
        util::run(Command::new("phpdismod").args(["-s", "ALL", "xdebug"]))?;
    }
    Ok(())
}

/// What `cargo xtask kernels --arch arm64` needs beyond the test packages: qemu for arm64.
pub fn install_arm64_guest_tools() -> Result<()> {
    if util::has("qemu-system-aarch64") {
        return Ok(());
    }
    apt_install(&["qemu-system-arm"], None)
}

/// What `cargo xtask kernels --no-btf` needs to build its kernel and the BTF file: the
/// kernel's build tools and pahole (dwarves).
pub fn install_kernel_build_tools() -> Result<()> {
    let want = [
        "flex",
        "bison",
        "bc",
        "libelf-dev",
        "dwarves",
        "make",
        "gcc",
        "xz-utils",
    ];
    let missing: Vec<&str> = want.into_iter().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    apt_install(&missing, None)
}

/// The packages only the tests need, installed with apt's output in `log` (`cargo xtask
/// test` runs this beside its builds: no build needs them). `run(Scope::All)` afterwards
/// finds nothing left to install.
pub fn install_test_packages(log: &Path) -> Result<()> {
    let _ = std::fs::remove_file(log);
    let missing = missing_packages(Scope::All);
    if !missing.is_empty() {
        apt_install(&missing, Some(log))
            .with_context(|| format!("apt-get (its output: {})", log.display()))?;
    }
    install_kube_validator()
}

/// The Kubernetes schema validator the agent's DaemonSet manifest is checked with
/// (tests/tests/agent.rs): PyPI's kubernetes-validate, pinned, in a virtualenv under target/.
const KUBE_VALIDATE: &str = "kubernetes-validate==1.37.0";

/// `target/kubeval/bin/kubernetes-validate`, installed once.
pub fn install_kube_validator() -> Result<()> {
    let venv = util::root().join("target/kubeval");
    let tool = venv.join("bin/kubernetes-validate");
    if tool.exists() {
        return Ok(());
    }
    eprintln!(
        "xtask: installing {KUBE_VALIDATE} (PyPI) into {}",
        venv.display()
    );
    util::run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    util::run(Command::new(venv.join("bin/pip")).args([
        "install",
        "-q",
        "--disable-pip-version-check",
        KUBE_VALIDATE,
    ]))
}

pub fn run(scope: Scope) -> Result<()> {
    ensure_llvm_repo()?;
    let missing = missing_packages(scope);
    if !missing.is_empty() {
        apt_install(&missing, None)?;
    }
    if scope == Scope::All {
        disable_xdebug()?;
        install_kube_validator()?;
    }
    if !has("rustup") {
        bail!(
            "rustup not found: trapdetect's eBPF side needs the nightly toolchain through rustup"
        );
    }
    if !rust_src_installed() {
        eprintln!(
            "xtask: installing rust-src for the nightly toolchain (eBPF builds core with -Z build-std)"
        );
        util::run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ]))?;
    }
    if !bpf_linker_works() {
        eprintln!("xtask: installing bpf-linker 0.13 against LLVM 22 (about a minute)");
        util::run(
            Command::new("cargo")
                .args([
                    "install",
                    "bpf-linker",
                    "--version",
                    "=0.13.0",
                    "--locked",
                    "--no-default-features",
                    "--features",
                    "llvm-22",
                ])
                .env("LLVM_PREFIX", "/usr/lib/llvm-22"),
        )
        .context("cargo install bpf-linker")?;
    }
    // php-fpm and nginx must not run as system services during tests: the tests start their
    // own instances on their own sockets.
    Ok(())
}
