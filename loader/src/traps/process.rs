//! Process traps: proc.not-fresh (the instance carries an earlier run: its peak memory, its
//! age, its descriptors) and proc.provenance (which binary ran: path, sha256, build-id,
//! libc, and whether it was replaced on disk).

use super::{Finding, Id, Severity, fpm::human_bytes};
use crate::{escape, host::process::Process};

/// Peak-to-current ratio and size above which a process is said to carry an earlier peak.
const HWM_RATIO: f64 = 2.0;
const HWM_EXCESS_KIB: u64 = 64 * 1024;
/// Age beyond which a server is said to be a long-running instance.
const OLD_S: f64 = 3600.0;

/// Human duration (`3 d 4 h`, `12 min 5 s`).
pub fn human_duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min {sec} s")
    } else {
        format!("{sec} s")
    }
}

/// proc.not-fresh: warn when the peak resident set is far above the current one (an earlier
/// flood grew it); info when the instance has simply run for a long time.
pub fn not_fresh(p: &Process) -> Option<Finding> {
    let rss = p.status.vm_rss_kib?;
    let hwm = p.status.vm_hwm_kib.unwrap_or(rss);
    let grown = hwm as f64 >= HWM_RATIO * rss as f64 && hwm.saturating_sub(rss) >= HWM_EXCESS_KIB;
    let old = p.age_s >= OLD_S;
    if !grown && !old {
        return None;
    }
    let (severity, title) = if grown {
        (
            Severity::Warn,
            format!(
                "peak RSS {} is {:.1}× the current {}: an earlier load left this instance grown (running {})",
                human_bytes(hwm * 1024),
                hwm as f64 / rss.max(1) as f64,
                human_bytes(rss * 1024),
                human_duration(p.age_s)
            ),
        )
    } else {
        (
            Severity::Info,
            format!(
                "the instance has run for {}: results include whatever earlier runs left (grown heaps, warm caches)",
                human_duration(p.age_s)
            ),
        )
    };
    Some(
        Finding::new(Id::ProcNotFresh, severity, title)
            .with("uptime_s", super::round(p.age_s, 1))
            .with("vm_rss_bytes", rss * 1024)
            .with("vm_hwm_bytes", hwm * 1024)
            .with_opt("fd_count", p.fd_count)
            .with("threads", p.status.threads as u64)
            .remedy(
                "start a fresh instance per measured point (and warm it the same way each time)",
            ),
    )
}

/// proc.provenance: the facts that say which binary ran; warn when the binary on disk is no
/// longer the one running.
pub fn provenance(p: &Process) -> Option<Finding> {
    let exe = p.exe.as_ref()?;
    let path = escape::bytes(&exe.path);
    let libc = exe.elf.as_ref().map(|e| e.libc());
    let mut title = path.clone();
    if let Some(e) = &exe.elf {
        title.push_str(&format!(
            " ({} {}, {})",
            e.machine,
            match libc {
                Some(l) => l.name(),
                None => "?",
            },
            e.build_id
                .as_deref()
                .map(|b| format!("build-id {}", &b[..b.len().min(12)]))
                .unwrap_or_else(|| "no build-id".into())
        ));
    }
    let (severity, title, remedy) = if exe.deleted {
        (
            Severity::Warn,
            format!(
                "{title} was replaced or removed on disk after this process started it: the binary that runs is not the one at that path"
            ),
            format!(
                "restart the server so it runs what {path} holds now (compare the sha256 below with `sha256sum {}`)",
                escape::shell(&path)
            ),
        )
    } else {
        (
            Severity::Info,
            format!("runs {title}"),
            "record these with the results; compare sha256 across runs".to_string(),
        )
    };
    let mut f = Finding::new(Id::ProcProvenance, severity, title)
        .with("exe", path)
        .with("deleted", exe.deleted)
        .with_opt("sha256", exe.sha256.clone())
        .with_opt("size_bytes", exe.size_bytes)
        .with_opt(
            "build_id",
            exe.elf.as_ref().and_then(|e| e.build_id.clone()),
        )
        .with_opt("libc", libc.map(|l| l.name()))
        .with_opt(
            "interpreter",
            exe.elf.as_ref().and_then(|e| e.interp.clone()),
        )
        .with_opt("elf_error", exe.elf_error.clone())
        .remedy(remedy);
    if libc == Some(crate::host::process::Libc::Musl) {
        f = f.predict("musl's allocator: allocation-heavy loops run 3–4× slower than on glibc; compare like with like");
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::process::{ElfInfo, Exe, Stat, Status};

    fn proc_with(rss: u64, hwm: u64, age: f64) -> Process {
        Process {
            pid: 7,
            stat: Stat::default(),
            status: Status {
                vm_rss_kib: Some(rss),
                vm_hwm_kib: Some(hwm),
                threads: 4,
                ..Default::default()
            },
            cmdline: vec![],
            age_s: age,
            exe: None,
            cwd: None,
            fd_count: Some(12),
            open_paths: vec![],
            traced: vec![],
            children: vec![],
            denied: vec![],
        }
    }

    #[test]
    fn grown_instance_warns_with_both_numbers() {
        // The seed's wedged queue: 6.2 GB peak, 1.5 GB now.
        let f = not_fresh(&proc_with(1_500_000, 6_200_000, 5400.0)).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.evidence["vm_hwm_bytes"], 6_200_000u64 * 1024);
        assert_eq!(f.evidence["vm_rss_bytes"], 1_500_000u64 * 1024);
        assert!(f.title.contains("4.1×"), "{}", f.title);
        assert!(f.title.contains("running 1 h 30 min"), "{}", f.title);
    }

    #[test]
    fn fresh_small_and_old_instances() {
        assert!(not_fresh(&proc_with(20_000, 30_000, 5.0)).is_none());
        // Doubling a small heap is not news.
        assert!(not_fresh(&proc_with(2_000, 8_000, 5.0)).is_none());
        let f = not_fresh(&proc_with(20_000, 30_000, 3.0 * 86_400.0)).unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert!(f.title.contains("3 d 0 h"));
    }

    #[test]
    fn provenance_musl_and_deleted() {
        let mut p = proc_with(1, 1, 1.0);
        p.exe = Some(Exe {
            path: b"/srv/app/bin/server".to_vec(),
            deleted: true,
            sha256: Some("ab".repeat(32)),
            size_bytes: Some(14_176),
            elf: Some(ElfInfo {
                class: 64,
                machine: "x86_64".into(),
                interp: Some("/lib/ld-musl-x86_64.so.1".into()),
                needed: vec!["libc.so".into()],
                build_id: Some("1e7667db711fd7e522ff454dc88738527978a813".into()),
                dynamic: true,
            }),
            elf_error: None,
        });
        let f = provenance(&p).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.evidence["libc"], "musl");
        assert_eq!(f.evidence["deleted"], true);
        assert!(
            f.title.starts_with(
                "/srv/app/bin/server (x86_64 musl, build-id 1e7667db711f) was replaced"
            )
        );
        assert!(f.predicted.unwrap().contains("3–4×"));
        p.exe.as_mut().unwrap().deleted = false;
        assert_eq!(provenance(&p).unwrap().severity, Severity::Info);
    }
}
