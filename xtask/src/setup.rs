//! Installs what trapdetect's build and tests need, idempotently, saying what it installs.
//! The toolchain recipe is the one verified in shared/DESIGN.md.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::util::{self, has};

/// Debian packages: the LLVM that bpf-linker links against, and the real components the
/// end-to-end tests exercise (php-fpm, nginx, FUSE, iproute2 for namespaces, the peers).
const APT: &[&str] = &[
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "php8.2-fpm",
    "nginx-light",
    // Debian's full nginx: the TLS and HTTP/2 listeners `load https://` and `--http2` are
    // tested against (nginx -V: --with-http_ssl_module --with-http_v2_module).
    "nginx",
    "openssl",
    "fuse3",
    "iproute2",
    "strace",
    "bpftool",
    "wrk",
    "hey",
    "procps",
    "python3",
    "sqlite3",
    "util-linux",
];

fn missing_packages() -> Vec<&'static str> {
    APT.iter()
        .copied()
        .filter(|p| {
            let out = Command::new("dpkg-query").args(["-W", "-f=${Status}", p]).output();
            !matches!(out, Ok(o) if String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect()
}

fn apt_install(pkgs: &[&str]) -> Result<()> {
    eprintln!("xtask: installing Debian packages: {}", pkgs.join(" "));
    let install = |update: bool| -> Result<()> {
        if update {
            util::run(Command::new("apt-get").args(["update", "-q"]))?;
        }
        util::run(
            Command::new("apt-get")
                .args(["install", "-y", "-q", "--no-install-recommends"])
                .args(pkgs)
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
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

/// Installs everything missing.
pub fn run() -> Result<()> {
    let missing = missing_packages();
    if !missing.is_empty() {
        apt_install(&missing)?;
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
