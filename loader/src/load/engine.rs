//! Running a [`Plan`]: one or more lanes, each an OS thread with a single-threaded tokio
//! runtime, its own connection pool, its own dispatcher and its own recorder. Arrival i goes to
//! lane `i mod lanes`, so lanes share nothing on the hot path but the in-flight counter, and no
//! arrival waits for a wake-up from another thread. The lanes' recorders are merged at the end.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use super::{
    FD_RESERVE, Plan, Sample, Summary,
    budget::{Budget, Slot},
    classify::ErrorKind,
    client::Client,
    clock::{self, Ticker, WallPair, mono_ns},
    deadline::{Deadline, Deadlines},
    exchange::Progress,
    schedule::{Picker, Schedule, Ticket},
    stats::{Outcome, Recorder, Seconds, Timing},
    summary::{self, FdLimit, GeneratorCost, Listen},
};
use crate::error::{Error, Result};

/// Shortest wait the dispatcher arms its timer for: at high rates the arrivals that fell due
/// meanwhile go out together instead of one timer wake-up each (each still measured from its
/// own intended instant, so the batching shows in the lag). A sleep and its wake-up cost
/// ~20 µs of CPU on a VM, more than a request itself: at most 5,000 timer wake-ups a second
/// per lane keep that below 0.1 core, for at most 200 µs of lag (docs/load.md, OVERHEAD).
const QUANTUM_NS: u64 = 200_000;
/// Longest wait, so a stop is noticed during long gaps.
const MAX_WAIT_NS: u64 = 50_000_000;
/// Arrivals released back to back before the dispatcher lets the lane's request tasks run:
/// a dispatcher that fell behind then does not open a connection per overdue arrival while
/// the answers that would free pooled connections sit unread.
const BURST: u32 = 32;
/// Idle request workers a lane keeps; one that finds no arrival beyond these ends.
const MAX_IDLE_WORKERS: usize = 1024;

/// A cheap snapshot of a running generator (atomics only).
#[derive(Clone, Copy, Debug, Default)]
pub struct Live {
    /// Seconds since the start of the measured window (negative during warm-up).
    pub elapsed_s: f64,
    /// Arrivals dispatched so far (warm-up included).
    pub scheduled: u64,
    /// Arrivals that ended.
    pub completed: u64,
    /// Of which 2xx.
    pub ok_2xx: u64,
    /// Outstanding now.
    pub in_flight: u64,
}

/// State every lane shares: settings, the stop flag and the in-flight count (the only counter
/// two lanes write on the hot path; its high-water mark must be exact).
struct Shared {
    timeout: Duration,
    /// Longest wait for a connection of the budget before an arrival is dropped.
    wait_bound: Duration,
    lag_budget_ns: u64,
    samples: Option<std::sync::mpsc::Sender<Sample>>,
    stop: AtomicBool,
    stop_ns: AtomicU64,
    in_flight: AtomicU64,
    in_flight_max: AtomicU64,
    /// In-flight peak per second of the measured window and drain.
    peaks: Vec<AtomicU64>,
    seconds: Arc<Seconds>,
    measured_start_ns: u64,
    end_ns: u64,
    /// The nice value the lanes ask for, and the one they ran at (`NICE_UNSET` before).
    nice_asked: i32,
    lanes_nice: AtomicI32,
}

/// `Shared::lanes_nice` before a lane has set it.
const NICE_UNSET: i32 = i32::MAX;

/// Raises `a` to `n` without a write when it is already there (most calls).
fn raise(a: &AtomicU64, n: u64) {
    if a.load(Ordering::Relaxed) < n {
        a.fetch_max(n, Ordering::Relaxed);
    }
}

impl Shared {
    /// Where the measured window ends (earlier when stopped).
    fn window_end_ns(&self) -> u64 {
        match self.stop_ns.load(Ordering::Acquire) {
            0 => self.end_ns,
            s => s.min(self.end_ns),
        }
    }

    fn peak(&self, n: u64, now: u64) {
        raise(&self.in_flight_max, n);
        if now >= self.measured_start_ns {
            let sec = ((now - self.measured_start_ns) / 1_000_000_000) as usize;
            if let Some(p) = self.peaks.get(sec) {
                raise(p, n);
            }
        }
    }
}

/// One generator thread's state. Only its own thread writes its counters (the live snapshot
/// reads them), and only its own tasks lock its recorder.
struct Lane {
    shared: Arc<Shared>,
    client: Client,
    rec: Mutex<Recorder>,
    budget: Budget,
    /// Every request's timeout (one sweeper per lane, no timer per request).
    deadlines: Deadlines,
    /// Arrivals released and not yet taken, and the workers waiting for one.
    workers: Mutex<Workers>,
    /// Most slots of the budget in use at once.
    busy_max: AtomicU64,
    /// Arrivals whose new connection waited for the connect pacing.
    paced: AtomicU64,
    in_flight: AtomicU64,
    drained: tokio::sync::Notify,
    dispatched: AtomicU64,
    completed: AtomicU64,
    ok_2xx: AtomicU64,
}

/// An arrival released by the dispatcher, with its closed-loop worker permit.
struct Job {
    t: Ticket,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// The hand-over from a lane's dispatcher to its request workers: long-lived tasks that each
/// run one request at a time. A task per request cost an allocation, a copy of its future and
/// two locked updates of the runtime's task list per request; a worker is woken instead, and a
/// new one is spawned only when every worker is busy, so an arrival never waits for one.
#[derive(Default)]
struct Workers {
    jobs: std::collections::VecDeque<Job>,
    idle: Vec<std::task::Waker>,
}

/// Adds one to a counter only this thread writes: a plain store, no locked instruction.
fn bump(a: &AtomicU64) {
    a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

enum Source {
    /// This lane's share (`index`, `index + lanes`, ...) of the scheduled arrivals.
    Scheduled {
        schedule: Schedule,
        picker: Picker,
        index: usize,
        lanes: usize,
        start_ns: u64,
        warmup_ns: u64,
        ticker: Ticker,
    },
    /// Closed loop without a rate: the next arrival is due as soon as a worker is free.
    Asap {
        picker: Picker,
        index: u64,
        lanes: u64,
    },
}

/// What a lane's dispatcher counted.
#[derive(Default)]
struct Dispatched {
    measured: u64,
    warmup: u64,
    unsent: u64,
    per_second: Vec<u64>,
}

/// What the summary needs that only `start` knows.
struct Static {
    echo: super::PlanEcho,
    fd: FdLimit,
    rate_x_timeout: Option<f64>,
    /// TcpExt counters when the run started (None: /proc/net/netstat unreadable).
    netstat: Option<std::collections::BTreeMap<String, u64>>,
    /// Both clocks read together at the start: the window's start in wall-clock time.
    wall: WallPair,
    /// The wall clock's source and error estimate at the start.
    clock: summary::ClockInfo,
}

/// A generator that has started. Dropping it stops scheduling without waiting.
pub struct Running {
    shared: Arc<Shared>,
    lanes: Vec<Arc<Lane>>,
    threads: Vec<JoinHandle<Dispatched>>,
    statics: Option<Static>,
}

/// Raises RLIMIT_NOFILE's soft limit to the hard limit (a flood legitimately holds
/// rate × timeout sockets) and returns the limits.
pub fn raise_fd_limit() -> Result<FdLimit> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, rlim_t, setrlimit};
    let (before, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| Error::Syscall {
        call: "getrlimit(RLIMIT_NOFILE)".into(),
        source: e.into(),
    })?;
    let mut soft = before;
    // Raising soft up to hard needs no privilege.
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        soft = hard;
    }
    let cap = |v: rlim_t| if v == RLIM_INFINITY { u64::MAX } else { v };
    Ok(FdLimit {
        soft_before: cap(before),
        soft: cap(soft),
        hard: cap(hard),
    })
}

/// Checks the plan, raises the fd limit and starts the generator on its own threads; returns
/// at once. Every check happens before anything starts, so an error leaves nothing behind.
pub fn start(plan: Plan) -> Result<Running> {
    plan.check()?;
    let addr = plan.resolve()?;
    let connector = plan.connector(addr.clone())?;
    let fd = raise_fd_limit()?;
    let budget = fd_budget(&plan, &fd)?;
    let connect_rate = plan.connect_rate_for(budget);
    let lanes_n = match plan.closed_loop {
        Some(c) => plan.threads.min(c),
        None => plan.threads,
    }
    .min(budget);
    let runtimes = runtimes(lanes_n)?;
    let requests: Arc<[Box<[u8]>]> = plan.requests().into();
    let warmup_ns = clock::ns(plan.warmup);
    let span_ns = warmup_ns + clock::ns(plan.duration);
    // A short lead so the first instant is not already late when the lanes start; with
    // --start-at, the monotonic instant of that wall-clock time (the lanes sleep until it).
    let wall = WallPair::now();
    let lead_ns = mono_ns() + 5_000_000;
    let start_ns = plan
        .start_at_unix_ns
        .map_or(lead_ns, |at| wall.mono_at(at).max(lead_ns));
    let shared = Arc::new(new_shared(&plan, lanes_n, start_ns, warmup_ns, span_ns));
    let weights = plan.weights();
    let seed = plan.run_seed();
    let mut lanes = vec![];
    let mut work = vec![];
    for (k, rt) in runtimes.into_iter().enumerate() {
        let picker = Picker::new(seed, plan.hosts.len(), &weights);
        let source = match plan.rate {
            Some(rate) => {
                let ticker = {
                    let _enter = rt.enter();
                    Ticker::new().map_err(|e| setup("timerfd_create", e))?
                };
                Source::Scheduled {
                    schedule: Schedule::new(plan.arrival, rate, span_ns, seed).phased(plan.phase()),
                    picker,
                    index: k,
                    lanes: lanes_n,
                    start_ns,
                    warmup_ns,
                    ticker,
                }
            }
            None => Source::Asap {
                // Unpaced closed loops have no arrival order to share: one stream per lane.
                picker: Picker::new(seed.wrapping_add(k as u64), plan.hosts.len(), &weights),
                index: k as u64,
                lanes: lanes_n as u64,
            },
        };
        let workers = plan
            .closed_loop
            .map(|c| c / lanes_n + usize::from(k < c % lanes_n));
        // The budget and its connect rate split across lanes like the arrivals.
        let slots = budget / lanes_n + usize::from(k < budget % lanes_n);
        let lane_connect_rate = connect_rate.map(|r| r * slots as f64 / budget as f64);
        let pool_cap = slots;
        let lane = Arc::new(Lane {
            shared: shared.clone(),
            client: Client::new(
                connector.clone(),
                requests.clone(),
                plan.keepalive,
                plan.method == "HEAD",
                pool_cap,
                plan.engine,
            ),
            rec: Mutex::new(Recorder::for_lane(
                start_ns + warmup_ns,
                shared.seconds.clone(),
                k,
            )),
            budget: Budget::new(slots, lane_connect_rate),
            deadlines: Deadlines::default(),
            workers: Mutex::new(Workers::default()),
            busy_max: AtomicU64::new(0),
            paced: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            drained: tokio::sync::Notify::new(),
            dispatched: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            ok_2xx: AtomicU64::new(0),
        });
        lanes.push(lane.clone());
        work.push((rt, lane, source, workers));
    }
    let threads = spawn_lanes(work, &shared)?;
    Ok(Running {
        statics: Some(statics(&plan, &addr, budget, connect_rate, fd, wall)),
        shared,
        lanes,
        threads,
    })
}

/// A setup call's error.
fn setup(call: &str, source: std::io::Error) -> Error {
    Error::Syscall {
        call: call.into(),
        source,
    }
}

/// The connection budget the descriptor limit `fd` leaves the plan, or why it is too low.
fn fd_budget(plan: &Plan, fd: &FdLimit) -> Result<usize> {
    let need = plan.closed_loop.map_or(0, |n| n as u64) + FD_RESERVE;
    if fd.soft < need {
        return Err(Error::usage(format!(
            "the file descriptor limit is too low: RLIMIT_NOFILE is {} (hard {}), this run needs \
             at least {need}; raise it (ulimit -n, LimitNOFILE=) or lower -c",
            fd.soft, fd.hard
        )));
    }
    let usable = fd.soft.saturating_sub(FD_RESERVE);
    let budget = plan.budget(usable);
    if budget as u64 > usable {
        return Err(Error::usage(format!(
            "--max-connections {budget} exceeds the file descriptor limit: RLIMIT_NOFILE is {} \
             (hard {}), {FD_RESERVE} are kept for the rest; raise it (ulimit -n, LimitNOFILE=) \
             or lower --max-connections",
            fd.soft, fd.hard
        )));
    }
    Ok(budget)
}

/// One single-threaded runtime per lane.
fn runtimes(lanes_n: usize) -> Result<Vec<tokio::runtime::Runtime>> {
    let mut runtimes = Vec::with_capacity(lanes_n);
    for _ in 0..lanes_n {
        runtimes.push(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| setup("create a load generator runtime", e))?,
        );
    }
    Ok(runtimes)
}

/// The lanes' shared state for a run whose lanes start at `start_ns`.
fn new_shared(plan: &Plan, lanes_n: usize, start_ns: u64, warmup_ns: u64, span_ns: u64) -> Shared {
    let seconds = (clock::ns(plan.duration + plan.timeout) / 1_000_000_000 + 3) as usize;
    Shared {
        timeout: plan.timeout,
        wait_bound: plan.wait_bound(),
        lag_budget_ns: clock::ns(plan.lag_budget),
        samples: plan.samples.clone(),
        stop: AtomicBool::new(false),
        stop_ns: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        in_flight_max: AtomicU64::new(0),
        peaks: (0..seconds).map(|_| AtomicU64::new(0)).collect(),
        seconds: Seconds::new(lanes_n, plan.shard.is_some()),
        measured_start_ns: start_ns + warmup_ns,
        end_ns: start_ns + span_ns,
        nice_asked: plan.nice,
        lanes_nice: AtomicI32::new(NICE_UNSET),
    }
}

/// Sets the calling thread's nice value (Linux keeps one per thread) when asked and
/// permitted, and returns the value it runs at.
fn lane_priority(asked: i32) -> i32 {
    // SAFETY: getpriority/setpriority take plain integers; `who` 0 is the calling thread
    // (which cannot fail for getpriority, so its -1 is a nice value, not an error). A refused
    // setpriority (EACCES without CAP_SYS_NICE) leaves the value as it was: reported as is.
    unsafe {
        if asked != 0 {
            nix::libc::setpriority(nix::libc::PRIO_PROCESS, 0, asked);
        }
        nix::libc::getpriority(nix::libc::PRIO_PROCESS, 0)
    }
}

/// Starts each lane on its own thread; when one cannot start, stops and joins those that
/// did.
fn spawn_lanes(
    work: Vec<(tokio::runtime::Runtime, Arc<Lane>, Source, Option<usize>)>,
    shared: &Arc<Shared>,
) -> Result<Vec<JoinHandle<Dispatched>>> {
    let mut threads = vec![];
    for (k, (rt, lane, source, workers)) in work.into_iter().enumerate() {
        let sh = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("trapdetect-load{k}"))
            .spawn(move || {
                sh.lanes_nice
                    .store(lane_priority(sh.nice_asked), Ordering::Relaxed);
                rt.block_on(run_lane(lane, source, workers))
            });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                shared.stop.store(true, Ordering::Release);
                for t in threads {
                    let _ = t.join();
                }
                return Err(setup("spawn a load generator thread", e));
            }
        }
    }
    Ok(threads)
}

/// What the summary needs from the start: the plan as run, the fd limit, and the TcpExt
/// counters now.
fn statics(
    plan: &Plan,
    addr: impl std::fmt::Display,
    budget: usize,
    connect_rate: Option<f64>,
    fd: FdLimit,
    wall: WallPair,
) -> Static {
    let mut echo = plan.echo(addr);
    echo.max_connections = budget;
    echo.connect_rate_per_s = connect_rate;
    Static {
        echo,
        fd,
        netstat: read_netstat(),
        wall,
        clock: clock::clock_info(),
        rate_x_timeout: plan
            .rate
            .filter(|_| plan.closed_loop.is_none())
            .map(|r| r * plan.timeout.as_secs_f64()),
    }
}

impl Running {
    /// A snapshot of the counters.
    pub fn live(&self) -> Live {
        let s = &self.shared;
        let sum = |f: fn(&Lane) -> &AtomicU64| {
            self.lanes
                .iter()
                .map(|l| f(l).load(Ordering::Relaxed))
                .sum()
        };
        Live {
            elapsed_s: (mono_ns() as f64 - s.measured_start_ns as f64) / 1e9,
            scheduled: sum(|l| &l.dispatched),
            completed: sum(|l| &l.completed),
            ok_2xx: sum(|l| &l.ok_2xx),
            in_flight: s.in_flight.load(Ordering::Relaxed),
        }
    }

    /// Start of the measured window, CLOCK_MONOTONIC ns (`trapdetect run` joins kernel
    /// seconds on it).
    pub fn measured_start_ns(&self) -> u64 {
        self.shared.measured_start_ns
    }

    /// Whether the run (drain included) is over; `wait` then returns at once.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    /// Stops scheduling now, lets the requests in flight finish (each bounded by the
    /// timeout), and summarizes; the measured window ends now.
    pub fn stop(mut self) -> Result<Summary> {
        let _ =
            self.shared
                .stop_ns
                .compare_exchange(0, mono_ns(), Ordering::AcqRel, Ordering::Acquire);
        self.shared.stop.store(true, Ordering::Release);
        self.join()
    }

    /// Runs the plan to its end (and the drain), then summarizes.
    pub fn wait(mut self) -> Result<Summary> {
        self.join()
    }

    /// Joins the lanes' threads: what they dispatched, summed, and whether one panicked.
    fn join_lanes(&mut self) -> (Dispatched, bool) {
        let mut d = Dispatched::default();
        let mut panicked = false;
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(x) => {
                    d.measured += x.measured;
                    d.warmup += x.warmup;
                    d.unsent += x.unsent;
                    if d.per_second.len() < x.per_second.len() {
                        d.per_second.resize(x.per_second.len(), 0);
                    }
                    for (a, b) in d.per_second.iter_mut().zip(&x.per_second) {
                        *a += b;
                    }
                }
                Err(_) => panicked = true,
            }
        }
        (d, panicked)
    }

    fn join(&mut self) -> Result<Summary> {
        let (d, panicked) = self.join_lanes();
        if panicked {
            return Err(Error::Untrusted("a load generator thread panicked".into()));
        }
        let st = self
            .statics
            .take()
            .ok_or_else(|| Error::Untrusted("the load generator was already joined".into()))?;
        let sh = &self.shared;
        let stop_ns = sh.stop_ns.load(Ordering::Acquire);
        let stopped_early = stop_ns != 0 && stop_ns < sh.end_ns;
        let window_end = if stopped_early { stop_ns } else { sh.end_ns };
        let p99 = sh.seconds.p99s();
        let mut rec = Recorder::new(sh.measured_start_ns);
        for l in &self.lanes {
            rec.merge(&l.rec.lock().unwrap_or_else(|e| e.into_inner()), &p99);
        }
        for (sec, b) in sh.seconds.buckets() {
            if let Some(s) = rec.series.get_mut(sec) {
                s.lat_2xx_buckets = b;
            }
        }
        for (sec, n) in d.per_second.iter().enumerate() {
            rec.add_scheduled(sec, *n);
        }
        let last = rec.last_end_ns.max(window_end);
        for (sec, p) in sh.peaks.iter().enumerate() {
            let begins = sh.measured_start_ns + sec as u64 * 1_000_000_000;
            if begins < last {
                rec.in_flight_peak(sec, p.load(Ordering::Relaxed));
            }
        }
        let opened = self
            .lanes
            .iter()
            .map(|l| l.client.opened.load(Ordering::Relaxed))
            .sum();
        let stale_retries = self
            .lanes
            .iter()
            .map(|l| l.client.stale_retries.load(Ordering::Relaxed))
            .sum();
        let busy_max = self
            .lanes
            .iter()
            .map(|l| l.busy_max.load(Ordering::Relaxed))
            .sum();
        let paced = self
            .lanes
            .iter()
            .map(|l| l.paced.load(Ordering::Relaxed))
            .sum();
        let listen = listen_since(&st.netstat, read_netstat());
        Ok(summary::build(
            &rec,
            summary::Totals {
                plan: st.echo,
                scheduled: d.measured,
                unsent: d.unsent,
                warmup_scheduled: d.warmup,
                window_ns: window_end.saturating_sub(sh.measured_start_ns),
                window_end_ns: window_end,
                stopped_early,
                start_unix_s: Some(st.wall.unix_ns_at(sh.measured_start_ns) as f64 / 1e9),
                clock: Some(st.clock),
                in_flight_max: sh.in_flight_max.load(Ordering::Relaxed),
                rate_x_timeout: st.rate_x_timeout,
                fd_limit: st.fd,
                opened,
                stale_retries,
                busy_max,
                paced,
                listen,
                generator: GeneratorCost {
                    lanes_nice: match sh.lanes_nice.load(Ordering::Relaxed) {
                        NICE_UNSET => None,
                        n => Some(n),
                    },
                    ..rusage()
                },
            },
        ))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
    }
}

async fn run_lane(lane: Arc<Lane>, source: Source, workers: Option<usize>) -> Dispatched {
    let sweeper = tokio::spawn({
        let lane = lane.clone();
        async move { lane.deadlines.sweeper().await }
    });
    let d = dispatch(&lane, source, workers).await;
    // Drain: every request ends by its own timeout, so this is bounded.
    while lane.in_flight.load(Ordering::Acquire) > 0 {
        lane.drained.notified().await;
    }
    sweeper.abort();
    lane.workers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .idle
        .clear();
    lane.client.close_idle();
    lane.rec.lock().unwrap_or_else(|e| e.into_inner()).finish();
    d
}

/// The one scheduler loop: releases each arrival of this lane at its instant (bounded by a
/// permit per worker in closed-loop mode) and gives it its own request task.
async fn dispatch(lane: &Arc<Lane>, source: Source, workers: Option<usize>) -> Dispatched {
    let sh = &lane.shared;
    let limit = workers.map(|n| Arc::new(tokio::sync::Semaphore::new(n)));
    let mut d = Dispatched::default();
    let acquire = || async {
        match &limit {
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        }
    };
    match source {
        Source::Scheduled {
            schedule,
            mut picker,
            index,
            lanes,
            start_ns,
            warmup_ns,
            ticker,
        } => {
            // Every lane walks the whole sequence (cheap) so arrival i gets the same instant
            // and the same host/path whatever the number of lanes.
            let all = schedule.map(move |off| (off, picker.pick())).enumerate();
            let mut mine = all.filter(|(i, _)| i % lanes == index);
            let mut burst = 0;
            // The clock is read again only when the last reading is before the next instant:
            // an arrival already overdue at that reading is overdue now (one read per burst,
            // not one per arrival).
            let mut now = 0;
            while let Some((i, (offset, target))) = mine.next() {
                let permit = acquire().await;
                let due = start_ns + offset;
                if now < due || permit.is_some() {
                    now = mono_ns();
                }
                if now < due {
                    burst = 0;
                }
                while now < due {
                    if sh.stop.load(Ordering::Acquire) {
                        return d;
                    }
                    let wake = due.max(now + QUANTUM_NS).min(now + MAX_WAIT_NS);
                    if ticker.sleep_until(wake).await.is_err() {
                        // The timer failed: fall back to the runtime's (1 ms) timer.
                        tokio::time::sleep(Duration::from_nanos(wake - now)).await;
                    }
                    now = mono_ns();
                }
                if sh.stop.load(Ordering::Acquire) {
                    return d;
                }
                let t = Ticket {
                    seq: i as u64,
                    intended_ns: due,
                    measured: offset >= warmup_ns,
                    target,
                };
                // A closed loop whose workers were all busy past the planned end: what is
                // still due is counted, not sent.
                if now > sh.end_ns + sh.lag_budget_ns {
                    d.unsent += u64::from(t.measured)
                        + mine.filter(|(_, (off, _))| *off >= warmup_ns).count() as u64;
                    return d;
                }
                launch(lane, &mut d, t, permit, now);
                burst += 1;
                if burst == BURST {
                    burst = 0;
                    tokio::task::yield_now().await;
                    now = mono_ns();
                }
            }
        }
        Source::Asap {
            mut picker,
            index,
            lanes,
        } => {
            let mut j = 0u64;
            loop {
                let permit = acquire().await;
                let now = mono_ns();
                if now >= sh.end_ns || sh.stop.load(Ordering::Acquire) {
                    break;
                }
                let t = Ticket {
                    seq: index + j * lanes,
                    intended_ns: now,
                    measured: now >= sh.measured_start_ns,
                    target: picker.pick(),
                };
                j += 1;
                launch(lane, &mut d, t, permit, now);
            }
        }
    }
    d
}

fn launch(
    lane: &Arc<Lane>,
    d: &mut Dispatched,
    t: Ticket,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    now: u64,
) {
    let sh = &lane.shared;
    if t.measured {
        d.measured += 1;
        let sec = ((t.intended_ns - sh.measured_start_ns) / 1_000_000_000) as usize;
        if d.per_second.len() <= sec {
            d.per_second.resize(sec + 1, 0);
        }
        d.per_second[sec] += 1;
    } else {
        d.warmup += 1;
    }
    bump(&lane.dispatched);
    lane.in_flight.fetch_add(1, Ordering::AcqRel);
    let n = sh.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
    sh.peak(n, now);
    let idle = {
        let mut w = lane.workers.lock().unwrap_or_else(|e| e.into_inner());
        w.jobs.push_back(Job { t, permit });
        w.idle.pop()
    };
    match idle {
        Some(w) => w.wake(),
        None => {
            tokio::spawn(worker(lane.clone()));
        }
    }
}

/// Runs the lane's released arrivals, one at a time, in release order.
async fn worker(lane: Arc<Lane>) {
    loop {
        let job = std::future::poll_fn(|cx| {
            let mut w = lane.workers.lock().unwrap_or_else(|e| e.into_inner());
            match w.jobs.pop_front() {
                Some(j) => std::task::Poll::Ready(Some(j)),
                None if w.idle.len() >= MAX_IDLE_WORKERS => std::task::Poll::Ready(None),
                None => {
                    w.idle.push(cx.waker().clone());
                    std::task::Poll::Pending
                }
            }
        })
        .await;
        let Some(job) = job else { return };
        request(&lane, job.t).await;
        drop(job.permit);
    }
}

async fn request(lane: &Lane, t: Ticket) {
    let sh = &lane.shared;
    let start = mono_ns();
    // The timeout counts from here, the wait for a connection included (registered now, in
    // start order, as the deadline queue needs).
    let deadline = lane
        .deadlines
        .register(start.saturating_add(clock::ns(sh.timeout)));
    let mut p = Progress::default();
    let (o, queue_ns) = match lane.budget.slot(sh.wait_bound).await {
        Slot::Dropped => (Outcome::Dropped, 0),
        // The slot is held until the connection is back in the pool (or closed).
        Slot::Now(_slot) => (exchange(lane, &t, start, &deadline, &mut p).await, 0),
        Slot::Waited(_slot, waited) => (exchange(lane, &t, start, &deadline, &mut p).await, waited),
    };
    drop(deadline);
    let end = mono_ns();
    let tm = Timing {
        start_ns: start,
        queue_ns,
        end_ns: end,
        in_window: end < sh.window_end_ns(),
    };
    lane.rec
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .record(&t, tm, &p, o);
    bump(&lane.completed);
    let (status, error, body_bytes) = match o {
        Outcome::Answered(a) => {
            if (200..300).contains(&a.status) {
                bump(&lane.ok_2xx);
            }
            (Some(a.status), None, a.body_bytes)
        }
        Outcome::Failed(k) => (None, Some(k), 0),
        Outcome::Dropped => (None, None, 0),
    };
    if let Some(tx) = &sh.samples {
        let _ = tx.send(Sample {
            seq: t.seq,
            measured: t.measured,
            intended_ns: t.intended_ns,
            start_ns: start,
            sent_ns: (p.sent_ns > 0).then_some(p.sent_ns),
            end_ns: end,
            status,
            error,
            dropped: matches!(o, Outcome::Dropped),
            queue_ns,
            body_bytes,
            reused: p.reused,
            target: t.target,
        });
    }
    let n = sh.in_flight.fetch_sub(1, Ordering::AcqRel);
    sh.peak(n, end);
    if lane.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
        lane.drained.notify_one();
    }
}

/// Sends one request holding a slot of the budget: waits for a connect token first when it
/// will need a new connection (dropped if that comes after the wait bound), then sends within
/// what is left of the timeout (`deadline`, which counts from `start`, the queueing included).
async fn exchange(
    lane: &Lane,
    t: &Ticket,
    start: u64,
    deadline: &Deadline<'_>,
    p: &mut Progress,
) -> Outcome {
    let sh = &lane.shared;
    raise(&lane.busy_max, lane.budget.busy() as u64);
    if lane.client.idle() == 0 {
        let now = mono_ns();
        let latest = start + clock::ns(sh.wait_bound);
        match lane.budget.connect_at(now, latest) {
            None => {
                lane.paced.fetch_add(1, Ordering::Relaxed);
                return Outcome::Dropped;
            }
            Some(at) if at > now => {
                lane.paced.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_nanos(at - now)).await;
            }
            Some(_) => {}
        }
    }
    match lane
        .deadlines
        .within(deadline, lane.client.exchange(t.target, p))
        .await
    {
        Some(Ok(a)) => Outcome::Answered(a),
        Some(Err(k)) => Outcome::Failed(k),
        None => Outcome::Failed(ErrorKind::Timeout),
    }
}

/// The TcpExt counters of this network namespace (the listener's overflow counters, for a
/// target on loopback); `None` when unreadable.
/// The listen queue's overflows and drops between two TcpExt readings (`None`: one is missing).
fn listen_since(
    before: &Option<std::collections::BTreeMap<String, u64>>,
    after: Option<std::collections::BTreeMap<String, u64>>,
) -> Option<Listen> {
    match (before, after) {
        (Some(a), Some(b)) => {
            let d = |k: &str| {
                b.get(k)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(a.get(k).copied().unwrap_or(0))
            };
            Some(Listen {
                overflows: d("ListenOverflows"),
                drops: d("ListenDrops"),
            })
        }
        _ => None,
    }
}

fn read_netstat() -> Option<std::collections::BTreeMap<String, u64>> {
    let text = std::fs::read_to_string("/proc/thread-self/net/netstat").ok()?;
    Some(crate::host::net::procfs::parse_netstat(&text))
}

fn rusage() -> GeneratorCost {
    use nix::sys::{
        resource::{UsageWho, getrusage},
        time::TimeVal,
    };
    let Ok(ru) = getrusage(UsageWho::RUSAGE_SELF) else {
        return GeneratorCost::default();
    };
    let tv = |t: TimeVal| crate::traps::round(t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6, 3);
    GeneratorCost {
        cpu_user_s: tv(ru.user_time()),
        cpu_sys_s: tv(ru.system_time()),
        rss_max_mib: crate::traps::round(ru.max_rss() as f64 / 1024.0, 1),
        lanes_nice: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listen counters' increments between two readings; none without both.
    #[test]
    fn listen_since_is_the_increment_of_both_counters() {
        let reading = |o: u64, d: u64| {
            Some(
                [("ListenOverflows", o), ("ListenDrops", d), ("Other", 9)]
                    .map(|(k, v)| (k.to_string(), v))
                    .into_iter()
                    .collect::<std::collections::BTreeMap<_, _>>(),
            )
        };
        let l = listen_since(&reading(5, 7), reading(12, 7)).unwrap();
        assert_eq!((l.overflows, l.drops), (7, 0));
        // A counter missing from the first reading counts from 0; a lower one saturates.
        let mut before = reading(5, 7);
        before.as_mut().unwrap().remove("ListenDrops");
        let l = listen_since(&before, reading(3, 4)).unwrap();
        assert_eq!((l.overflows, l.drops), (0, 4));
        assert!(listen_since(&None, reading(1, 1)).is_none());
        assert!(listen_since(&reading(1, 1), None).is_none());
    }
}
