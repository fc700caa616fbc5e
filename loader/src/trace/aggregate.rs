//! Turns raw kernel counts and the sampled path strings into resolved calls (which mounts each
//! walk crossed), and those into the report's tables.

use std::collections::HashMap;

use trapdetect_common::{
    fuse::{FuseKey, FuseQueueKey, opcode_name},
    paths::{PF_ABSOLUTE, PF_DIRFD, PF_NO_PATH, PF_NOFOLLOW, PF_UNREADABLE, PathKey, hash_path},
    syscalls::SYSCALLS,
};

use crate::{
    escape,
    host::mounts::{MountTable, normalize, relative_lookups},
    probe::PathTotals,
    report::{
        FsRow, FuseOps, FuseQueueRow, LatencyBuckets, PathRow, SyscallRow, latency, merge_hist,
    },
    traps::{
        fs::{Base, CallObs, FuseObs},
        round,
    },
};

/// Resolution of every path key.
pub struct Resolved {
    /// Calls with a known path (or no path at all).
    pub calls: Vec<CallObs>,
    /// Calls whose path string never arrived (ring buffer full) or could not be read.
    pub unknown_calls: u64,
}

/// Resolves each key: its walk per mount, and the mount of the object it names.
pub fn resolve(
    paths: &HashMap<PathKey, PathTotals>,
    strings: &HashMap<PathKey, Vec<u8>>,
    mounts: &MountTable,
    cwd_hints: &[Vec<u8>],
) -> Resolved {
    let mut calls = vec![];
    let mut unknown_calls = 0;
    for (key, t) in paths {
        let syscall = SYSCALLS
            .get(key.kind as usize)
            .map(|s| s.name)
            .unwrap_or("?");
        let base_mount = (key.base_dev != 0)
            .then(|| mounts.by_dev(key.base_dev, cwd_hints))
            .flatten();
        let rel_base = if key.flags & PF_DIRFD != 0 {
            Base::Dirfd
        } else {
            Base::Cwd
        };
        let (path, base, target, walk) = if key.flags & PF_NO_PATH != 0 {
            (
                None,
                if key.kind == trapdetect_common::syscalls::K_FCHDIR {
                    Base::Dirfd
                } else {
                    Base::None
                },
                base_mount,
                vec![],
            )
        } else if key.flags & PF_UNREADABLE != 0 {
            unknown_calls += t.count;
            continue;
        } else {
            let Some(raw) = strings.get(key) else {
                unknown_calls += t.count;
                continue;
            };
            // A path rewritten between enter and exit hashes differently: not the one counted.
            if hash_path(raw) != key.hash {
                unknown_calls += t.count;
                continue;
            }
            if key.flags & PF_ABSOLUTE != 0 {
                let p = normalize(raw);
                let walk = mounts.lookups(&p);
                let target = mounts.mount_of(&p);
                (Some(p), Base::Absolute, target, walk)
            } else {
                let n = relative_lookups(raw);
                let walk = match base_mount {
                    Some(m) if n > 0 => vec![(m, n)],
                    _ => vec![],
                };
                (Some(raw.clone()), rel_base, base_mount, walk)
            }
        };
        calls.push(CallObs {
            syscall,
            path,
            base,
            nofollow: key.flags & PF_NOFOLLOW != 0,
            target,
            walk,
            count: t.count,
            errors: t.errors,
            sum_ns: t.sum_ns,
            max_ns: t.max_ns,
            hist: t.hist.clone(),
        });
    }
    calls.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.syscall.cmp(b.syscall))
            .then_with(|| a.path.cmp(&b.path))
    });
    Resolved {
        calls,
        unknown_calls,
    }
}

/// FUSE request counts attributed to mounts by connection device.
pub fn fuse_obs(fuse: &HashMap<FuseKey, u64>, mounts: &MountTable) -> Vec<FuseObs> {
    // The kernel keys requests from inside a traced path call apart (`IN_PATH_CALL`): one row
    // per (mount, opcode), with that part kept.
    let mut rows: HashMap<(Option<usize>, &'static str), (u64, u64)> = HashMap::new();
    for (k, &count) in fuse {
        let e = rows
            .entry((mounts.by_dev(k.dev, &[]), opcode_name(k.opcode)))
            .or_default();
        e.0 += count;
        if k.opcode & trapdetect_common::fuse::IN_PATH_CALL != 0 {
            e.1 += count;
        }
    }
    let mut out: Vec<FuseObs> = rows
        .into_iter()
        .map(|((mount, opcode), (count, in_path_calls))| FuseObs {
            mount,
            opcode,
            count,
            in_path_calls,
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.opcode.cmp(b.opcode)));
    out
}

fn per(v: f64, requests: Option<u64>) -> Option<f64> {
    requests.filter(|&r| r > 0).map(|r| round(v / r as f64, 3))
}

fn per_second(v: f64, window_s: f64, decimals: i32) -> f64 {
    if window_s > 0.0 {
        round(v / window_s, decimals)
    } else {
        0.0
    }
}

/// The syscall table: one row per (syscall, filesystem of the named object).
pub fn syscall_rows(
    calls: &[CallObs],
    mounts: &MountTable,
    requests: Option<u64>,
    window_s: f64,
) -> Vec<SyscallRow> {
    struct Acc {
        count: u64,
        errors: u64,
        lookups: u64,
        sum_ns: u64,
        max_ns: u64,
        hist: Vec<u64>,
    }
    let mut by: HashMap<(&str, Option<usize>), Acc> = HashMap::new();
    for c in calls {
        let a = by.entry((c.syscall, c.target)).or_insert(Acc {
            count: 0,
            errors: 0,
            lookups: 0,
            sum_ns: 0,
            max_ns: 0,
            hist: vec![],
        });
        a.count += c.count;
        a.errors += c.errors;
        a.lookups += c.count * c.walk.iter().map(|(_, n)| *n as u64).sum::<u64>();
        a.sum_ns += c.sum_ns;
        a.max_ns = a.max_ns.max(c.max_ns);
        merge_hist(&mut a.hist, &c.hist);
    }
    let mut rows: Vec<SyscallRow> = by
        .into_iter()
        .map(|((syscall, target), a)| {
            let (fs_type, mount_point) = match target {
                Some(m) => (
                    escape::text(&mounts.mounts[m].fs_type),
                    mounts.mounts[m].mount_point_display(),
                ),
                None => ("?".into(), "?".into()),
            };
            SyscallRow {
                syscall: syscall.to_string(),
                fs_type,
                mount_point,
                count: a.count,
                errors: a.errors,
                per_request: per(a.count as f64, requests),
                per_second: per_second(a.count as f64, window_s, 2),
                lookups: a.lookups,
                lookups_per_request: per(a.lookups as f64, requests),
                latency: latency(&a.hist, a.count, a.sum_ns, a.max_ns),
            }
        })
        .collect();
    // Most total time first: that is where requests wait.
    rows.sort_by(|a, b| {
        (b.latency.mean_us * b.count as f64)
            .total_cmp(&(a.latency.mean_us * a.count as f64))
            .then_with(|| b.count.cmp(&a.count))
            .then_with(|| a.syscall.cmp(&b.syscall))
    });
    rows
}

/// FUSE request latency by (mount, requests ahead), rows sorted by `ahead`.
pub fn fuse_queue_rows(
    queue: &HashMap<FuseQueueKey, (u64, u64)>,
    mounts: &MountTable,
) -> HashMap<usize, Vec<FuseQueueRow>> {
    let mut by: HashMap<usize, Vec<FuseQueueRow>> = HashMap::new();
    for (k, &(count, sum_ns)) in queue {
        let Some(m) = mounts.by_dev(k.dev, &[]) else {
            continue;
        };
        if count == 0 {
            continue;
        }
        let rows = by.entry(m).or_default();
        match rows.iter_mut().find(|r| r.ahead == k.ahead) {
            Some(r) => {
                let total = r.mean_us * r.count as f64 + sum_ns as f64 / 1e3;
                r.count += count;
                r.mean_us = total / r.count as f64;
            }
            None => rows.push(FuseQueueRow {
                ahead: k.ahead,
                count,
                mean_us: sum_ns as f64 / 1e3 / count as f64,
            }),
        }
    }
    for rows in by.values_mut() {
        rows.sort_by_key(|r| r.ahead);
        for r in rows.iter_mut() {
            r.mean_us = round(r.mean_us, 1);
        }
    }
    by
}

/// The filesystem table: lookups per mount walked.
pub fn fs_rows(
    calls: &[CallObs],
    fuse: &[FuseObs],
    fuse_queue: &HashMap<usize, Vec<FuseQueueRow>>,
    mounts: &MountTable,
    requests: Option<u64>,
    window_s: f64,
) -> Vec<FsRow> {
    let mut lookups: HashMap<usize, u64> = HashMap::new();
    let mut time_ns: HashMap<usize, u64> = HashMap::new();
    // The calls ending on each mount: their latency histogram.
    let mut hists: HashMap<usize, Vec<u64>> = HashMap::new();
    for c in calls {
        for (m, n) in &c.walk {
            *lookups.entry(*m).or_default() += c.count * *n as u64;
        }
        if let Some(t) = c.target {
            *time_ns.entry(t).or_default() += c.sum_ns;
            merge_hist(hists.entry(t).or_default(), &c.hist);
        }
    }
    let mut idx: Vec<usize> = lookups.keys().chain(time_ns.keys()).copied().collect();
    idx.extend(fuse.iter().filter_map(|f| f.mount));
    idx.extend(fuse_queue.keys());
    idx.sort();
    idx.dedup();
    let mut rows: Vec<FsRow> = idx
        .into_iter()
        .map(|m| {
            let mount = &mounts.mounts[m];
            let l = lookups.get(&m).copied().unwrap_or(0);
            FsRow {
                mount_point: mount.mount_point_display(),
                fs_type: escape::text(&mount.fs_type),
                source: escape::bytes(&mount.source),
                slow: mount.slow_kind(),
                lookups: l,
                lookups_per_request: per(l as f64, requests),
                lookups_per_second: per_second(l as f64, window_s, 1),
                syscall_ms_per_request: per(
                    time_ns.get(&m).copied().unwrap_or(0) as f64 / 1e6,
                    requests,
                ),
                // Where the calls were timed (a sampled backend counts calls, not latency).
                syscall_latency: hists
                    .get(&m)
                    .map(|h| (h, h.iter().sum::<u64>()))
                    .filter(|(_, n)| *n > 0)
                    .map(|(h, n)| LatencyBuckets::of(h, n, time_ns.get(&m).copied().unwrap_or(0))),
                fuse_ops: fuse
                    .iter()
                    .filter(|f| f.mount == Some(m))
                    .map(|f| FuseOps {
                        opcode: f.opcode.to_string(),
                        count: f.count,
                        per_request: per(f.count as f64, requests),
                        per_second: per_second(f.count as f64, window_s, 1),
                    })
                    .collect(),
                fuse_queue: fuse_queue.get(&m).cloned().unwrap_or_default(),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.lookups
            .cmp(&a.lookups)
            .then_with(|| a.mount_point.cmp(&b.mount_point))
    });
    rows
}

/// The most called paths.
pub fn path_rows(
    calls: &[CallObs],
    mounts: &MountTable,
    requests: Option<u64>,
    top: usize,
) -> Vec<PathRow> {
    calls
        .iter()
        .filter(|c| c.path.is_some())
        .take(top)
        .map(|c| PathRow {
            syscall: c.syscall.to_string(),
            path: c.path.as_deref().map(escape::bytes).unwrap_or_default(),
            base: c.base.label(),
            nofollow: c.nofollow,
            count: c.count,
            errors: c.errors,
            per_request: per(c.count as f64, requests),
            walk: c
                .walk
                .iter()
                .map(|(m, n)| format!("{}:{n}", escape::text(&mounts.mounts[*m].fs_type)))
                .collect::<Vec<_>>()
                .join(" "),
            mean_us: if c.count > 0 {
                round(c.sum_ns as f64 / c.count as f64 / 1000.0, 2)
            } else {
                0.0
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use trapdetect_common::syscalls::*;

    fn totals(count: u64, sum_ns: u64) -> PathTotals {
        let mut hist = vec![0u64; trapdetect_common::hist::HIST_BUCKETS as usize];
        hist[trapdetect_common::hist::bucket_of(1000) as usize] = count;
        PathTotals {
            count,
            errors: 0,
            sum_ns,
            max_ns: 2000,
            hist,
        }
    }

    #[test]
    fn keys_resolve_to_walks_and_unknowns_are_counted() {
        let mounts =
            MountTable::parse(include_str!("../../fixtures/mountinfo/nfs-sshfs.txt")).unwrap();
        let nfs = mounts.mount_of(b"/home/alice").unwrap();
        let abs = b"/home/alice/src/../www/index.php".to_vec();
        let k_abs = PathKey {
            hash: hash_path(&abs),
            base_dev: 0,
            kind: K_OPENAT,
            flags: PF_ABSOLUTE,
        };
        let rel = b"vendor/autoload.php".to_vec();
        let k_rel = PathKey {
            hash: hash_path(&rel),
            base_dev: mounts.mounts[nfs].kernel_dev(),
            kind: K_NEWFSTATAT,
            flags: PF_NOFOLLOW,
        };
        let k_cwd = PathKey {
            hash: 0,
            base_dev: mounts.mounts[nfs].kernel_dev(),
            kind: K_GETCWD,
            flags: PF_NO_PATH,
        };
        let lost = b"/lost".to_vec();
        let k_lost = PathKey {
            hash: hash_path(&lost),
            base_dev: 0,
            kind: K_CHDIR,
            flags: PF_ABSOLUTE,
        };
        let tampered = PathKey {
            hash: 12345,
            base_dev: 0,
            kind: K_CHDIR,
            flags: PF_ABSOLUTE,
        };
        let paths: HashMap<PathKey, PathTotals> = [
            (k_abs, totals(10, 10_000)),
            (k_rel, totals(20, 20_000)),
            (k_cwd, totals(10, 1_000)),
            (k_lost, totals(3, 3_000)),
            (tampered, totals(4, 4_000)),
        ]
        .into_iter()
        .collect();
        let strings: HashMap<PathKey, Vec<u8>> =
            [(k_abs, abs), (k_rel, rel), (tampered, b"/x".to_vec())]
                .into_iter()
                .collect();
        let r = resolve(&paths, &strings, &mounts, &[b"/home/alice/www".to_vec()]);
        assert_eq!(r.unknown_calls, 7);
        assert_eq!(r.calls.len(), 3);
        let stat = r.calls.iter().find(|c| c.syscall == "newfstatat").unwrap();
        assert_eq!(stat.walk, vec![(nfs, 2)]);
        assert_eq!(stat.base, Base::Cwd);
        let open = r.calls.iter().find(|c| c.syscall == "openat").unwrap();
        assert_eq!(
            open.path.as_deref(),
            Some(&b"/home/alice/www/index.php"[..])
        );
        let root = mounts.mount_of(b"/").unwrap();
        assert_eq!(open.walk, vec![(root, 2), (nfs, 2)]);
        let rows = fs_rows(&r.calls, &[], &HashMap::new(), &mounts, Some(10), 1.0);
        let nfs_row = rows.iter().find(|f| f.fs_type == "nfs4").unwrap();
        // openat: 10 calls × 2 + newfstatat: 20 × 2 = 60 lookups on NFS, 6 per request.
        assert_eq!(nfs_row.lookups, 60);
        assert_eq!(nfs_row.lookups_per_request, Some(6.0));
        let srows = syscall_rows(&r.calls, &mounts, Some(10), 1.0);
        let getcwd = srows.iter().find(|s| s.syscall == "getcwd").unwrap();
        assert_eq!((getcwd.fs_type.as_str(), getcwd.lookups), ("nfs4", 0));
        assert_eq!(getcwd.per_request, Some(1.0));
    }
}
