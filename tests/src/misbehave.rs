//! Small HTTP/1.1 servers on 127.0.0.1 that misbehave on purpose (shed with 503, rate-limit
//! with 429, never answer, close or reset without a response, die mid-run), so the load
//! generator's error taxonomy is checked against the real socket behaviour, not a mock.
//! Each server is torn down by its `Drop`, also when a test panics.

use std::{
    io::{Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// What the server does with each request.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// Answers every request with this status and a 2-byte body, keep-alive.
    Status(u16),
    /// Accepts and reads, never answers (holds the connection open).
    Never,
    /// Reads the request, then closes cleanly without a response (the client sees EOF).
    CloseAfterRequest,
    /// Reads the request, then resets the connection (SO_LINGER 0: the client sees RST).
    ResetAfterRequest,
    /// Answers 200 until this long after start, then closes its listener and every
    /// connection (the process "died": later connects are refused).
    DieAfter(Duration),
    /// Answers 200, keep-alive, with a known capacity: `workers` workers, each busy `service`
    /// per request, so at most `workers / service` answers a second. A worker's next request
    /// starts from when its previous one was due to end (not from a late wake-up), so the
    /// capacity holds on a loaded machine; requests beyond it wait for a worker.
    Capacity {
        /// Requests served at once.
        workers: usize,
        /// Time per request.
        service: Duration,
    },
}

/// What a server saw, counted on its side.
#[derive(Debug, Default)]
pub struct Counters {
    open: AtomicU64,
    open_max: AtomicU64,
    accepted: AtomicU64,
    requests: AtomicU64,
}

/// How far behind its schedule a worker may catch up (see [`Workers::serve`]).
const CATCH_UP: Duration = Duration::from_millis(250);

/// The workers of a [`Behaviour::Capacity`] server: when each is next free.
struct Workers {
    /// When each worker is next free (`None`: never used yet).
    free_at: Mutex<Vec<Option<Instant>>>,
    /// Requests waiting for a worker.
    waiting: AtomicU64,
    freed: Condvar,
    service: Duration,
}

impl Workers {
    /// Takes a worker, waits out one service time from when it was due to be free, gives it
    /// back.
    fn serve(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut g = self.free_at.lock().unwrap_or_else(|e| e.into_inner());
        let w = loop {
            // A worker is free once its due time has come (a busy one is marked far ahead);
            // waiters sleep until a worker hands itself back (no timed wake-ups: hundreds of
            // waiting connections would otherwise wake together).
            let now = Instant::now();
            if let Some((i, _)) = g
                .iter()
                .enumerate()
                .filter(|(_, t)| t.is_none_or(|t| t <= now))
                .min_by_key(|(_, t)| **t)
            {
                break i;
            }
            g = self.freed.wait(g).unwrap_or_else(|e| e.into_inner());
        };
        // Back-to-back requests chain from the due time, so a worker thread that was not
        // scheduled for a while (a loaded machine) catches up on the requests waiting for it,
        // up to CATCH_UP; a worker that went idle (nobody waiting) starts now: idleness is
        // not banked.
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let now = Instant::now();
        let begin = g[w].map_or(now, |t| t.max(now - self.service.max(CATCH_UP)));
        let done = begin + self.service;
        g[w] = Some(now + Duration::from_secs(3600));
        drop(g);
        std::thread::sleep(done.saturating_duration_since(Instant::now()));
        let mut g = self.free_at.lock().unwrap_or_else(|e| e.into_inner());
        // With nobody waiting the worker goes idle: its next request starts when it comes.
        g[w] = (self.waiting.load(Ordering::SeqCst) > 0).then_some(done);
        drop(g);
        self.freed.notify_one();
    }
}

/// A running misbehaving server.
pub struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl Server {
    /// Starts it on an ephemeral loopback port.
    pub fn start(b: Behaviour) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let counters: Arc<Counters> = Arc::default();
        let (s, c, n) = (stop.clone(), conns.clone(), counters.clone());
        let accept = std::thread::spawn(move || accept_loop(listener, b, s, c, n));
        Server {
            port,
            stop,
            conns,
            accept: Some(accept),
            counters,
        }
    }

    /// Most connections open at once, counted by the server (accepted, not yet closed by the
    /// client). Counted for [`Behaviour::Capacity`] only.
    pub fn open_max(&self) -> u64 {
        self.counters.open_max.load(Ordering::SeqCst)
    }

    /// Connections accepted ([`Behaviour::Capacity`] only).
    pub fn accepted(&self) -> u64 {
        self.counters.accepted.load(Ordering::SeqCst)
    }

    /// Requests read ([`Behaviour::Capacity`] only).
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::SeqCst)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Unblock the handlers first (the accept thread joins them), then the accept.
        close_all(&self.conns);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        close_all(&self.conns);
    }
}

fn close_all(conns: &Mutex<Vec<TcpStream>>) {
    let mut v = conns.lock().unwrap_or_else(|e| e.into_inner());
    for c in v.drain(..) {
        let _ = c.shutdown(Shutdown::Both);
    }
}

fn accept_loop(
    listener: TcpListener,
    b: Behaviour,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    counters: Arc<Counters>,
) {
    let started = Instant::now();
    let workers = match b {
        Behaviour::Capacity { workers, service } => Some(Arc::new(Workers {
            free_at: Mutex::new(vec![None; workers.max(1)]),
            waiting: AtomicU64::new(0),
            freed: Condvar::new(),
            service,
        })),
        _ => None,
    };
    let dead = Arc::new(AtomicBool::new(false));
    if let Behaviour::DieAfter(after) = b {
        // The "crash": at `after`, close the listener (below) and every open connection.
        let (stop, dead, conns) = (stop.clone(), dead.clone(), conns.clone());
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            while started.elapsed() < after && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            dead.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(("127.0.0.1", port));
            close_all(&conns);
        });
    }
    let mut handlers = vec![];
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) || dead.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let keep = |s: TcpStream| conns.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        match b {
            // Kept open, never read.
            Behaviour::Never => keep(stream),
            // No second descriptor: the close must really close the socket.
            Behaviour::CloseAfterRequest | Behaviour::ResetAfterRequest => {
                let dead = dead.clone();
                handlers.push(std::thread::spawn(move || serve(stream, b, &dead)));
            }
            // A clone so a crash (or Drop) can shut the connection under its handler.
            Behaviour::Capacity { .. } => {
                if let Ok(c) = stream.try_clone() {
                    keep(c);
                }
                let (n, w) = (counters.clone(), workers.clone());
                handlers.push(std::thread::spawn(move || {
                    if let Some(w) = w {
                        serve_capacity(stream, &w, &n);
                    }
                }));
            }
            Behaviour::Status(_) | Behaviour::DieAfter(_) => {
                if let Ok(c) = stream.try_clone() {
                    keep(c);
                }
                let dead = dead.clone();
                handlers.push(std::thread::spawn(move || serve(stream, b, &dead)));
            }
        }
    }
    drop(listener);
    if dead.load(Ordering::SeqCst) {
        close_all(&conns);
    }
    for h in handlers {
        let _ = h.join();
    }
}

/// Reads one request head (the generator sends no bodies here); false on EOF or error.
fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            return true;
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn serve_capacity(mut s: TcpStream, w: &Workers, n: &Counters) {
    n.accepted.fetch_add(1, Ordering::SeqCst);
    let open = n.open.fetch_add(1, Ordering::SeqCst) + 1;
    n.open_max.fetch_max(open, Ordering::SeqCst);
    let mut buf = vec![];
    let _ = s.set_nodelay(true);
    while read_request(&mut s, &mut buf) {
        n.requests.fetch_add(1, Ordering::SeqCst);
        w.serve();
        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            break;
        }
    }
    n.open.fetch_sub(1, Ordering::SeqCst);
}

fn serve(mut s: TcpStream, b: Behaviour, dead: &AtomicBool) {
    let mut buf = vec![];
    let _ = s.set_nodelay(true);
    while read_request(&mut s, &mut buf) {
        match b {
            Behaviour::Status(code) => {
                let resp = format!("HTTP/1.1 {code} X\r\nContent-Length: 2\r\n\r\nok");
                if s.write_all(resp.as_bytes()).is_err() {
                    return;
                }
            }
            Behaviour::DieAfter(_) => {
                if dead.load(Ordering::SeqCst) {
                    return;
                }
                if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .is_err()
                {
                    return;
                }
            }
            Behaviour::CloseAfterRequest => {
                let _ = s.shutdown(Shutdown::Both);
                return;
            }
            Behaviour::ResetAfterRequest => {
                let l = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                // SAFETY: valid socket and a valid linger struct of the declared size.
                unsafe {
                    libc::setsockopt(
                        std::os::fd::AsRawFd::as_raw_fd(&s),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        (&l as *const libc::linger).cast(),
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    );
                }
                return; // dropping the stream with linger 0 sends RST
            }
            Behaviour::Never | Behaviour::Capacity { .. } => return,
        }
    }
}
