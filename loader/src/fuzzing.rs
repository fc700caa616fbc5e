//! One entry point per parser that reads bytes the user or the traced target controls, for the
//! cargo-fuzz targets in `fuzz/` and for replaying their checked-in seed corpus as a plain test.
//!
//! Each function must never panic, hang or allocate without bound on any input; where a parser
//! has an invariant that holds for every input, it is asserted here so the fuzzer checks it.

use std::path::Path;

use crate::{
    btf::Btf,
    host::{fpm, host as hostinfo, mounts::MountTable, net, process},
    load,
};

/// A fuzz entry point.
pub type Target = fn(&[u8]);

/// Every target by name (the names of the cargo-fuzz targets and the corpus directories).
pub const TARGETS: &[(&str, Target)] = &[
    ("mountinfo", mountinfo),
    ("proc_files", proc_files),
    ("fpm_config", fpm_config),
    ("btf", btf),
    ("elf", elf),
    ("sock_diag", sock_diag),
    ("proc_net_tcp", proc_net_tcp),
    ("http_response", http_response),
    ("flags", flags),
    ("load_results", load_results),
    ("strace", strace),
];

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// `/proc/PID/mountinfo` of the target's mount namespace.
pub fn mountinfo(data: &[u8]) {
    if let Ok(t) = MountTable::parse(&text(data)) {
        for m in &t.mounts {
            // Every mount point is held by some mount (itself or one stacked over it).
            assert!(t.mount_of(&m.mount_point).is_some());
        }
        let _ = t.mount_of(b"/");
    }
}

/// `/proc/PID/stat`, `status`, `limits`, `/proc/stat`, CPU lists, load average, PSI, kmsg.
pub fn proc_files(data: &[u8]) {
    let _ = process::parse_stat(data);
    let t = text(data);
    let _ = process::parse_status(&t);
    let _ = process::parse_cpu_list(&t);
    let _ = net::procfs::parse_nofile(&t);
    let _ = hostinfo::parse_proc_stat(&t);
    let _ = hostinfo::parse_loadavg(&t);
    let _ = hostinfo::parse_psi(&t);
    let _ = hostinfo::parse_memory(&t, &t);
    let _ = hostinfo::parse_kmsg_record(data);
    let _ = hostinfo::parse_kmsg_text(&t);
    let _ = crate::host::cpu::parse_proc_cgroup(&t);
    let _ = crate::host::cpu::parse_cpu_max(&t);
    let _ = crate::host::cpu::parse_cpu_stat(&t);
}

/// A php-fpm configuration with an included file: the input up to the first NUL is the main
/// file, the rest the file `inc.conf` next to it (the main file may `include=` it, or a glob).
pub fn fpm_config(data: &[u8]) {
    // A directory per input, made and removed around it (a counter keeps the corpus-replaying
    // unit test's threads apart): nothing is left in the temporary directory afterwards.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("trapdetect-fuzz-fpm-{}-{n}", std::process::id()));
    let (main, inc) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let m = d.join("main.conf");
    if std::fs::create_dir_all(&d).is_ok()
        && std::fs::write(&m, main).is_ok()
        && std::fs::write(d.join("inc.conf"), inc).is_ok()
    {
        let _ = fpm::load(&m, d.to_str().unwrap_or("/nonexistent"));
        for l in text(main).lines() {
            let _ = fpm::parse_line(l);
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A kernel BTF blob (`--btf FILE`).
pub fn btf(data: &[u8]) {
    if let Ok(b) = Btf::parse(data) {
        for (s, f) in [
            ("task_struct", "pid"),
            ("task_struct", "files"),
            ("file", "f_inode"),
            ("sock_common", "skc_net"),
        ] {
            let _ = b.offset(s, f);
        }
    }
}

/// The target's executable, for its provenance (libc, build id).
pub fn elf(data: &[u8]) {
    let _ = process::parse_elf(data);
}

/// One `recv` of a sock_diag TCP dump (what the kernel, or a hostile namespace, hands back).
pub fn sock_diag(data: &[u8]) {
    let mut n = 0usize;
    let _ = net::diag::parse_batch(data, 1, &mut |_| n += 1);
    assert!(
        n <= data.len() / 16 + 1,
        "more sockets than messages could hold"
    );
}

/// `/proc/net/tcp`, `/proc/net/netstat`, port lists and sysctl lines.
pub fn proc_net_tcp(data: &[u8]) {
    let t = text(data);
    let (socks, _) = net::procfs::parse_tcp(&t);
    assert!(socks.len() <= t.lines().count());
    let _ = net::procfs::parse_netstat(&t);
    let _ = net::procfs::parse_port_list(&t);
    let sys = net::procfs::parse_sysctl_lines(&t);
    let sysctls = net::procfs::sysctls_from(&sys);
    let o = net::NetObservation::build(&socks, &sysctls, &[80], None);
    let _ = crate::traps::net::rules(&o);
}

/// An HTTP/1.1 response (the server under test controls every byte), fed in pieces whose
/// sizes the first byte chooses, as reads from a socket would deliver it.
pub fn http_response(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let step = (first as usize % 17) + 1;
    let mut r = load::http::ResponseReader::new(first & 0x80 != 0);
    let mut buf: Vec<u8> = vec![];
    for piece in rest.chunks(step) {
        buf.extend_from_slice(piece);
        match r.feed(&buf) {
            Ok(used) => {
                assert!(used <= buf.len());
                buf.drain(..used);
            }
            Err(_) => return,
        }
        if r.done() {
            return;
        }
    }
    let _ = r.eof();
}

/// Command-line values: durations, rates, sizes, URLs, path mixes, host patterns.
pub fn flags(data: &[u8]) {
    let t = text(data);
    if let Ok(d) = crate::util::parse_duration(&t) {
        assert!(!d.is_zero() && d.as_secs() <= 86_400);
    }
    if let Ok(r) = crate::util::parse_rate(&t) {
        assert!(r.is_finite() && r > 0.0);
    }
    if let Ok(s) = crate::util::parse_size(&t) {
        assert!(s >= 1);
    }
    let _ = load::Url::parse(&t);
    let _ = load::parse_path_mix(&t);
    if let Ok(h) = load::expand_hosts(&t) {
        assert!(!h.is_empty());
    }
}

/// Another generator's results (`run --load-results FILE`, or a command's output).
pub fn load_results(data: &[u8]) {
    if let Ok(mut r) = load::external::parse(data, 1_715_258_085.0) {
        // Buckets stay within the span a results file may cover.
        let span = load::external::results::MAX_SECONDS * 2;
        assert!(r.seconds.keys().all(|t| t.abs() <= span));
        for s in r.seconds.values() {
            assert!(s.p99_us.is_none_or(|p| p.is_finite() && p >= 0.0));
        }
        let _ = r.missing();
        r.shift(-3.6);
        let _ = serde_json::to_string(&r);
    }
}

/// An `strace -f -tt -T -y` log (`trace --from-strace`), resolved against a fixed mount table.
pub fn strace(data: &[u8]) {
    let mounts = MountTable::parse(
        "25 1 8:1 / / rw - ext4 /dev/sda1 rw\n36 25 0:44 / /mnt/slow rw - fuse.slowfs slowfs rw\n",
    )
    .unwrap_or_default();
    let mut m = crate::strace::Model::default();
    m.feed(&text(data), Some(1), &mounts);
    assert!(m.calls_seen <= m.lines);
    let r = crate::strace::judge(m, mounts, 12);
    for row in &r.filesystems {
        assert!(row.lookups_per_second.is_finite());
    }
    let _ = r.to_json();
}

/// Replays a corpus directory through a target (for the plain test and `cargo xtask fuzz`).
pub fn replay(dir: &Path, f: Target) -> usize {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if let Ok(b) = std::fs::read(e.path()) {
                f(&b);
                n += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    /// The checked-in seed corpus (and every crash the fuzzers found, kept as a regression
    /// input) runs through each target on stable, in every `cargo test`.
    #[test]
    fn seed_corpus_replays_cleanly() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
        for (name, f) in super::TARGETS {
            let n = super::replay(&root.join(name), *f);
            assert!(n > 0, "no seed inputs for {name} in {}", root.display());
        }
        // The php-fpm target writes its inputs to files: none of them is left behind.
        let ours = format!("trapdetect-fuzz-fpm-{}-", std::process::id());
        let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&ours))
            .map(|e| e.path())
            .collect();
        assert_eq!(left, Vec::<std::path::PathBuf>::new());
    }

    use std::path::Path;
}
