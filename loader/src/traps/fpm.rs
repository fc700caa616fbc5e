//! PHP-FPM traps: fpm.memory (max_children × peak worker RSS against the memory the pool can
//! have: FPM never multiplies), fpm.ramp (dynamic pools grow by the idle deficit once a
//! second; ondemand forks on arrival), fpm.oversized (more workers than CPUs), fpm.socket-path
//! (sun_path truncation), fpm.alert-patterns (the two spellings of the max_children warning),
//! fpm.spare-servers (FPM's own start/min/max spare rule: it refuses to start).

use super::{Finding, Id, Severity};
use crate::{
    escape,
    host::fpm::{
        ALERT_DYNAMIC, ALERT_ONDEMAND, AlertCounts, Listen, Master, Pm, Pool, SUN_PATH_LEN, Worker,
    },
};

/// Bytes for titles: `52.3 MiB`, `2.5 GiB` (powers of 1024, as /proc and `free` count).
pub fn human_bytes(b: u64) -> String {
    const K: f64 = 1024.0;
    let f = b as f64;
    if f < K {
        format!("{b} B")
    } else if f < K * K {
        format!("{:.1} KiB", f / K)
    } else if f < K * K * K {
        format!("{:.1} MiB", f / K / K)
    } else {
        format!("{:.1} GiB", f / K / K / K)
    }
}

/// What the pool's memory is compared against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryBasis {
    /// MemAvailable, bytes.
    pub mem_available_bytes: u64,
    /// `--mem-budget`, bytes.
    pub budget_bytes: Option<u64>,
    /// The master's memory cgroup limit, bytes, and its directory.
    pub cgroup_limit: Option<(u64, String)>,
}

/// fpm.memory for one master (or one configuration with its workers): Σ over pools of
/// pm.max_children × the largest VmHWM among that pool's workers, against `--mem-budget` when
/// given, else MemAvailable plus what the workers hold now (capped by a memory cgroup limit).
pub fn memory(
    pools: &[Pool],
    master: &Master,
    basis: &MemoryBasis,
) -> (Option<Finding>, Vec<String>) {
    let mut unmeasured = vec![];
    let mut rows = vec![];
    for p in pools {
        let ws: Vec<_> = master.workers.iter().filter(|w| w.pool == p.name).collect();
        let Some(peak) = ws
            .iter()
            .max_by(|a, b| a.hwm_kib.cmp(&b.hwm_kib).then(b.pid.cmp(&a.pid)))
        else {
            unmeasured.push(p.name.clone());
            continue;
        };
        rows.push((p, ws.clone(), *peak));
    }
    if rows.is_empty() {
        return (None, unmeasured);
    }
    let product: u64 = rows
        .iter()
        .map(|(p, _, w)| p.max_children.max(0) as u64 * w.hwm_kib * 1024)
        .sum();
    let rss_now: u64 = master.workers.iter().map(|w| w.rss_kib * 1024).sum();
    let (headroom, against) = headroom(basis, rss_now);
    let over = product > headroom;
    let (p0, ws0, w0) = &rows[0];
    let single = rows.len() == 1;
    let pools_s = pools_summary(&rows);
    let title = memory_title(
        rows.len() == 1,
        p0,
        w0,
        &pools_s,
        product,
        headroom,
        &against,
        basis,
    );
    let mut f = Finding::new(
        Id::FpmMemory,
        if over { Severity::Fail } else { Severity::Info },
        title,
    )
    .with("master_pid", master.pid as u64);
    if single {
        f = f
            .with("pool", p0.name.clone())
            .with(
                "pm",
                format!("{:?}", p0.pm.unwrap_or(Pm::Static)).to_lowercase(),
            )
            .with("max_children", p0.max_children)
            .with(
                "max_children_source",
                p0.source("pm.max_children").to_string(),
            );
    } else {
        f = f.with("pools", pools_s);
    }
    let workers_rss: Vec<u64> = ws0.iter().take(32).map(|w| w.rss_kib * 1024).collect();
    f = f
        .with("peak_worker_rss_bytes", w0.hwm_kib * 1024)
        .with("peak_worker_pid", w0.pid as u64)
        .with("product_bytes", product)
        .with("workers_running", master.workers.len() as u64)
        .with("workers_rss_bytes", workers_rss)
        .with("pool_rss_now_bytes", rss_now)
        .with_opt(
            "largest_worker_private_bytes",
            master
                .workers
                .first()
                .and_then(|w| w.private_kib)
                .map(|k| k * 1024),
        )
        .with("mem_available_bytes", basis.mem_available_bytes)
        .with_opt("mem_budget_bytes", basis.budget_bytes)
        .with_opt(
            "cgroup_memory_limit_bytes",
            basis.cgroup_limit.as_ref().map(|l| l.0),
        )
        .with("compared_against", against.clone())
        .with("headroom_bytes", headroom);
    if !unmeasured.is_empty() {
        f = f.with("pools_without_workers", unmeasured.join(", "));
    }
    let f = memory_remedy(f, single, product, headroom, &against, p0, w0);
    (Some(f), unmeasured)
}

/// fpm.memory's headroom and what it is: `--mem-budget`, else MemAvailable plus what the
/// workers hold now, capped by a memory cgroup limit.
fn headroom(basis: &MemoryBasis, rss_now: u64) -> (u64, String) {
    match basis.budget_bytes {
        Some(b) => (b, "--mem-budget".to_string()),
        None => {
            let h = basis.mem_available_bytes + rss_now;
            match &basis.cgroup_limit {
                Some((l, dir)) if *l < h => (*l, format!("memory cgroup limit ({dir})")),
                _ => (h, "MemAvailable + the workers' RSS now".to_string()),
            }
        }
    }
}

/// Each pool's max_children × peak, joined with ` + `.
fn pools_summary(rows: &[(&Pool, Vec<&Worker>, &Worker)]) -> String {
    rows.iter()
        .map(|(p, _, w)| {
            format!(
                "{} {} × {}",
                p.name,
                p.max_children,
                human_bytes(w.hwm_kib * 1024)
            )
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// fpm.memory's title: the product of max_children and the peak, against the headroom.
#[allow(clippy::too_many_arguments)]
fn memory_title(
    single: bool,
    p0: &Pool,
    w0: &Worker,
    pools_s: &str,
    product: u64,
    headroom: u64,
    against: &str,
    basis: &MemoryBasis,
) -> String {
    let over = product > headroom;
    format!(
        "{}{} = {} {} {} {} (MemAvailable {})",
        if single {
            format!("pool {}: ", p0.name)
        } else {
            String::new()
        },
        if single {
            format!(
                "{} × {} peak worker RSS",
                p0.max_children,
                human_bytes(w0.hwm_kib * 1024)
            )
        } else {
            pools_s.to_string()
        },
        human_bytes(product),
        if over { ">" } else { "≤" },
        human_bytes(headroom),
        against,
        human_bytes(basis.mem_available_bytes),
    )
}

/// fpm.memory's prediction and remedy: over the headroom, the pm.max_children that fits.
fn memory_remedy(
    f: Finding,
    single: bool,
    product: u64,
    headroom: u64,
    against: &str,
    p0: &Pool,
    w0: &Worker,
) -> Finding {
    let over = product > headroom;
    let fit = if w0.hwm_kib == 0 {
        0
    } else {
        headroom / (w0.hwm_kib * 1024)
    };
    if over {
        f.predict(format!(
            "when every worker is at its peak at once (one burst of expensive requests does it) the pool holds {}, {} more than {}: the kernel swaps or the OOM killer ends workers mid-request",
            human_bytes(product),
            human_bytes(product - headroom),
            against
        ))
        .remedy(if single && fit > 0 {
            format!(
                "pm.max_children = {fit} ({} ÷ {} peak) at {}, or cut what one request allocates",
                human_bytes(headroom),
                human_bytes(w0.hwm_kib * 1024),
                p0.source("pm.max_children")
            )
        } else {
            "lower pm.max_children so Σ max_children × peak fits, or cut what one request allocates".to_string()
        })
    } else {
        f.remedy("none needed at these peaks; the peak is what the workers have allocated so far, so rerun after a realistic load")
    }
}

/// Seconds a dynamic pool needs under saturating load to go from start_servers to
/// max_children, and the worker count after each tick (FPM's maintenance runs once a second,
/// forks min(spawn rate, idle deficit, room) and doubles the spawn rate up to
/// pm.max_spawn_rate).
pub fn ramp_ticks(start: i64, min_spare: i64, max_children: i64, max_spawn_rate: i64) -> Vec<i64> {
    let mut running = start.max(0);
    let mut rate = 1i64;
    let mut steps = vec![running];
    // Bounded: even a pathological config cannot loop forever.
    while running < max_children && steps.len() < 10_000 && min_spare > 0 {
        let fork = rate.min(min_spare).min(max_children - running);
        running += fork;
        steps.push(running);
        if rate < max_spawn_rate {
            rate *= 2;
        }
    }
    steps
}

/// The start_servers FPM uses (it computes one when unset).
pub fn effective_start(p: &Pool) -> i64 {
    p.start_servers
        .unwrap_or(p.min_spare + (p.max_spare - p.min_spare) / 2)
}

/// fpm.ramp: dynamic pools that take seconds to reach max_children, ondemand pools that fork
/// on arrival and retire idle workers.
pub fn ramp(p: &Pool) -> Option<Finding> {
    match p.pm? {
        Pm::Static => None,
        Pm::Dynamic => {
            let start = effective_start(p);
            let steps = ramp_ticks(start, p.min_spare, p.max_children, p.max_spawn_rate);
            let secs = steps.len() as i64 - 1;
            if secs < 2 {
                return None;
            }
            let seq = steps.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
            Some(
                Finding::new(
                    Id::FpmRamp,
                    Severity::Warn,
                    format!(
                        "pool {}: pm = dynamic needs about {secs} s of saturating load to grow from {start} to {} workers ({seq})",
                        p.name, p.max_children
                    ),
                )
                .with("pool", p.name.clone())
                .with("start_servers", start)
                .with("min_spare_servers", p.min_spare)
                .with("max_spare_servers", p.max_spare)
                .with("max_children", p.max_children)
                .with("max_spawn_rate", p.max_spawn_rate)
                .with("seconds_to_max_children", secs)
                .with("workers_per_second", seq)
                .with("source", p.source("pm").to_string())
                .predict(format!(
                    "a burst shorter than {secs} s is served by the {start} workers already running; after the load stops the pool sheds about one worker per second down to {} idle, each keeping its peak memory",
                    p.max_spare
                ))
                .remedy(format!(
                    "pm = static with pm.max_children = {} for benchmarks, or warm up ≥ {secs} s at full load before measuring",
                    p.max_children
                )),
            )
        }
        Pm::Ondemand => Some(
            Finding::new(
                Id::FpmRamp,
                Severity::Warn,
                format!(
                    "pool {}: pm = ondemand forks a worker on arrival when none is idle and retires workers idle for {} s",
                    p.name, p.idle_timeout_s
                ),
            )
            .with("pool", p.name.clone())
            .with("max_children", p.max_children)
            .with("process_idle_timeout_s", p.idle_timeout_s)
            .with("source", p.source("pm").to_string())
            .predict(format!(
                "every pause longer than {} s between benchmark points restarts from cold workers (fork + OPcache attach inside the measured requests)",
                p.idle_timeout_s
            ))
            .remedy(format!(
                "pm = static with pm.max_children = {} for benchmarks",
                p.max_children
            )),
        ),
    }
}

/// fpm.oversized: more workers than the CPUs the master may run on.
pub fn oversized(p: &Pool, cpus: usize) -> Option<Finding> {
    if cpus == 0 || p.max_children <= cpus as i64 {
        return None;
    }
    Some(
        Finding::new(
            Id::FpmOversized,
            Severity::Warn,
            format!(
                "pool {}: {} workers on {cpus} CPU(s): CPU-bound requests contend instead of queueing",
                p.name, p.max_children
            ),
        )
        .with("pool", p.name.clone())
        .with("max_children", p.max_children)
        .with("cpus", cpus as u64)
        .with("workers_per_cpu", super::round(p.max_children as f64 / cpus as f64, 2))
        .with("source", p.source("pm.max_children").to_string())
        .predict("past the CPU count, client latency stops improving while the script's own time rises (21 → 38 ms at 16 workers on 12 cores in the seed)")
        .remedy(format!(
            "pm.max_children = {cpus} for CPU-bound work; raise it only while client-observed latency still improves (I/O-bound pools sit higher)"
        )),
    )
}

/// fpm.socket-path: a unix socket path that does not fit sun_path.
pub fn socket_path(p: &Pool) -> Option<Finding> {
    let Some(Listen::Unix(path)) = &p.listen else {
        return None;
    };
    let len = path.len();
    if len < SUN_PATH_LEN {
        return None;
    }
    let keep = SUN_PATH_LEN - 1;
    let truncated = escape::bytes(&path.as_bytes()[..keep]);
    Some(
        Finding::new(
            Id::FpmSocketPath,
            Severity::Fail,
            format!(
                "pool {}: unix socket path is {len} bytes; sun_path holds {keep} + NUL, and FPM truncates instead of refusing",
                p.name
            ),
        )
        .with("pool", p.name.clone())
        .with("listen", escape::text(path))
        .with("length_bytes", len as u64)
        .with("sun_path_bytes", SUN_PATH_LEN as u64)
        .with("fpm_listens_on", truncated.clone())
        .with("source", p.source("listen").to_string())
        .predict(format!(
            "FPM listens on `{truncated}`; a web server pointed at the configured path gets ENOENT (or reaches another pool's socket)"
        ))
        .remedy(format!(
            "listen = a path of at most {keep} bytes, e.g. /run/php/{}.sock",
            p.name
        )),
    )
}

/// fpm.alert-patterns: the warning FPM logs when a pool runs out of workers is spelled two
/// ways; show both, and count them in the error log when it can be read.
pub fn alert_patterns(
    pools: &[Pool],
    log: Option<&AlertCounts>,
    log_path: Option<&str>,
) -> Option<Finding> {
    let forking: Vec<&Pool> = pools
        .iter()
        .filter(|p| matches!(p.pm, Some(Pm::Dynamic | Pm::Ondemand)))
        .collect();
    if forking.is_empty() && log.is_none_or(|l| l.dynamic + l.ondemand == 0) {
        return None;
    }
    let modes = pools
        .iter()
        .map(|p| {
            format!(
                "{}={}",
                p.name,
                p.pm.map(|m| format!("{m:?}").to_lowercase())
                    .unwrap_or("-".into())
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let hits = log.map(|l| l.dynamic + l.ondemand).unwrap_or(0);
    let target = log_path
        .map(escape::shell)
        .unwrap_or_else(|| "<error_log>".into());
    let title = if hits > 0 {
        format!(
            "the FPM log has {hits} \"server reached ...max_children setting\" line(s): a pool ran out of workers ({} dynamic spelling, {} ondemand)",
            log.map(|l| l.dynamic).unwrap_or(0),
            log.map(|l| l.ondemand).unwrap_or(0)
        )
    } else {
        format!(
            "FPM spells its out-of-workers warning two ways; an alert on one never fires for the other ({modes})"
        )
    };
    Some(
        Finding::new(
            Id::FpmAlertPatterns,
            if hits > 0 {
                Severity::Warn
            } else {
                Severity::Info
            },
            title,
        )
        .with("dynamic_pattern", format!("{ALERT_DYNAMIC} (N)"))
        .with("ondemand_pattern", format!("{ALERT_ONDEMAND} (N)"))
        .with("pools", modes)
        .with_opt("error_log", log_path.map(str::to_string))
        .with_opt("log_scanned_bytes", log.map(|l| l.scanned_bytes))
        .with_opt("dynamic_lines", log.map(|l| l.dynamic))
        .with_opt("ondemand_lines", log.map(|l| l.ondemand))
        .with_opt("last_line", log.and_then(|l| l.last.clone()))
        .remedy(format!(
            "grep -E 'server reached (pm\\.)?max_children setting' {target}"
        )),
    )
}

/// fpm.spare-servers: FPM's own validation of a dynamic pool, in FPM's order and with its
/// ALERT text; FPM refuses to start on any of them.
pub fn spare_servers(p: &Pool) -> Option<Finding> {
    if p.pm != Some(Pm::Dynamic) {
        return None;
    }
    let n = &p.name;
    let (min, max, mc) = (p.min_spare, p.max_spare, p.max_children);
    let alert = if min <= 0 {
        format!("[pool {n}] pm.min_spare_servers({min}) must be a positive value")
    } else if max <= 0 {
        format!("[pool {n}] pm.max_spare_servers({max}) must be a positive value")
    } else if min > mc || max > mc {
        format!(
            "[pool {n}] pm.min_spare_servers({min}) and pm.max_spare_servers({max}) cannot be greater than pm.max_children({mc})"
        )
    } else if max < min {
        format!(
            "[pool {n}] pm.max_spare_servers({max}) must not be less than pm.min_spare_servers({min})"
        )
    } else if let Some(s) = p.start_servers
        && (s < min || s > max)
    {
        format!(
            "[pool {n}] pm.start_servers({s}) must not be less than pm.min_spare_servers({min}) and not greater than pm.max_spare_servers({max})"
        )
    } else if p.max_spawn_rate < 1 {
        format!("[pool {n}] pm.max_spawn_rate must be a positive value")
    } else {
        return None;
    };
    let fix = match p.start_servers {
        Some(s) if min > 0 && max >= min && (s < min || s > max) => format!(
            "pm.start_servers = {} (between {min} and {max}) at {}",
            s.clamp(min, max),
            p.source("pm.start_servers")
        ),
        _ => format!(
            "keep 0 < pm.min_spare_servers ≤ pm.start_servers ≤ pm.max_spare_servers ≤ pm.max_children (pool section at {})",
            p.at
        ),
    };
    Some(
        Finding::new(
            Id::FpmSpareServers,
            Severity::Fail,
            format!("pool {n}: FPM refuses to start this pool: ALERT: {alert}"),
        )
        .with("pool", n.clone())
        .with("fpm_alert", alert)
        .with_opt("start_servers", p.start_servers)
        .with("min_spare_servers", min)
        .with("max_spare_servers", max)
        .with("max_children", mc)
        .with("source", p.source("pm.start_servers").to_string())
        .predict("php-fpm -t fails; a harness that ignores the exit status benchmarks whatever answered instead")
        .remedy(fix),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fpm::{DEFAULT_PREFIX, PoolConfig, Worker, load};
    use std::{collections::BTreeMap, path::Path};

    fn pool(pm: Pm, max: i64, start: Option<i64>, min: i64, maxs: i64) -> Pool {
        Pool {
            name: "www".into(),
            at: "/etc/php/fpm.conf:3".into(),
            pm: Some(pm),
            max_children: max,
            start_servers: start,
            min_spare: min,
            max_spare: maxs,
            max_spawn_rate: 32,
            idle_timeout_s: 10,
            max_requests: 0,
            listen: Some(Listen::Unix("/run/php/www.sock".into())),
            sources: BTreeMap::from([("pm.max_children".into(), "/etc/php/fpm.conf:7".into())]),
        }
    }

    fn master(hwms: &[(u32, u64, u64)]) -> Master {
        Master {
            pid: 100,
            config: None,
            workers: hwms
                .iter()
                .map(|&(pid, rss, hwm)| Worker {
                    pid,
                    pool: "www".into(),
                    rss_kib: rss,
                    hwm_kib: hwm,
                    private_kib: Some(rss / 2),
                })
                .collect(),
            cpus_allowed: 12,
        }
    }

    #[test]
    fn seed_pool_of_24_exceeds_a_2_gib_budget() {
        // 24 workers at ~104.8 MiB after one large request each (the seed's 2,514.6 MB).
        let ws: Vec<(u32, u64, u64)> = (0..24)
            .map(|i| (200 + i, 107_300, 107_315 - i as u64))
            .collect();
        let (f, unmeasured) = memory(
            &[pool(Pm::Static, 24, None, 0, 0)],
            &master(&ws),
            &MemoryBasis {
                mem_available_bytes: 20 << 30,
                budget_bytes: Some(2 << 30),
                cgroup_limit: None,
            },
        );
        let f = f.unwrap();
        assert!(unmeasured.is_empty());
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(f.evidence["peak_worker_rss_bytes"], 107_315u64 * 1024);
        assert_eq!(f.evidence["peak_worker_pid"], 200);
        assert_eq!(f.evidence["product_bytes"], 24 * 107_315u64 * 1024);
        assert_eq!(f.evidence["mem_budget_bytes"], 2u64 << 30);
        assert_eq!(f.evidence["headroom_bytes"], 2u64 << 30);
        assert_eq!(
            f.title,
            "pool www: 24 × 104.8 MiB peak worker RSS = 2.5 GiB > 2.0 GiB --mem-budget (MemAvailable 20.0 GiB)"
        );
        // 2 GiB ÷ 104.8 MiB = 19.
        assert!(
            f.remedy.starts_with(
                "pm.max_children = 19 (2.0 GiB ÷ 104.8 MiB peak) at /etc/php/fpm.conf:7"
            ),
            "{}",
            f.remedy
        );
    }

    #[test]
    fn without_budget_the_workers_own_rss_counts_as_headroom() {
        // Pool already at its peak, little left: it fits, because what it holds is its own.
        let ws = [(1, 500_000, 500_000), (2, 500_000, 500_000)];
        let basis = MemoryBasis {
            mem_available_bytes: 100 << 20,
            budget_bytes: None,
            cgroup_limit: None,
        };
        let (f, _) = memory(&[pool(Pm::Static, 2, None, 0, 0)], &master(&ws), &basis);
        let f = f.unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(
            f.evidence["headroom_bytes"],
            (100u64 << 20) + 1_000_000 * 1024
        );
        // A cgroup limit below that wins.
        let basis = MemoryBasis {
            cgroup_limit: Some((512 << 20, "/sys/fs/cgroup/x".into())),
            ..basis
        };
        let (f, _) = memory(&[pool(Pm::Static, 2, None, 0, 0)], &master(&ws), &basis);
        let f = f.unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(
            f.evidence["compared_against"],
            "memory cgroup limit (/sys/fs/cgroup/x)"
        );
    }

    #[test]
    fn pool_without_workers_is_reported_unmeasured() {
        let (f, unmeasured) = memory(
            &[pool(Pm::Ondemand, 8, None, 0, 0)],
            &master(&[]),
            &MemoryBasis {
                mem_available_bytes: 1,
                budget_bytes: None,
                cgroup_limit: None,
            },
        );
        assert!(f.is_none());
        assert_eq!(unmeasured, vec!["www".to_string()]);
    }

    #[test]
    fn ramp_matches_the_seed_measurements() {
        // min_spare 1: one per second, 2 → 8 in 6 s, 2 → 16 in 14 s.
        assert_eq!(ramp_ticks(2, 1, 8, 32), vec![2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(ramp_ticks(2, 1, 16, 32).len() - 1, 14);
        // min_spare 4 from 4: 4, 5, 7, 11, 15, 16 (the seed's sequence).
        assert_eq!(ramp_ticks(4, 4, 16, 32), vec![4, 5, 7, 11, 15, 16]);
        let f = ramp(&pool(Pm::Dynamic, 8, Some(2), 1, 4)).unwrap();
        assert_eq!(f.evidence["seconds_to_max_children"], 6);
        assert_eq!(f.evidence["workers_per_second"], "2, 3, 4, 5, 6, 7, 8");
        assert!(ramp(&pool(Pm::Static, 8, None, 0, 0)).is_none());
        let f = ramp(&pool(Pm::Ondemand, 8, None, 0, 0)).unwrap();
        assert!(f.title.contains("idle for 10 s"));
        // Unset start_servers: FPM uses min + (max − min) / 2.
        assert_eq!(effective_start(&pool(Pm::Dynamic, 8, None, 1, 4)), 2);
    }

    #[test]
    fn oversized_and_socket_path() {
        let f = oversized(&pool(Pm::Static, 16, None, 0, 0), 12).unwrap();
        assert_eq!(f.evidence["workers_per_cpu"], 1.33);
        assert!(oversized(&pool(Pm::Static, 8, None, 0, 0), 12).is_none());
        let mut p = pool(Pm::Static, 2, None, 0, 0);
        let long = format!("/tmp/{}/php.sock", "d".repeat(106));
        assert_eq!(long.len(), 120);
        p.listen = Some(Listen::Unix(long.clone()));
        let f = socket_path(&p).unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(f.evidence["length_bytes"], 120);
        assert_eq!(f.evidence["fpm_listens_on"], long[..107]);
        // 107 bytes fit (with the NUL: 108).
        p.listen = Some(Listen::Unix(format!("/{}", "a".repeat(106))));
        assert!(socket_path(&p).is_none());
        p.listen = Some(Listen::Unix(format!("/{}", "a".repeat(107))));
        assert!(socket_path(&p).is_some());
        p.listen = Some(Listen::Tcp("127.0.0.1:9000".into()));
        assert!(socket_path(&p).is_none());
    }

    #[test]
    fn spare_servers_in_fpm_words() {
        // The seed's refused pool.
        let f = spare_servers(&pool(Pm::Dynamic, 8, Some(2), 3, 8)).unwrap();
        assert_eq!(
            f.evidence["fpm_alert"],
            "[pool www] pm.start_servers(2) must not be less than pm.min_spare_servers(3) and not greater than pm.max_spare_servers(8)"
        );
        assert!(
            f.remedy
                .starts_with("pm.start_servers = 3 (between 3 and 8)")
        );
        let f = spare_servers(&pool(Pm::Dynamic, 8, Some(3), 3, 2)).unwrap();
        assert_eq!(
            f.evidence["fpm_alert"],
            "[pool www] pm.max_spare_servers(2) must not be less than pm.min_spare_servers(3)"
        );
        let f = spare_servers(&pool(Pm::Dynamic, 4, Some(2), 1, 8)).unwrap();
        assert!(
            f.evidence["fpm_alert"]
                .as_str()
                .unwrap()
                .contains("cannot be greater than pm.max_children(4)")
        );
        assert!(spare_servers(&pool(Pm::Dynamic, 8, Some(2), 1, 4)).is_none());
        assert!(spare_servers(&pool(Pm::Dynamic, 8, None, 1, 4)).is_none());
        assert!(spare_servers(&pool(Pm::Static, 8, Some(20), 3, 1)).is_none());
    }

    #[test]
    fn alert_patterns_show_both_spellings() {
        let f = alert_patterns(
            &[pool(Pm::Dynamic, 8, Some(2), 1, 4)],
            None,
            Some("/var/log/php8.2-fpm.log"),
        )
        .unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(
            f.evidence["dynamic_pattern"],
            "server reached pm.max_children setting (N)"
        );
        assert_eq!(
            f.evidence["ondemand_pattern"],
            "server reached max_children setting (N)"
        );
        assert_eq!(
            f.remedy,
            "grep -E 'server reached (pm\\.)?max_children setting' /var/log/php8.2-fpm.log"
        );
        let counts = AlertCounts {
            file: "x".into(),
            scanned_bytes: 10,
            dynamic: 2,
            ondemand: 1,
            last: Some("l".into()),
        };
        let f =
            alert_patterns(&[pool(Pm::Static, 8, None, 0, 0)], Some(&counts), Some("x")).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert!(f.title.starts_with("the FPM log has 3"));
        assert!(alert_patterns(&[pool(Pm::Static, 8, None, 0, 0)], None, None).is_none());
    }

    #[test]
    fn debian_default_pool_from_the_recorded_config() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fpm/debian");
        let cfg = load(&dir.join("php-fpm.conf"), &dir.display().to_string()).unwrap();
        let pools: Vec<Pool> = cfg
            .pools
            .iter()
            .map(|p: &PoolConfig| Pool::from_config(p, DEFAULT_PREFIX))
            .collect();
        let www = pools.iter().find(|p| p.name == "www").unwrap();
        // Debian's www.conf: dynamic, 5 children, start 2, spare 1..3: 3 s to grow 2 → 5.
        let f = ramp(www).unwrap();
        assert_eq!(f.evidence["seconds_to_max_children"], 3);
        assert!(spare_servers(www).is_none());
        assert!(oversized(www, 2).is_some());
        assert!(socket_path(www).is_none());
    }

    /// fpm.memory over one pool and over several, fitting or not, pinned whole.
    #[test]
    fn memory_findings_are_pinned() {
        let budget = |b: Option<u64>| MemoryBasis {
            mem_available_bytes: 3 << 30,
            budget_bytes: b,
            cgroup_limit: None,
        };
        let mut all = vec![];
        let ws: Vec<(u32, u64, u64)> = (0..24)
            .map(|i| (200 + i, 107_300, 107_315 - i as u64))
            .collect();
        let www = pool(Pm::Static, 24, None, 0, 0);
        all.extend(
            memory(
                std::slice::from_ref(&www),
                &master(&ws),
                &budget(Some(2 << 30)),
            )
            .0,
        );
        all.extend(memory(std::slice::from_ref(&www), &master(&ws), &budget(None)).0);
        // One worker larger than the whole budget: no pm.max_children fits.
        all.extend(
            memory(
                std::slice::from_ref(&www),
                &master(&ws),
                &budget(Some(1 << 20)),
            )
            .0,
        );
        let mut m = master(&ws);
        m.workers[3].pool = "api".into();
        m.workers[3].hwm_kib = 300_000;
        m.workers[5].pool = "api".into();
        let api = Pool {
            name: "api".into(),
            max_children: 10,
            ..pool(Pm::Dynamic, 10, Some(2), 1, 3)
        };
        let idle = Pool {
            name: "idle".into(),
            ..pool(Pm::Ondemand, 4, None, 0, 0)
        };
        let basis = MemoryBasis {
            cgroup_limit: Some((4 << 30, "/sys/fs/cgroup/php".into())),
            ..budget(None)
        };
        let (f, unmeasured) = memory(&[www.clone(), api.clone(), idle.clone()], &m, &basis);
        assert_eq!(unmeasured, ["idle"]);
        all.extend(f);
        let basis = MemoryBasis {
            mem_available_bytes: 64 << 30,
            cgroup_limit: None,
            ..basis
        };
        all.extend(memory(&[www, api, idle], &m, &basis).0);
        crate::traps::assert_pinned(
            &all,
            &[
                r##"{"id":"fpm.memory","severity":"fail","title":"pool www: 24 × 104.8 MiB peak worker RSS = 2.5 GiB > 2.0 GiB --mem-budget (MemAvailable 3.0 GiB)","evidence":{"master_pid":100,"pool":"www","pm":"static","max_children":24,"max_children_source":"/etc/php/fpm.conf:7","peak_worker_rss_bytes":109890560,"peak_worker_pid":200,"product_bytes":2637373440,"workers_running":24,"workers_rss_bytes":[109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200],"pool_rss_now_bytes":2637004800,"largest_worker_private_bytes":54937600,"mem_available_bytes":3221225472,"mem_budget_bytes":2147483648,"compared_against":"--mem-budget","headroom_bytes":2147483648},"predicted":"when every worker is at its peak at once (one burst of expensive requests does it) the pool holds 2.5 GiB, 467.2 MiB more than --mem-budget: the kernel swaps or the OOM killer ends workers mid-request","remedy":"pm.max_children = 19 (2.0 GiB ÷ 104.8 MiB peak) at /etc/php/fpm.conf:7, or cut what one request allocates"}"##,
                r##"{"id":"fpm.memory","severity":"info","title":"pool www: 24 × 104.8 MiB peak worker RSS = 2.5 GiB ≤ 5.5 GiB MemAvailable + the workers' RSS now (MemAvailable 3.0 GiB)","evidence":{"master_pid":100,"pool":"www","pm":"static","max_children":24,"max_children_source":"/etc/php/fpm.conf:7","peak_worker_rss_bytes":109890560,"peak_worker_pid":200,"product_bytes":2637373440,"workers_running":24,"workers_rss_bytes":[109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200],"pool_rss_now_bytes":2637004800,"largest_worker_private_bytes":54937600,"mem_available_bytes":3221225472,"compared_against":"MemAvailable + the workers' RSS now","headroom_bytes":5858230272},"remedy":"none needed at these peaks; the peak is what the workers have allocated so far, so rerun after a realistic load"}"##,
                r##"{"id":"fpm.memory","severity":"fail","title":"pool www: 24 × 104.8 MiB peak worker RSS = 2.5 GiB > 1.0 MiB --mem-budget (MemAvailable 3.0 GiB)","evidence":{"master_pid":100,"pool":"www","pm":"static","max_children":24,"max_children_source":"/etc/php/fpm.conf:7","peak_worker_rss_bytes":109890560,"peak_worker_pid":200,"product_bytes":2637373440,"workers_running":24,"workers_rss_bytes":[109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200],"pool_rss_now_bytes":2637004800,"largest_worker_private_bytes":54937600,"mem_available_bytes":3221225472,"mem_budget_bytes":1048576,"compared_against":"--mem-budget","headroom_bytes":1048576},"predicted":"when every worker is at its peak at once (one burst of expensive requests does it) the pool holds 2.5 GiB, 2.5 GiB more than --mem-budget: the kernel swaps or the OOM killer ends workers mid-request","remedy":"lower pm.max_children so Σ max_children × peak fits, or cut what one request allocates"}"##,
                r##"{"id":"fpm.memory","severity":"fail","title":"www 24 × 104.8 MiB + api 10 × 293.0 MiB = 5.3 GiB > 4.0 GiB memory cgroup limit (/sys/fs/cgroup/php) (MemAvailable 3.0 GiB)","evidence":{"master_pid":100,"pools":"www 24 × 104.8 MiB + api 10 × 293.0 MiB","peak_worker_rss_bytes":109890560,"peak_worker_pid":200,"product_bytes":5709373440,"workers_running":24,"workers_rss_bytes":[109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200],"pool_rss_now_bytes":2637004800,"largest_worker_private_bytes":54937600,"mem_available_bytes":3221225472,"cgroup_memory_limit_bytes":4294967296,"compared_against":"memory cgroup limit (/sys/fs/cgroup/php)","headroom_bytes":4294967296,"pools_without_workers":"idle"},"predicted":"when every worker is at its peak at once (one burst of expensive requests does it) the pool holds 5.3 GiB, 1.3 GiB more than memory cgroup limit (/sys/fs/cgroup/php): the kernel swaps or the OOM killer ends workers mid-request","remedy":"lower pm.max_children so Σ max_children × peak fits, or cut what one request allocates"}"##,
                r##"{"id":"fpm.memory","severity":"info","title":"www 24 × 104.8 MiB + api 10 × 293.0 MiB = 5.3 GiB ≤ 66.5 GiB MemAvailable + the workers' RSS now (MemAvailable 64.0 GiB)","evidence":{"master_pid":100,"pools":"www 24 × 104.8 MiB + api 10 × 293.0 MiB","peak_worker_rss_bytes":109890560,"peak_worker_pid":200,"product_bytes":5709373440,"workers_running":24,"workers_rss_bytes":[109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200,109875200],"pool_rss_now_bytes":2637004800,"largest_worker_private_bytes":54937600,"mem_available_bytes":68719476736,"compared_against":"MemAvailable + the workers' RSS now","headroom_bytes":71356481536,"pools_without_workers":"idle"},"remedy":"none needed at these peaks; the peak is what the workers have allocated so far, so rerun after a realistic load"}"##,
            ],
        );
    }
}
