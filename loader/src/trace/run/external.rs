//! `trapdetect run -- COMMAND` and `--load-results FILE`: the user's own generator instead of
//! the built-in one. The window starts when the command starts and ends at `--duration` or
//! when it exits; the command is watched as a client (CPU and run-queue delay per second) and
//! its results (its stdout, or FILE) are read after it and joined to the kernel's seconds by
//! wall-clock time. Where the results are a summary, the kernel's own count of the requests
//! the server received stands in for the delivered rate, and the timeline says which columns
//! the generator did not give.

use std::{collections::BTreeMap, path::PathBuf};

use crate::{
    error::{Error, Result},
    escape,
    load::{
        Summary,
        external::{
            self, LoadResults,
            child::{ClientSampler, ClientSecond, Generator},
            merge::{GeneratorPart, merge},
            results::Origin,
            section::{ExternalLoad, ExternalResults},
        },
    },
    trace::{
        LoadDriver, LoadOutcome,
        seconds::{KernelSource, Sampler},
    },
    traps::{Finding, Id, Severity, round, run::RunSecond},
};

/// The load side of the timeline, from the built-in generator or another one.
#[derive(Debug, Default)]
pub struct LoadSide {
    /// Per second, load columns filled (kernel columns are joined in later).
    pub seconds: Vec<RunSecond>,
    /// The window's length as the load saw it, s.
    pub measured_s: f64,
    /// Offered arrivals per second (0: unknown, a closed-loop tool).
    pub offered_rate: f64,
    /// The seconds carry the 2xx (else the kernel's served count stands in).
    pub per_second_2xx: bool,
    /// Load columns the generator did not give.
    pub missing: Vec<&'static str>,
    /// The built-in generator's own budgets and what they held back.
    pub generator: Option<crate::traps::run::GeneratorLimits>,
    /// Processes of an external generator (its CPU is the load's, not noise).
    pub client_pids: Vec<u32>,
}

impl LoadSide {
    /// The built-in generator's seconds.
    pub fn from_summary(s: &Summary) -> LoadSide {
        let lag_budget_us = s.plan.lag_budget_us;
        let seconds = s
            .series
            .iter()
            .map(|p| {
                let mut errors = BTreeMap::new();
                for kind in crate::load::ErrorKind::ALL {
                    let n = p.errors.get(kind);
                    if n > 0 {
                        errors.insert(format!("{kind:?}").to_lowercase(), n);
                    }
                }
                let mut r = RunSecond {
                    t_s: p.t_s,
                    offered: p.scheduled,
                    ok_2xx: p.ok_2xx,
                    non_2xx: p.non_2xx,
                    errors,
                    p99_us: p.lat_2xx_p99_us,
                    in_flight: p.in_flight_max,
                    ..Default::default()
                };
                if p.sched_lag_max_us > lag_budget_us {
                    r.marks.push("generator-lag");
                }
                r
            })
            .collect();
        LoadSide {
            seconds,
            measured_s: s.window.measured_s,
            offered_rate: s.offered_rate_per_s,
            per_second_2xx: true,
            missing: vec![],
            generator: Some(crate::traps::run::GeneratorLimits {
                max_connections: s.connections.budget,
                busy_max: s.connections.busy_max,
                waited_for_slot: s.queue.waited,
                dropped: s.dropped,
                connect_rate_per_s: s.plan.connect_rate_per_s,
                waited_for_connect: s.connections.paced,
                scheduled: s.scheduled,
            }),
            client_pids: vec![],
        }
    }

    /// Another generator's results (seconds before the window dropped) and its CPU.
    pub fn from_external(
        r: Option<&LoadResults>,
        client: &BTreeMap<u64, ClientSecond>,
        window_s: f64,
    ) -> LoadSide {
        let mut by_t: BTreeMap<u64, RunSecond> = BTreeMap::new();
        if let Some(r) = r {
            for (t, s) in r.seconds.range(0..) {
                let mut errors = BTreeMap::new();
                if s.errors > 0 {
                    errors.insert("error".to_string(), s.errors);
                }
                by_t.insert(
                    *t as u64,
                    RunSecond {
                        t_s: *t as u64,
                        offered: s.offered,
                        ok_2xx: s.ok_2xx,
                        non_2xx: s.non_2xx,
                        errors,
                        p99_us: s.p99_us,
                        in_flight: s.in_flight,
                        marks: if r.lagged.contains(t) {
                            vec!["generator-lag"]
                        } else {
                            vec![]
                        },
                        ..Default::default()
                    },
                );
            }
        }
        for (t, c) in client {
            let e = by_t.entry(*t).or_insert_with(|| RunSecond {
                t_s: *t,
                ..Default::default()
            });
            e.client_cores = Some(round(c.cores, 2));
            e.client_run_queue = Some(round(c.run_queue, 2));
        }
        let missing = r
            .map(LoadResults::missing)
            .unwrap_or_else(|| external::COLUMNS.to_vec());
        let has = |c: &str| !missing.contains(&c);
        let n = window_s.floor().max(1.0) as u64;
        let offered_rate = match r.and_then(|r| r.totals.offered_per_s) {
            Some(o) => o,
            None if has("offered") => {
                by_t.range(0..n).map(|(_, s)| s.offered).sum::<u64>() as f64 / n as f64
            }
            None => 0.0,
        };
        LoadSide {
            seconds: by_t.into_values().collect(),
            measured_s: window_s,
            offered_rate,
            per_second_2xx: has("ok_2xx"),
            missing,
            generator: None,
            client_pids: vec![],
        }
    }
}

/// Drives another generator during the trace.
pub struct ExternalDriver {
    pid: u32,
    command: Vec<String>,
    results_files: Vec<PathBuf>,
    generator: Option<Generator>,
    /// The kernel's seconds.
    pub sampler: Option<Sampler>,
    /// The generator's CPU per second of the window.
    pub client: BTreeMap<u64, ClientSecond>,
    client_sampler: ClientSampler,
    /// The server's threads, sampled as the generator's are, each second of the window: what
    /// a dispatch costs them in waiting is what it costs on these CPUs without a shortage.
    pub server: BTreeMap<u64, ClientSecond>,
    server_sampler: ClientSampler,
    start_unix: f64,
    command_start_unix: f64,
    spawn_error: Option<Error>,
    /// Its results, read after it (several files': merged).
    pub results: Option<LoadResults>,
    /// The generators whose results were merged (empty for one).
    pub generators: Vec<GeneratorPart>,
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl ExternalDriver {
    /// The generator's and the server's threads in the kernel's second just sampled.
    fn watch(&mut self) {
        let (Some(g), Some(t)) = (
            &self.generator,
            self.sampler
                .as_ref()
                .and_then(|s| s.seconds.last())
                .map(|x| x.t_s),
        ) else {
            return;
        };
        if let Some(c) = self.client_sampler.sample(g.pid()) {
            self.client.insert(t, c);
        }
        if let Some(c) = self.server_sampler.sample(self.pid) {
            self.server.insert(t, c);
        }
    }

    /// Processes of the generator's tree seen while it ran.
    pub fn client_pids(&self) -> Vec<u32> {
        self.client_sampler.pids.iter().copied().collect()
    }

    /// A driver for `-- COMMAND` (may be empty) and `--load-results FILE` (repeated: several
    /// generators' results, merged on wall-clock seconds).
    pub fn new(pid: u32, command: Vec<String>, results_files: Vec<PathBuf>) -> Result<Self> {
        if let Some(prog) = command.first()
            && !runnable(prog)
        {
            return Err(Error::usage(format!(
                "-- {}: no such executable (in PATH or at that path)",
                escape::text(prog)
            )));
        }
        if command.is_empty() {
            // Without a command the files are other runs', finished or being written: they
            // must be there now, in a format trapdetect reads.
            for f in &results_files {
                let what = results_what(f);
                let bytes = crate::input::read_capped(&what, f, external::RESULTS_CAP)?;
                if !bytes.is_empty() {
                    external::parse(&bytes, unix_now())
                        .map_err(|e| Error::usage(format!("{what}: {e}")))?;
                }
            }
        }
        Ok(ExternalDriver {
            pid,
            command,
            results_files,
            generator: None,
            sampler: None,
            client: BTreeMap::new(),
            client_sampler: ClientSampler::default(),
            server: BTreeMap::new(),
            server_sampler: ClientSampler::default(),
            start_unix: 0.0,
            command_start_unix: 0.0,
            spawn_error: None,
            results: None,
            generators: vec![],
        })
    }

    /// One results file, read and placed in the window: offsets from the generator's own
    /// start count from the command's start, or for a file of another run from its last
    /// write less its length.
    fn read_file(&self, f: &std::path::Path) -> Result<LoadResults> {
        let what = results_what(f);
        let bytes = crate::input::read_capped(&what, f, external::RESULTS_CAP)?;
        let mut r = external::parse(&bytes, self.start_unix)
            .map_err(|e| Error::usage(format!("{what}: {e}")))?;
        if let Origin::Relative { length_s } = r.origin {
            let start = match &self.generator {
                Some(_) => self.command_start_unix,
                None => crate::util::mtime_unix(f).map_or(self.start_unix, |m| m - length_s),
            };
            r.shift(start - self.start_unix);
        }
        Ok(r)
    }

    fn read_results(&mut self, notes: &mut Vec<String>) -> Result<()> {
        if !self.results_files.is_empty() {
            let mut parts = vec![];
            for f in &self.results_files {
                let name = escape::bytes(f.as_os_str().as_encoded_bytes());
                parts.push((name, self.read_file(f)?));
            }
            let (r, generators) =
                merge(parts).map_err(|e| Error::usage(format!("--load-results: {e}")))?;
            self.results = Some(r);
            self.generators = generators;
            return Ok(());
        }
        let Some(g) = &self.generator else {
            return Ok(());
        };
        let (bytes, truncated) = g.stdout();
        if truncated {
            notes.push(format!(
                "the command printed more than {} MiB: its output was cut there",
                external::child::STDOUT_CAP >> 20
            ));
        }
        match external::parse(&bytes, self.start_unix) {
            Ok(mut r) => {
                if let Origin::Relative { .. } = r.origin {
                    // Offsets count from the generator's start: the command's.
                    r.shift(self.command_start_unix - self.start_unix);
                }
                self.results = Some(r);
            }
            Err(e) => notes.push(format!(
                "the command's output is not results trapdetect reads ({e}): the load side is the kernel's count of served requests only"
            )),
        }
        Ok(())
    }
}

fn results_what(f: &std::path::Path) -> String {
    format!(
        "--load-results {}",
        escape::bytes(f.as_os_str().as_encoded_bytes())
    )
}

/// Whether `prog` names an executable file, directly or through PATH (checked before
/// anything is attached; the spawn itself still reports its own errors).
fn runnable(prog: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let exec = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        return exec(std::path::Path::new(prog));
    }
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| !prog.is_empty() && exec(&d.join(prog)))
    })
}

impl LoadDriver for ExternalDriver {
    fn start(&mut self) -> Result<()> {
        let mono = crate::load::mono_ns();
        self.start_unix = unix_now();
        self.sampler = Some(Sampler::new(self.pid, mono));
        // The command starts at the first tick, right after the kernel's baseline: every
        // request it sends is inside the counted window.
        Ok(())
    }

    fn progress(&self) -> Option<u64> {
        None
    }

    fn tick(&mut self, probes: &dyn KernelSource) {
        let Some(s) = self.sampler.as_mut() else {
            return;
        };
        let n = s.seconds.len();
        s.tick(probes);
        if self.generator.is_none() && !self.command.is_empty() && self.spawn_error.is_none() {
            match Generator::spawn(&self.command) {
                Ok(g) => {
                    self.command_start_unix = unix_now();
                    self.client_sampler.sample(g.pid());
                    self.server_sampler.sample(self.pid);
                    self.generator = Some(g);
                }
                Err(e) => self.spawn_error = Some(e),
            }
            return;
        }
        if s.seconds.len() > n {
            self.watch();
        }
    }

    fn end(&mut self, probes: &dyn KernelSource) {
        if let Some(s) = self.sampler.as_mut() {
            let n = s.seconds.len();
            s.finish(probes);
            if s.seconds.len() > n {
                self.watch();
            }
        }
    }

    fn done(&self) -> bool {
        self.spawn_error.is_some() || self.generator.as_ref().is_some_and(Generator::exited)
    }

    fn finish(&mut self) -> Result<LoadOutcome> {
        if let Some(e) = self.spawn_error.take() {
            return Err(e);
        }
        let status = self.generator.as_mut().map(Generator::stop);
        let mut out = LoadOutcome::default();
        self.read_results(&mut out.notes)?;
        let window_s = self
            .sampler
            .as_ref()
            .map(|s| s.seconds.iter().map(|x| x.dt_s).sum::<f64>())
            .unwrap_or(0.0);
        let side = LoadSide::from_external(self.results.as_ref(), &self.client, window_s);
        let g = self.generator.as_ref();
        out.sections.push(Box::new(ExternalLoad {
            source: if !self.results_files.is_empty() {
                "file"
            } else {
                "command"
            }
            .into(),
            command: self.command.iter().map(|a| escape::text(a)).collect(),
            exit_status: status,
            interrupted: g.is_some_and(|g| g.interrupted),
            killed: g.is_some_and(|g| g.killed),
            missing_columns: side.missing.iter().map(|m| m.to_string()).collect(),
            results: self.results.as_ref().map(ExternalResults::of),
            generators: self.generators.clone(),
        }));
        // A generator that says its own measurement cannot be trusted (it fell behind its
        // schedule) makes the load side of this run no better.
        for p in self.results.iter().flat_map(|r| &r.problems) {
            out.problems
                .push(format!("the load generator's own measurement: {p}"));
        }
        let starved = client_starved(&self.client, &self.server, window_s);
        if let Some(f) = starved {
            out.problems.push(
                "the load generator waited for a CPU (see gen.client-starved): it measured itself"
                    .into(),
            );
            out.findings.push(f);
        }
        Ok(out)
    }
}

/// The generator's threads spent at least a tenth of the time they wanted a CPU waiting for
/// one, and at least 50 ms per second, counted in the seconds when the CPUs it may use had less
/// than one CPU free between them: its requests went out late. With a CPU free, a woken thread
/// waits only the machine's wakeup latency, which the server's threads pay alike and no CPU of
/// its own would remove (hey at 400 req/s on this idle 2-CPU VM: 37 µs per dispatch at 2,588
/// dispatches a second, 0.096 threads "waiting", 49 % of the time it wanted a CPU; beside two
/// busy loops, 117 µs and 0.249 threads). Without one, what it waits is CPU it lacks even when
/// the server's threads wait as long per dispatch (gunicorn's four workers spinning 0.5 ms a
/// request at half their capacity under hey, the CPUs 72 % busy: hey 1.4 threads runnable at
/// 0.33 cores, the workers 1.2): a CPU of its own would remove it. The evidence gives both
/// waits per dispatch (`server`: the server's threads, sampled as the generator's are). A
/// second whose idle CPUs were not read counts. Only the window's seconds are judged: the
/// sample after it holds the generator's exit and the tracer's teardown (0.45 threads runnable
/// at 0.01 cores, the CPUs busy detaching).
pub fn client_starved(
    client: &BTreeMap<u64, ClientSecond>,
    server: &BTreeMap<u64, ClientSecond>,
    window_s: f64,
) -> Option<Finding> {
    let end = window_s.round().max(1.0) as u64;
    let client: Vec<(u64, &ClientSecond)> = client.range(..end).map(|(t, c)| (*t, c)).collect();
    if client.is_empty() {
        return None;
    }
    let n = client.len() as f64;
    // Its run-queue time in the seconds its CPUs had less than one free.
    let contended: Vec<(u64, &ClientSecond)> = client
        .iter()
        .copied()
        .filter(|(_, c)| c.idle_cpus.is_none_or(|i| i < 1.0))
        .collect();
    let waited: Vec<f64> = contended.iter().map(|(_, c)| c.run_queue).collect();
    let runq = waited.iter().sum::<f64>() / n;
    let worst = waited.iter().copied().fold(0.0, f64::max);
    let cores = client.iter().map(|(_, c)| c.cores).sum::<f64>() / n;
    let idle: Vec<f64> = client.iter().filter_map(|(_, c)| c.idle_cpus).collect();
    let share = runq / (runq + cores).max(1e-9);
    if runq < 0.05 || share < 0.1 {
        return None;
    }
    // Waits per dispatch over the contended seconds: the generator's and the server's.
    let client_wait = wait_per_dispatch_us(contended.iter().map(|(_, c)| **c));
    let server_wait =
        wait_per_dispatch_us(contended.iter().filter_map(|(t, _)| server.get(t).copied()));
    Some(
        Finding::new(
            Id::GenClientStarved,
            Severity::Warn,
            format!(
                "the load generator waited for a CPU {:.0} % of the time it wanted one: it measured itself",
                share * 100.0
            ),
        )
        .with("client_run_queue_mean", round(runq, 2))
        .with_opt("client_wait_per_dispatch_us", client_wait)
        .with_opt("server_wait_per_dispatch_us", server_wait)
        .with("client_run_queue_max", round(worst, 2))
        .with("client_cores_mean", round(cores, 2))
        .with("waiting_share_pct", round(share * 100.0, 1))
        .with("contended_seconds", waited.len() as u64)
        .with_opt(
            "generator_cpus_idle_mean",
            (!idle.is_empty()).then(|| round(idle.iter().sum::<f64>() / idle.len() as f64, 2)),
        )
        .with("window_s", round(window_s, 2))
        .predict(
            "its requests went out late and its latencies include its own wait for a CPU: the run is untrusted (exit 3)",
        )
        .remedy(
            "give the generator its own CPUs (taskset -c 1 trapdetect run ... -- GENERATOR; server on the others) or run it on another machine",
        ),
    )
}

/// Run-queue wait per dispatch over `secs`, µs (`None`: no dispatch).
fn wait_per_dispatch_us(secs: impl Iterator<Item = ClientSecond>) -> Option<f64> {
    let (wait, n) = secs.fold((0.0, 0.0), |(w, n), c| (w + c.run_queue, n + c.dispatches));
    (n > 0.0).then(|| round(wait / n * 1e6, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generator_waiting_for_cpu_is_named_and_an_idle_one_is_not() {
        let none = BTreeMap::new();
        let mut c = BTreeMap::new();
        for t in 0..5 {
            c.insert(
                t,
                ClientSecond {
                    cores: 0.3,
                    run_queue: if t == 2 { 0.4 } else { 0.1 },
                    dispatches: 0.0,
                    idle_cpus: None,
                },
            );
        }
        let f = client_starved(&c, &none, 5.0).unwrap();
        assert_eq!(f.id, "gen.client-starved");
        assert_eq!(f.evidence["client_run_queue_mean"], 0.16);
        assert_eq!(f.evidence["client_run_queue_max"], 0.4);
        assert_eq!(f.evidence["waiting_share_pct"], 34.8);
        assert_eq!(f.evidence["contended_seconds"], 5);
        assert!(f.evidence.get("generator_cpus_idle_mean").is_none());
        // Its CPUs busy (0.2 of 2 idle) in every second: the same.
        for v in c.values_mut() {
            v.idle_cpus = Some(0.2);
        }
        let f = client_starved(&c, &none, 5.0).unwrap();
        assert_eq!(f.evidence["client_run_queue_mean"], 0.16);
        assert_eq!(f.evidence["generator_cpus_idle_mean"], 0.2);
        // A CPU free in every second but the one with the 0.4: only that one is waiting for a
        // CPU (0.4 ÷ 5 = 0.08 threads, 21 % of the time it wanted one).
        for (t, v) in c.iter_mut() {
            v.idle_cpus = Some(if *t == 2 { 0.5 } else { 1.4 });
        }
        let f = client_starved(&c, &none, 5.0).unwrap();
        assert_eq!(f.evidence["client_run_queue_mean"], 0.08);
        assert_eq!(f.evidence["contended_seconds"], 1);
        assert_eq!(f.evidence["waiting_share_pct"], 21.1);
        // Each wait per dispatch over the contended second, µs: the generator's 0.4 s over
        // 8,000 dispatches, the server's 0.2 s over 10,000 (a second the generator had a CPU
        // free in does not count); the same finding, the server's wait shown beside.
        c.get_mut(&2).unwrap().dispatches = 8_000.0;
        let server: BTreeMap<u64, ClientSecond> = [(1, 0.9, 30_000.0), (2, 0.2, 10_000.0)]
            .into_iter()
            .map(|(t, run_queue, dispatches)| {
                let s = ClientSecond {
                    run_queue,
                    dispatches,
                    ..Default::default()
                };
                (t, s)
            })
            .collect();
        let g = client_starved(&c, &server, 5.0).unwrap();
        assert_eq!(g.evidence["client_wait_per_dispatch_us"], 50.0);
        assert_eq!(g.evidence["server_wait_per_dispatch_us"], 20.0);
        assert_eq!(g.evidence["waiting_share_pct"], 21.1);
        assert!(f.evidence.get("server_wait_per_dispatch_us").is_none());
        // Recorded: hey at 400 req/s against Go on the idle 2-CPU VM, 1.5 CPUs idle: the
        // machine's wakeup latency, not a CPU taken.
        for v in c.values_mut() {
            *v = ClientSecond {
                cores: 0.099,
                run_queue: 0.096,
                dispatches: 0.0,
                idle_cpus: Some(1.5),
            };
        }
        assert!(client_starved(&c, &none, 5.0).is_none());
        // The sample after the window (the generator stopped, the tracer detaching) is not
        // judged (recorded: 0.45 threads runnable at 0.01 cores, less than one CPU idle).
        c.insert(
            5,
            ClientSecond {
                cores: 0.01,
                run_queue: 0.45,
                dispatches: 0.0,
                idle_cpus: Some(0.6),
            },
        );
        assert!(client_starved(&c, &none, 5.0).is_none());
        assert!(client_starved(&c, &none, 6.0).is_some());
        c.remove(&5);
        for v in c.values_mut() {
            v.idle_cpus = None;
            v.run_queue = 0.02;
        }
        assert!(client_starved(&c, &none, 5.0).is_none());
        assert!(client_starved(&BTreeMap::new(), &none, 5.0).is_none());
    }

    #[test]
    fn a_missing_command_is_refused_before_anything_attaches() {
        let e = ExternalDriver::new(1, vec!["no-such-generator-xyz".into()], vec![])
            .err()
            .unwrap();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("no such executable"), "{e}");
        assert!(ExternalDriver::new(1, vec!["sh".into()], vec![]).is_ok());
        assert!(ExternalDriver::new(1, vec!["/bin/sh".into()], vec![]).is_ok());
        assert!(ExternalDriver::new(1, vec!["/etc/passwd".into()], vec![]).is_err());
    }

    #[test]
    fn summary_results_leave_every_column_to_the_kernel() {
        let r = external::parse(
            b"Running 2s test @ http://127.0.0.1:1/\n  2529 requests in 2.02s, 1.01MB read\nRequests/sec:   1253.94\n",
            0.0,
        )
        .unwrap();
        let side = LoadSide::from_external(Some(&r), &BTreeMap::new(), 2.0);
        assert!(!side.per_second_2xx);
        assert_eq!(side.missing, external::COLUMNS.to_vec());
        assert_eq!(side.offered_rate, 0.0);
        assert!(side.seconds.is_empty());
    }
}
