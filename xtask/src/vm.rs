//! The kernel matrix: boots Debian's own kernels under qemu (TCG) and runs the focused
//! end-to-end set (`tests/tests/kernels.rs`) inside each, so trapdetect is tested on the
//! kernels its users run, not only on this machine's.
//!
//! Each guest is a stock Debian kernel with a tiny initramfs (static busybox and the kernel's
//! own modules) that mounts the host's `/` read-only over 9p and runs `tests/vm/guest.sh`:
//! the host's binaries, php-fpm and nginx run unchanged, the targets' files live on a tmpfs.
//! /dev/kvm on this machine kind is a paravirtual KVM that does not boot stock kernels, hence
//! TCG. A guest that hangs (TCG soft lockups happen) is retried, never counted as a pass.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::util::{self, root};

/// One Debian kernel of the matrix. The exact versions live here and nowhere else.
pub struct Kernel {
    /// Short name (`cargo xtask kernels 6.1`).
    pub name: &'static str,
    /// Debian suite it comes from.
    pub suite: &'static str,
    /// Binary package.
    pub package: &'static str,
    /// Exact package version.
    pub version: &'static str,
    /// `uname -r` (the directory under /lib/modules).
    pub release: &'static str,
    /// The CPU it runs on.
    pub arch: Arch,
    /// Built here from `package`, Debian's linux-source, with tests/vm/nobtf.config (no BTF
    /// in the kernel; the BTF file the tests give with `--btf` made by pahole from its
    /// DWARF), instead of Debian's own binary kernel.
    pub built: bool,
}

/// A guest's CPU architecture: what qemu emulates, which Debian packages it takes, and which
/// Rust target its test executables are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// The host's: the guest runs the host's own userland over 9p.
    X86_64,
    /// arm64 (`qemu-system-aarch64 -M virt`): the host's userland is x86, so the guest stays
    /// in its initramfs (arm64 busybox) and runs static aarch64 executables from the checkout.
    Arm64,
}

impl Arch {
    /// Debian's name.
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// The static Rust target its executables are built for.
    pub fn rust_target(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-musl",
            Arch::Arm64 => "aarch64-unknown-linux-musl",
        }
    }

    fn qemu(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Arm64 => "qemu-system-aarch64",
        }
    }

    /// The accelerator. x86 guests run their two vCPUs in one host thread: an x86 kernel
    /// patches its own text (static keys flipped as tracepoints are enabled, BPF run time
    /// statistics switched) with int3 while the other vCPU may run that code, and under
    /// QEMU 7.2's multi-threaded TCG that raced: 6.12 died of "Oops: int3" in
    /// bpf_trace_run1/2 at the patched site, and a 5.10 guest soft-locked with both vCPUs
    /// stuck in the kernel (2026-12-05, three boots of six); single-threaded they take about
    /// 5 % longer (sleep-bound). The arm64 guests keep multi-threaded TCG: no such failure was
    /// seen there, and their per-request CPU under TCG (4.5 ms) queued its two vCPUs on one
    /// thread (run queue 7 % of the threads' time, the FUSE walk's share 88.5 %, not ≥ 90).
    fn accel(self) -> &'static str {
        match self {
            Arch::X86_64 => "tcg,thread=single",
            Arch::Arm64 => "tcg",
        }
    }

    /// The machine and console (`virt`'s PL011 UART is its ttyAMA0).
    fn machine(self) -> (&'static [&'static str], &'static str) {
        match self {
            Arch::X86_64 => (&[], "ttyS0"),
            Arch::Arm64 => (&["-M", "virt"], "ttyAMA0"),
        }
    }
}

/// The kernels users run, by Debian release: bullseye's 5.10 (the oldest with BTF in
/// Debian), bookworm's 6.1, bookworm-backports' 6.12.
pub const KERNELS: &[Kernel] = &[
    Kernel {
        name: "5.10",
        suite: "bullseye",
        package: "linux-image-5.10.0-32-amd64-unsigned",
        version: "5.10.223-1",
        release: "5.10.0-32-amd64",
        arch: Arch::X86_64,
        built: false,
    },
    Kernel {
        name: "6.1",
        suite: "bookworm",
        package: "linux-image-6.1.0-50-amd64-unsigned",
        version: "6.1.176-1",
        release: "6.1.0-50-amd64",
        arch: Arch::X86_64,
        built: false,
    },
    Kernel {
        name: "6.12",
        suite: "bookworm-backports",
        package: "linux-image-6.12.95+deb12-amd64-unsigned",
        version: "6.12.95-1~bpo12+1",
        release: "6.12.95+deb12-amd64",
        arch: Arch::X86_64,
        built: false,
    },
];

/// The kernels `cargo xtask test` (CI) boots: Debian 11's and Debian 12's, the two issue 26
/// names. The 6.12 guest (bookworm-backports) adds no code path of its own to them and the
/// host's 6.18: the tp_btf and `bpf_task_pt_regs` paths of 6.1, the FUSE tracepoints of 6.18
/// (Debian backported them), no `group_dead` as 5.10 and 6.1; it runs in `cargo xtask
/// kernels`, as the arm64 guests do. Its two minutes went back to CI's 30 (stop 47 took
/// 1,922 s there).
pub const CI_KERNELS: &[&str] = &["5.10", "6.1"];

/// arm64 guests (issue 26), booted by `cargo xtask kernels --arch arm64`, not by `cargo xtask
/// test`: TCG emulating arm64 costs CI more than its 30 minutes have left. bookworm's 6.1 (the
/// kernel of Debian's arm64 cloud images) and bookworm-backports' 6.12.
pub const ARM64_KERNELS: &[Kernel] = &[
    Kernel {
        name: "6.1-arm64",
        suite: "bookworm",
        package: "linux-image-6.1.0-50-arm64-unsigned",
        version: "6.1.176-1",
        release: "6.1.0-50-arm64",
        arch: Arch::Arm64,
        built: false,
    },
    Kernel {
        name: "6.12-arm64",
        suite: "bookworm-backports",
        package: "linux-image-6.12.95+deb12-arm64-unsigned",
        version: "6.12.95-1~bpo12+1",
        release: "6.12.95+deb12-arm64",
        arch: Arch::Arm64,
        built: false,
    },
];

/// The BTF-less guest (issue 26), booted by `cargo xtask kernels --no-btf`, not by `cargo
/// xtask test` (fetching and building the kernel takes about 8 minutes of this 2-core
/// machine's CI time):
/// bookworm's 6.1 built without CONFIG_DEBUG_INFO_BTF, as RHEL 8's first kernels, CentOS 7's
/// and Ubuntu 18.04's were shipped; the tests give trapdetect `--btf` with its BTF file.
pub const NOBTF_KERNELS: &[Kernel] = &[Kernel {
    name: "6.1-nobtf",
    suite: "bookworm",
    package: "linux-source-6.1",
    version: "6.1.176-1",
    release: "6.1.176-nobtf",
    arch: Arch::X86_64,
    built: true,
}];

/// Modules the guest loads, in dependency order of need: virtio and 9p for the root, FUSE for
/// slowfs, the socket diagnostics for the census, veth and overlay for the fixtures. Their
/// own dependencies are read from each module's `depends=` and loaded first; a module built
/// into the kernel is simply absent.
const MODULES: &[&str] = &[
    "virtio_pci",
    "9pnet_virtio",
    "9p",
    "fuse",
    "inet_diag",
    "tcp_diag",
    "veth",
    "overlay",
];

/// How long one guest may take under TCG before it counts as hung (the whole guest: boot and
/// every test; 62-74 s each here), and how many times a hung guest is retried.
const GUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// A guest whose console has shown nothing but kernel messages for this long is hung too (a
/// boot that stopped, a test that never ends): the longest silence of a passing guest here was
/// 49 s (5.10, php-fpm over 9p). Kernel messages are not progress: a 5.10 guest that
/// soft-locked under TCG printed a stall report every 20-30 s until the 600 s limit killed it
/// (2026-12-03), eleven minutes before the retry passed.
const GUEST_SILENCE: Duration = Duration::from_secs(180);
const ATTEMPTS: u32 = 3;

fn vm_dir() -> PathBuf {
    root().join("target/vm")
}

/// The machine's own Debian mirror (from its APT sources), so the kernels come from where
/// everything else does.
fn debian_mirror() -> String {
    let mut texts = vec![std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default()];
    if let Ok(rd) = std::fs::read_dir("/etc/apt/sources.list.d") {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "sources" || x == "list") {
                texts.push(std::fs::read_to_string(p).unwrap_or_default());
            }
        }
    }
    for t in texts {
        for w in t.split_whitespace() {
            let w = w.trim_end_matches('/');
            if (w.starts_with("http://") || w.starts_with("https://")) && w.ends_with("/debian") {
                return w.to_string();
            }
        }
    }
    "http://deb.debian.org/debian".into()
}

/// Downloads and unpacks every kernel of CI's matrix ([`CI_KERNELS`]) not yet under target/vm
/// (`cargo xtask test` does it beside its builds). APT runs on a private configuration (its
/// own sources list, lists and cache under target/vm/apt): the machine's sources are never
/// touched, so there is nothing to remove afterwards even if interrupted.
pub fn fetch_ci() -> Result<()> {
    fetch(
        &KERNELS
            .iter()
            .filter(|k| CI_KERNELS.contains(&k.name))
            .collect::<Vec<_>>(),
    )
}

fn fetch(kernels: &[&Kernel]) -> Result<()> {
    for arch in [Arch::X86_64, Arch::Arm64] {
        let missing: Vec<&Kernel> = kernels
            .iter()
            .copied()
            .filter(|k| k.arch == arch && !kernel_dir(k).join("vmlinuz").exists())
            .collect();
        if !missing.is_empty() {
            fetch_arch(arch, &missing)?;
        }
    }
    Ok(())
}

/// [`fetch`] for the kernels of one architecture, on APT lists of that architecture; an
/// arm64 guest also gets Debian's static busybox for arm64 (its initramfs userland).
fn fetch_arch(arch: Arch, missing: &[&Kernel]) -> Result<()> {
    let apt = vm_dir().join(match arch {
        Arch::X86_64 => "apt".to_string(),
        other => format!("apt-{}", other.debian()),
    });
    for d in ["lists/partial", "cache/archives/partial", "debs"] {
        std::fs::create_dir_all(apt.join(d))?;
    }
    let mirror = debian_mirror();
    // A backports kernel's guest takes busybox from the release it backports to.
    let mut suites: Vec<&str> = missing
        .iter()
        .flat_map(|k| [k.suite, k.suite.trim_end_matches("-backports")])
        .collect();
    suites.sort();
    suites.dedup();
    let mut list = String::new();
    for suite in suites {
        list.push_str(&format!(
            "deb [arch={} signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {mirror} {suite} main\n",
            arch.debian(),
        ));
    }
    std::fs::write(apt.join("sources.list"), list)?;
    let opts = |c: &mut Command| {
        c.arg("-o")
            .arg(format!(
                "Dir::Etc::SourceList={}",
                apt.join("sources.list").display()
            ))
            .args(["-o", "Dir::Etc::SourceParts=/dev/null"])
            .arg("-o")
            .arg(format!("Dir::State::Lists={}", apt.join("lists").display()))
            .arg("-o")
            .arg(format!("Dir::Cache={}", apt.join("cache").display()))
            .arg("-o")
            .arg(format!("APT::Architecture={}", arch.debian()))
            .arg("-o")
            .arg(format!("APT::Architectures={}", arch.debian()))
            .args(["-o", "Dir::State::status=/dev/null", "-q"]);
    };
    eprintln!(
        "xtask: fetching {} kernels from {mirror} (private APT lists under {})",
        arch.debian(),
        apt.display()
    );
    let mut c = Command::new("apt-get");
    opts(&mut c);
    util::run(c.arg("update"))?;
    for k in missing {
        let mut c = Command::new("apt-get");
        opts(&mut c);
        c.current_dir(apt.join("debs"))
            .arg("download")
            .arg(format!("{}={}", k.package, k.version));
        util::run(&mut c).with_context(|| {
            format!(
                "{} {} is no longer on {mirror} {}: update the pins in xtask/src/vm.rs (KERNELS)",
                k.package, k.version, k.suite
            )
        })?;
        let deb = downloaded(&apt.join("debs"), k.package)?;
        if k.built {
            build_kernel(k, &deb)?;
            std::fs::remove_file(&deb)?;
            continue;
        }
        let dir = kernel_dir(k);
        let unpacked = dir.join("root");
        let _ = std::fs::remove_dir_all(&unpacked);
        std::fs::create_dir_all(&unpacked)?;
        util::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
        std::fs::remove_file(&deb)?;
        std::fs::rename(
            unpacked.join(format!("boot/vmlinuz-{}", k.release)),
            dir.join("vmlinuz"),
        )?;
        if arch != Arch::X86_64 {
            let mut c = Command::new("apt-get");
            opts(&mut c);
            c.current_dir(apt.join("debs"))
                .args(["download", "busybox-static"]);
            util::run(&mut c)?;
            let deb = downloaded(&apt.join("debs"), "busybox-static")?;
            let bb = dir.join("busybox-root");
            let _ = std::fs::remove_dir_all(&bb);
            util::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&bb))?;
            std::fs::remove_file(&deb)?;
            std::fs::rename(bb.join("bin/busybox"), dir.join("busybox"))?;
            let _ = std::fs::remove_dir_all(&bb);
        }
    }
    Ok(())
}

/// The kernel options of a built guest kernel (`Kernel::built`).
const NOBTF_CONFIG: &str = include_str!("../../tests/vm/nobtf.config");

/// Builds a `built` kernel from Debian's linux-source `deb`: tinyconfig, the options of
/// [`NOBTF_CONFIG`] (each checked to have survived olddefconfig), bzImage; then its BTF file
/// from the DWARF by pahole, as a user of a kernel without BTF makes one (README "Kernels
/// without BTF"). Leaves `vmlinuz` and `vmlinux.btf` in the kernel's directory, not the tree.
fn build_kernel(k: &Kernel, deb: &Path) -> Result<()> {
    let dir = kernel_dir(k);
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src)?;
    util::run(
        Command::new("dpkg-deb")
            .arg("-x")
            .arg(deb)
            .arg(src.join("deb")),
    )?;
    let tarball = src.join(format!("deb/usr/src/{}.tar.xz", k.package));
    util::run(
        Command::new("tar")
            .arg("xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(&src),
    )?;
    std::fs::remove_dir_all(src.join("deb"))?;
    let tree = src.join(k.package);
    let make = |args: &[&str]| -> Result<()> {
        util::run(Command::new("make").args(args).current_dir(&tree))
    };
    eprintln!(
        "xtask: building kernel {} ({} {})",
        k.name, k.package, k.version
    );
    make(&["tinyconfig"])?;
    std::fs::write(tree.join("td.config"), NOBTF_CONFIG)?;
    util::run(
        Command::new("scripts/kconfig/merge_config.sh")
            .args(["-m", ".config", "td.config"])
            .current_dir(&tree),
    )?;
    make(&["olddefconfig"])?;
    let config = std::fs::read_to_string(tree.join(".config"))?;
    for want in NOBTF_CONFIG.lines().filter(|l| l.starts_with("CONFIG_")) {
        if !config.lines().any(|l| l == want) {
            bail!("kernel {}: {want} did not survive olddefconfig", k.name);
        }
    }
    if config.lines().any(|l| l == "CONFIG_DEBUG_INFO_BTF=y") {
        bail!("kernel {}: CONFIG_DEBUG_INFO_BTF is on", k.name);
    }
    let jobs = format!(
        "-j{}",
        std::thread::available_parallelism().map_or(2, |n| n.get())
    );
    make(&[&jobs, "bzImage"])?;
    let release = std::fs::read_to_string(tree.join("include/config/kernel.release"))?;
    if release.trim() != k.release {
        bail!(
            "kernel {}: built {} (want {})",
            k.name,
            release.trim(),
            k.release
        );
    }
    util::run(
        Command::new("pahole")
            .arg(format!(
                "--btf_encode_detached={}",
                dir.join("vmlinux.btf").display()
            ))
            .arg(tree.join("vmlinux")),
    )?;
    std::fs::copy(tree.join("arch/x86/boot/bzImage"), dir.join("vmlinuz"))?;
    std::fs::remove_dir_all(&src)?;
    Ok(())
}

/// The .deb of `package` that `apt-get download` left in `dir`.
fn downloaded(dir: &Path, package: &str) -> Result<PathBuf> {
    std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")))
        })
        .with_context(|| format!("the downloaded {package} .deb is not in {}", dir.display()))
}

fn kernel_dir(k: &Kernel) -> PathBuf {
    vm_dir().join(k.release)
}

/// The `depends=` of a module file (already decompressed).
fn module_depends(ko: &[u8]) -> Vec<String> {
    let key = b"depends=";
    ko.windows(key.len())
        .position(|w| w == key)
        .map(|i| {
            let rest = &ko[i + key.len()..];
            let end = rest.iter().position(|&b| b == 0).unwrap_or(0);
            String::from_utf8_lossy(&rest[..end])
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a module (`.ko`, or `.ko.xz` through xz) of the unpacked kernel by name.
fn read_module(modroot: &Path, name: &str) -> Result<Option<Vec<u8>>> {
    let want = [format!("{name}.ko"), format!("{name}.ko.xz")];
    let alt: Vec<String> = want.iter().map(|w| w.replace('_', "-")).collect();
    // A built kernel has everything built in and no module tree.
    let mut stack: Vec<PathBuf> = vec![modroot.join("kernel")];
    stack.retain(|d| d.is_dir());
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)?.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let n = e.file_name().to_string_lossy().into_owned();
            if !(want.contains(&n) || alt.contains(&n)) {
                continue;
            }
            if n.ends_with(".xz") {
                let out = Command::new("xz").arg("-dc").arg(&p).output()?;
                if !out.status.success() {
                    bail!("xz -dc {}", p.display());
                }
                return Ok(Some(out.stdout));
            }
            return Ok(Some(std::fs::read(&p)?));
        }
    }
    Ok(None)
}

/// Appends one newc cpio entry.
fn cpio_entry(out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8], ino: u32) {
    let hdr = format!(
        "070701{ino:08X}{mode:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}{:08X}",
        0,
        0,
        1,
        0,
        data.len(),
        0,
        0,
        0,
        0,
        name.len() + 1,
        0
    );
    out.extend_from_slice(hdr.as_bytes());
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// Builds the guest's initramfs: busybox, `/init`, and the modules in load order.
fn initramfs(k: &Kernel) -> Result<PathBuf> {
    let path = kernel_dir(k).join("initramfs.cpio");
    let modroot = kernel_dir(k).join("root/lib/modules").join(k.release);
    let mut order: Vec<(String, Vec<u8>)> = vec![];
    fn add(
        modroot: &Path,
        name: &str,
        order: &mut Vec<(String, Vec<u8>)>,
        depth: u32,
    ) -> Result<()> {
        let norm = name.replace('-', "_");
        if depth > 16 || order.iter().any(|(n, _)| *n == norm) {
            return Ok(());
        }
        let Some(ko) = read_module(modroot, &norm)? else {
            // Built in (or not configured): nothing to load.
            return Ok(());
        };
        for d in module_depends(&ko) {
            add(modroot, &d, order, depth + 1)?;
        }
        order.push((norm, ko));
        Ok(())
    }
    for m in MODULES {
        add(&modroot, m, &mut order, 0)?;
    }
    let mut out = vec![];
    let mut ino = 1;
    let mut entry = |out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8]| {
        cpio_entry(out, name, mode, data, ino);
        ino += 1;
    };
    for d in ["bin", "modules"] {
        entry(&mut out, d, 0o040755, &[]);
    }
    let (busybox, init) = match k.arch {
        Arch::X86_64 => (
            std::fs::read("/bin/busybox").context("/bin/busybox (busybox-static)")?,
            include_str!("../../tests/vm/init"),
        ),
        Arch::Arm64 => (
            std::fs::read(kernel_dir(k).join("busybox")).context("the arm64 busybox")?,
            include_str!("../../tests/vm/init-local"),
        ),
    };
    entry(&mut out, "bin/busybox", 0o100755, &busybox);
    entry(&mut out, "init", 0o100755, init.as_bytes());
    let names: Vec<String> = order.iter().map(|(n, _)| n.clone()).collect();
    entry(
        &mut out,
        "modules/order",
        0o100644,
        (names.join("\n") + "\n").as_bytes(),
    );
    for (n, ko) in &order {
        entry(&mut out, &format!("modules/{n}.ko"), 0o100644, ko);
    }
    entry(&mut out, "TRAILER!!!", 0, &[]);
    std::fs::write(&path, out)?;
    Ok(path)
}

/// What one guest run gave.
enum Outcome {
    /// The guest ran the tests: their exit code and the console.
    Ran { rc: i32, console: String },
    /// No result line before the hard timeout, or qemu died: retry.
    Hung(String),
}

fn boot(
    k: &Kernel,
    initrd: &Path,
    run_list: &str,
    bin: Option<&Path>,
    attempt: u32,
) -> Result<Outcome> {
    let console_path = kernel_dir(k).join(format!("console-{attempt}.log"));
    let _ = std::fs::remove_file(&console_path);
    // A first attempt starts the kernel's run: the later attempts' consoles of an earlier run
    // would be read as this one's last (`--table` reads the highest attempt there is).
    if attempt == 1 {
        for a in 2..=ATTEMPTS {
            let _ = std::fs::remove_file(kernel_dir(k).join(format!("console-{a}.log")));
        }
    }
    let ws = root();
    let (machine, console) = k.arch.machine();
    let mut append = format!(
        "console={console} panic=-1 quiet loglevel=4 td.dir={} td.run={}",
        ws.display(),
        run_list
    );
    if let Some(b) = bin {
        append += &format!(" td.bin={}", b.display());
    }
    if k.built {
        append += &format!(" td.btf={}", kernel_dir(k).join("vmlinux.btf").display());
    }
    let mut child = Command::new(k.arch.qemu())
        .args(machine)
        .args([
            "-accel",
            k.arch.accel(),
            "-cpu",
            "max",
            "-smp",
            "2",
            "-m",
            "1024",
        ])
        .args(["-nodefaults", "-display", "none", "-no-reboot"])
        .arg("-serial")
        .arg(format!("file:{}", console_path.display()))
        .arg("-kernel")
        .arg(kernel_dir(k).join("vmlinuz"))
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(&append)
        .args([
            "-virtfs",
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawn {}", k.arch.qemu()))?;
    let start = Instant::now();
    let (mut console_len, mut shown, mut grew) = (0, 0, Instant::now());
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        let len = std::fs::metadata(&console_path).map_or(0, |m| m.len());
        if len != console_len {
            console_len = len;
            let now = std::fs::read(&console_path).map_or(0, |c| guest_output_len(&c));
            if now != shown {
                (shown, grew) = (now, Instant::now());
            }
        }
        if start.elapsed() > GUEST_TIMEOUT || grew.elapsed() > GUEST_SILENCE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let console = std::fs::read_to_string(&console_path).unwrap_or_default();
    let rc = console
        .lines()
        .find_map(|l| l.trim().strip_prefix("TD-VM-RESULT rc="))
        .and_then(|v| v.trim().parse::<i32>().ok());
    Ok(match (status, rc) {
        (Some(_), Some(rc)) => Outcome::Ran { rc, console },
        (None, _) => Outcome::Hung(format!(
            "no result after {:.0} s, nothing but kernel messages on the console for the \
             last {:.0} s (limits: {GUEST_TIMEOUT:?} in all, {GUEST_SILENCE:?} of silence; \
             console: {})",
            start.elapsed().as_secs_f64(),
            grew.elapsed().as_secs_f64(),
            console_path.display()
        )),
        (Some(s), None) => {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            Outcome::Hung(format!(
                "qemu exited ({s}) without a result: {} (console: {})",
                err.trim(),
                console_path.display()
            ))
        }
    })
}

/// Bytes of the console that are not kernel messages: the guest's init and the tests print
/// bare lines, the kernel prefixes each of its lines with its clock, `[   23.456789] `.
fn guest_output_len(console: &[u8]) -> usize {
    fn kernel_line(l: &[u8]) -> bool {
        let Some(rest) = l.strip_prefix(b"[") else {
            return false;
        };
        let Some(end) = rest.iter().position(|&b| b == b']') else {
            return false;
        };
        let stamp = rest[..end].trim_ascii_start();
        !stamp.is_empty()
            && stamp.iter().all(|&b| b.is_ascii_digit() || b == b'.')
            && stamp.contains(&b'.')
    }
    console
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !kernel_line(l))
        .map(|l| l.len() + 1)
        .sum()
}

/// What each guest runs: the focused set, plus existing exact tests that need no more than
/// the guest has (the probe load on php-fpm over slowfs; TIME_WAIT counted by the TCP probe
/// and by sock_diag; the clocksource preflight times). `(test target, exact test name or "" for all)`.
const GUEST_TESTS: &[(&str, &str)] = &[
    ("kernels", ""),
    ("trace", "probe_load_gives_exact_per_request_figures"),
    (
        "tcp",
        "time_wait_entries_on_the_servers_port_are_counted_exactly",
    ),
    // Under TCG 5.10 and 6.1 keep time with hpet, a clocksource the vDSO cannot read (the
    // trap planted by the hypervisor itself); 6.12 trusts the TSC (the clean case).
    (
        "preflight",
        "clock_reads_that_enter_the_kernel_are_named_with_the_clocksource",
    ),
    // `run`'s verdicts and off-CPU classes on every kernel (issue 26) are kernels.rs's
    // run_names_* tests, run above with the rest of it: a serialized FUSE cwd and one flocked
    // file, on the workspace's own static server, so the arm64 guests run them too.
];

/// The focused set an arm64 guest runs: its userland is busybox, so only the tests whose
/// targets are the workspace's own static executables (pathload): the exact counts, forks
/// followed and exits seen, paths of every length hashed alike in the kernel and here.
const ARM64_GUEST_TESTS: &[(&str, &str)] = &[
    (
        "kernels",
        "chdir_stat_fstat_loop_is_counted_exactly_and_trusted",
    ),
    ("kernels", "forks_are_followed_and_every_exit_is_seen"),
    (
        "kernels",
        "paths_of_every_length_hash_the_same_in_the_kernel_and_here",
    ),
    ("kernels", RUN_TESTS[0]),
    ("kernels", RUN_TESTS[1]),
];

/// The tests that print a `TD-KERNEL-RUN` row: `run`'s verdict and class shares, compared
/// with the host kernel's (issue 26: within [`SHARE_POINTS`]).
const RUN_TESTS: [&str; 2] = [
    "run_names_a_serialized_fuse_cwd_on_this_kernel",
    "run_names_the_flocked_file_on_this_kernel",
];

/// How far a guest's off-CPU class share may be from the host kernel's, in percentage points.
const SHARE_POINTS: f64 = 10.0;

/// The set the BTF-less guest runs: kernels.rs, whose tests give `--btf` the guest's BTF
/// file (`TD_BTF`): exact counts, forks and exits, the 9p root, `run`'s two verdicts, and
/// what trapdetect says without `--btf` there.
const NOBTF_GUEST_TESTS: &[(&str, &str)] = &[("kernels", "")];

/// Builds the test executables the guests run (for `target`, the host's by default); returns
/// the `td.run=` list for guest.sh.
fn test_binaries(target: Option<&str>, tests: &[(&str, &str)]) -> Result<String> {
    let mut cmd = util::cargo_cmd();
    if let Some(t) = target {
        cmd.envs(crate::dist::cross_env(t));
    }
    // No `-p`: with the workspace's default members selected, as `cargo xtask test` builds
    // them, features resolve the same and these are the executables already built (with
    // `-p trapdetect-e2e` cargo compiled the end-to-end crate and its dependencies again).
    cmd.args(["test", "--release"]);
    if let Some(t) = target {
        cmd.args(["--target", t]);
    }
    for (t, _) in tests {
        cmd.args(["--test", t]);
    }
    let out = cmd
        .args(["--no-run", "--message-format=json"])
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        bail!("building the kernel matrix's test executables failed");
    }
    let mut exes = std::collections::HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact"
            && let (Some(name), Some(exe)) =
                (v["target"]["name"].as_str(), v["executable"].as_str())
        {
            exes.insert(name.to_string(), exe.to_string());
        }
    }
    let mut items = vec![];
    for (t, name) in tests {
        let exe = exes
            .get(*t)
            .with_context(|| format!("cargo did not report the {t} test executable"))?;
        items.push(if name.is_empty() {
            exe.clone()
        } else {
            format!("{exe}@{name}")
        });
    }
    Ok(items.join(","))
}

/// Why qemu cannot run here, if it cannot.
fn qemu_unavailable(arch: Arch) -> Option<String> {
    let qemu = arch.qemu();
    if !util::has(qemu) {
        return Some(format!("{qemu} is not installed"));
    }
    let ok = Command::new(qemu)
        .args(["-accel", "help"])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("tcg"));
    if !ok {
        return Some(format!("{qemu} has no TCG accelerator"));
    }
    None
}

/// Runs the matrix for the kernels whose name matches `filter` (all when empty). Where qemu
/// cannot run it says so in one line, and under CI that is a failure, never a silent pass.
///
/// `bin`: the trapdetect binary the guests' tests run (`TRAPDETECT_BIN`); the build tree's
/// when `None`. `target`: the Rust target the test executables are built for (`cargo xtask
/// test` builds everything for the static musl one); the host's when `None`. `beside`: work
/// that runs while the guests do, in the idle scheduling class (see [`Beside`]); it has ended
/// before the host kernel's own rows are taken.
pub fn run(
    arch: Arch,
    no_btf: bool,
    filter: &[String],
    bin: Option<&Path>,
    target: Option<&str>,
    beside: Option<Beside>,
) -> Result<()> {
    if let Some(why) = qemu_unavailable(arch) {
        let line = format!("SKIP kernel matrix: {why}");
        if std::env::var_os("CI").is_some() {
            bail!("{line} (CI is set: the matrix must run)");
        }
        eprintln!("{line}");
        return Ok(());
    }
    let (all, tests, suffix) = match (arch, no_btf) {
        (Arch::X86_64, false) => (KERNELS, GUEST_TESTS, ""),
        (Arch::Arm64, false) => (ARM64_KERNELS, ARM64_GUEST_TESTS, "-arm64"),
        (Arch::X86_64, true) => (NOBTF_KERNELS, NOBTF_GUEST_TESTS, "-nobtf"),
        (_, true) => bail!("--no-btf: the BTF-less guest is amd64"),
    };
    let kernels: Vec<&Kernel> = all
        .iter()
        .filter(|k| filter.is_empty() || filter.iter().any(|f| f == k.name))
        .collect();
    if kernels.is_empty() {
        bail!(
            "no kernel matches {filter:?} (have: {})",
            all.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
        );
    }
    fetch(&kernels)?;
    let run_list = test_binaries(target, tests)?;
    let started = Instant::now();
    let mut failed = vec![];
    let mut rows = vec![];
    // One guest at a time. Side by side they took about half the time here (274-322 s against
    // 578 s under the same load), but with three TCG guests on two cores php-fpm's start over
    // 9p exceeded 90 s and one TIME_WAIT entry in 1009 went uncounted once: a matrix must not
    // be flaky, so the guests run in turn. Two at a time (2026-12-04: two lanes, each taking
    // the next kernel) was no better: the 5.10 guest's two vCPUs, starved, soft-locked for
    // 180 s under `run`'s flock test (RCU stall, "CPU#0 stuck for 22s") and its retry made
    // the matrix 515 s, as long as in turn.
    let results = std::thread::scope(|scope| -> Result<Vec<_>> {
        let side = beside.map(|job| scope.spawn(move || idle_class(job)));
        let mut results = vec![];
        for k in &kernels {
            let initrd = initramfs(k)?;
            results.push(guest(k, &initrd, &run_list, bin));
        }
        if let Some(side) = side
            && let Err(p) = side.join()
        {
            std::panic::resume_unwind(p);
        }
        Ok(results)
    })?;
    for (k, r) in kernels.iter().zip(results) {
        let (result, secs) = r?;
        match result {
            None => {
                eprintln!("xtask: kernel {}: FAILED: hung {ATTEMPTS} times", k.name);
                failed.push(k.name.to_string());
            }
            Some((rc, console)) => {
                let out: String = console
                    .lines()
                    .filter(|l| !l.starts_with("TD-VM-FORMAT"))
                    .map(|l| format!("  [{}] {l}\n", k.name))
                    .collect();
                std::io::stderr().write_all(out.as_bytes())?;
                rows.extend(kernel_rows(&console));
                rows.extend(tagged_rows(&console, RUN_TAG));
                save_formats(k, &console)?;
                eprintln!(
                    "xtask: kernel {}: {} in {secs:.0} s",
                    k.name,
                    if rc == 0 { "ok" } else { "FAILED" }
                );
                if rc != 0 {
                    failed.push(k.name.to_string());
                }
            }
        }
    }
    // The host kernel's rows, from the same tests run here (built for the host's CPU).
    let host_exe = match arch {
        Arch::X86_64 => run_list.split(',').next().unwrap_or_default().to_string(),
        _ => {
            let host_target = format!("{}-unknown-linux-musl", std::env::consts::ARCH);
            test_binaries(Some(&host_target), &[("kernels", "")])?
        }
    };
    match host_rows(&host_exe) {
        Ok((Some(r), run)) => {
            if arch == Arch::X86_64 {
                rows.insert(0, r);
            }
            failed.extend(compare_run_rows(&run, &rows));
            rows.extend(run);
        }
        Ok((None, _)) => failed.push("host (no row)".into()),
        Err(e) => {
            eprintln!("xtask: host kernel: {e:#}");
            failed.push("host".into());
        }
    }
    std::fs::write(
        vm_dir().join(format!("matrix{suffix}.jsonl")),
        rows.join("\n") + "\n",
    )?;
    let table = render_table(&rows);
    std::fs::write(vm_dir().join(format!("kernels{suffix}.md")), &table)?;
    eprint!("{table}");
    eprintln!(
        "xtask: kernel matrix took {:.0} s; rows in target/vm/matrix{suffix}.jsonl",
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("kernel matrix failed on: {}", failed.join(", "));
    }
    Ok(())
}

/// Work for the host's idle CPU while the guests run: an x86 guest is one host thread
/// (`tcg,thread=single`), so on two cores the other one waits through the whole matrix.
pub type Beside = Box<dyn FnOnce() + Send>;

/// Runs `job` on this thread in the `SCHED_IDLE` class, which the processes it starts
/// inherit: it gets only the CPU time no guest wants, so a guest's vCPUs are never queued
/// behind it (two guests side by side starved a 5.10 guest into an RCU stall, above).
fn idle_class(job: Beside) {
    // SAFETY: sched_param is plain integers (musl's has more fields than glibc's), all zero
    // for SCHED_IDLE; pid 0 is the calling thread.
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        eprintln!(
            "xtask: SCHED_IDLE refused ({}): the work beside the guests runs at normal priority",
            std::io::Error::last_os_error()
        );
    }
    job()
}

/// Boots one kernel until it gives a result or has hung `ATTEMPTS` times: its exit code and
/// console, and how long it took.
type GuestResult = (Option<(i32, String)>, f64);

fn guest(k: &Kernel, initrd: &Path, run_list: &str, bin: Option<&Path>) -> Result<GuestResult> {
    let t0 = Instant::now();
    for attempt in 1..=ATTEMPTS {
        eprintln!(
            "xtask: kernel {} ({} {}), attempt {attempt}: booting under TCG",
            k.name, k.package, k.version
        );
        match boot(k, initrd, run_list, bin, attempt)? {
            Outcome::Ran { rc, console } => {
                // The tests must have run the binary asked for, not the build tree's.
                if let Some(b) = bin
                    && !console.contains(&format!("TD-VM-BIN {}", b.display()))
                {
                    bail!("kernel {}: the guest did not take td.bin", k.name);
                }
                return Ok((Some((rc, console)), t0.elapsed().as_secs_f64()));
            }
            Outcome::Hung(why) => eprintln!("xtask: kernel {}: {why}; retrying", k.name),
        }
    }
    Ok((None, t0.elapsed().as_secs_f64()))
}

/// Runs the focused tests that print rows on the host kernel: its `TD-KERNEL-ROW` and its
/// `TD-KERNEL-RUN` rows.
fn host_rows(exe: &str) -> Result<(Option<String>, Vec<String>)> {
    let out = Command::new(exe)
        .args([
            "--exact",
            "chdir_stat_fstat_loop_is_counted_exactly_and_trusted",
            RUN_TESTS[0],
            RUN_TESTS[1],
            "--test-threads=1",
            "--nocapture",
        ])
        .output()?;
    if !out.status.success() {
        bail!(
            "the focused tests failed on the host kernel:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok((
        kernel_rows(&stdout).into_iter().next(),
        tagged_rows(&stdout, RUN_TAG),
    ))
}

/// The tag of a `run` row (kernels.rs `print_run_row`).
const RUN_TAG: &str = "TD-KERNEL-RUN ";

/// Each guest's `run` rows against the host's: the same cause, and every off-CPU class share
/// within [`SHARE_POINTS`]. Returns what failed.
fn compare_run_rows(host: &[String], rows: &[String]) -> Vec<String> {
    let parse = |r: &String| serde_json::from_str::<serde_json::Value>(r).ok();
    let host: Vec<serde_json::Value> = host.iter().filter_map(parse).collect();
    let mut failed = vec![];
    for g in rows
        .iter()
        .filter_map(parse)
        .filter(|g| g.get("test").is_some())
    {
        let name = format!("{} {}", g["kernel"].as_str().unwrap_or("?"), g["test"]);
        let Some(h) = host.iter().find(|h| h["test"] == g["test"]) else {
            failed.push(format!("{name}: no host row to compare with"));
            continue;
        };
        if g["cause"] != h["cause"] {
            failed.push(format!(
                "{name}: cause {} (host {})",
                g["cause"], h["cause"]
            ));
        }
        let classes = h["shares_pct"].as_object().into_iter().flatten();
        for (class, hv) in classes {
            let (hv, gv) = (hv.as_f64().unwrap_or(0.0), g["shares_pct"][class].as_f64());
            match gv {
                Some(gv) if (gv - hv).abs() <= SHARE_POINTS => {}
                _ => failed.push(format!("{name}: {class} {gv:?} % (host {hv} %)")),
            }
        }
    }
    for f in &failed {
        eprintln!("xtask: run shares: {f}");
    }
    failed
}

/// The `TD-KERNEL-ROW {json}` lines of a test run (with --nocapture a row follows its test's
/// name on the same line).
fn kernel_rows(console: &str) -> Vec<String> {
    tagged_rows(console, "TD-KERNEL-ROW ")
}

/// The `{json}` after each `tag` in a console.
fn tagged_rows(console: &str, tag: &str) -> Vec<String> {
    console
        .lines()
        .filter_map(|l| l.find(tag).map(|i| l[i + tag.len()..].trim().to_string()))
        .collect()
}

/// Renders the table again from the last console of each kernel and a fresh host row,
/// without booting anything (`cargo xtask kernels --table`).
pub fn table_from_last_run() -> Result<()> {
    let mut rows = vec![];
    let run_list = test_binaries(None, GUEST_TESTS)?;
    let (host, host_run) = host_rows(run_list.split(',').next().unwrap_or_default())?;
    rows.extend(host);
    rows.extend(host_run);
    for k in KERNELS {
        let last = (1..=ATTEMPTS)
            .rev()
            .map(|a| kernel_dir(k).join(format!("console-{a}.log")))
            .find(|p| p.exists())
            .with_context(|| format!("no console of kernel {}: run cargo xtask kernels", k.name))?;
        let console = std::fs::read_to_string(&last)?;
        if !console.contains("TD-VM-RESULT rc=0") {
            bail!(
                "{}: the last run of kernel {} did not pass",
                last.display(),
                k.name
            );
        }
        rows.extend(kernel_rows(&console));
        rows.extend(tagged_rows(&console, RUN_TAG));
    }
    let table = render_table(&rows);
    std::fs::write(vm_dir().join("kernels.md"), &table)?;
    print!("{table}");
    Ok(())
}

/// README's "Kernels" table from the rows the guests (and the host) printed: a kernel's
/// `TD-KERNEL-ROW`, with its `TD-KERNEL-RUN` rows in the `run` column.
fn render_table(rows: &[String]) -> String {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .filter_map(|r| serde_json::from_str(r).ok())
        .collect();
    let mut t = String::from(
        "| kernel | probes attached | not attached (why) | degraded | trusted | exit | run: cause, off-CPU shares (classes from) |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for v in rows.iter().filter(|v| v.get("test").is_none()) {
        let list = |k: &str| {
            let items: Vec<&str> = v[k]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join("; ")
            }
        };
        let run: Vec<String> = rows
            .iter()
            .filter(|r| r.get("test").is_some() && r["kernel"] == v["kernel"])
            .map(run_cell)
            .collect();
        t.push_str(&format!(
            "| {} | {} of {} | {} | {} | {} | {} | {} |\n",
            v["kernel"].as_str().unwrap_or("?"),
            v["probes_attached"],
            v["probes_listed"],
            list("not_attached"),
            list("degraded"),
            if v["trusted"] == true { "yes" } else { "no" },
            v["exit_code"],
            if run.is_empty() {
                "not run".to_string()
            } else {
                run.join("; ")
            }
        ));
    }
    t
}

/// One `run` row as a table cell: "fs.serialized: path 99.7 % (exact)", the classes of 1 %
/// or more, largest first.
fn run_cell(r: &serde_json::Value) -> String {
    let mut shares: Vec<(&String, f64)> = r["shares_pct"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(c, v)| Some((c, v.as_f64()?)))
        .filter(|(_, v)| *v >= 1.0)
        .collect();
    shares.sort_by(|a, b| b.1.total_cmp(&a.1));
    let shares: Vec<String> = shares.iter().map(|(c, v)| format!("{c} {v} %")).collect();
    format!(
        "{}: {} ({})",
        r["cause"].as_str().unwrap_or("?"),
        shares.join(", "),
        r["method"].as_str().unwrap_or("?")
    )
}

/// Keeps the tracepoint formats the guest printed (fixtures for the loader's unit tests come
/// from these).
fn save_formats(k: &Kernel, console: &str) -> Result<()> {
    let dir = kernel_dir(k).join("formats");
    std::fs::create_dir_all(&dir)?;
    let mut cur: Option<(String, String)> = None;
    for l in console.lines() {
        if let Some(name) = l.strip_prefix("TD-VM-FORMAT-BEGIN ") {
            cur = Some((name.trim().replace('/', "-"), String::new()));
        } else if l.starts_with("TD-VM-FORMAT-END") {
            if let Some((n, t)) = cur.take() {
                std::fs::write(dir.join(format!("{n}.format")), t)?;
            }
        } else if let Some((_, t)) = cur.as_mut() {
            t.push_str(l.trim_end_matches('\r'));
            t.push('\n');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A stall report adds nothing; a test's line (even one with brackets) does.
    #[test]
    fn kernel_messages_are_not_guest_progress() {
        let before = b"TD-VM-BOOT\r\nrunning 4 tests\n[    1.234567] fuse: init\n";
        let base = super::guest_output_len(before);
        assert_eq!(base, "TD-VM-BOOT\n".len() + "running 4 tests\n".len() + 1);
        let mut stalled = before.to_vec();
        stalled.extend_from_slice(
            b"[  245.000001] watchdog: BUG: soft lockup - CPU#0 stuck for 23s! [python3:177]\n\
              [  260.5] rcu: INFO: rcu_sched self-detected stall on CPU\n[12.0]\n",
        );
        assert_eq!(super::guest_output_len(&stalled), base);
        let mut test = stalled.clone();
        test.extend_from_slice(b"[ok] test a ... ok\n[1] x\n");
        assert_eq!(
            super::guest_output_len(&test),
            base + "[ok] test a ... ok\n".len() + "[1] x\n".len()
        );
    }

    /// A guest's class share 10 points from the host's passes, 10.1 fails, and so does another
    /// cause; the table shows the classes of 1 % or more, largest first.
    #[test]
    fn run_rows_are_compared_with_the_hosts_and_tabled() {
        let row = |kernel: &str, cause: &str, lock: f64, sleep: f64| {
            format!(
                r#"{{"kernel":"{kernel}","test":"t","cause":"{cause}","method":"exact","shares_pct":{{"file_lock":{lock},"sleep":{sleep},"unknown":0.0}}}}"#
            )
        };
        let host = vec![row("6.18", "lock.contention", 74.9, 24.9)];
        let near = vec![row("5.10", "lock.contention", 64.9, 34.9)];
        assert!(super::compare_run_rows(&host, &near).is_empty());
        let far = vec![row("5.10", "lock.contention", 64.8, 24.9)];
        assert_eq!(
            super::compare_run_rows(&host, &far),
            ["5.10 \"t\": file_lock Some(64.8) % (host 74.9 %)"]
        );
        let other = vec![row("6.1", "fs.serialized", 74.9, 24.9)];
        assert_eq!(super::compare_run_rows(&host, &other).len(), 1);
        let kernel = r#"{"kernel":"5.10","probes_attached":11,"probes_listed":19,"not_attached":[],"degraded":[],"trusted":true,"exit_code":0}"#;
        let table = super::render_table(&[kernel.to_string(), near[0].clone()]);
        assert!(
            table.ends_with(
                "| 5.10 | 11 of 19 | none | none | yes | 0 | lock.contention: file_lock 64.9 %, sleep 34.9 % (exact) |\n"
            ),
            "{table}"
        );
    }
}
