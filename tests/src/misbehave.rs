//! Small HTTP/1.1 servers on 127.0.0.1 that misbehave on purpose (shed with 503, rate-limit
//! with 429, never answer, close or reset without a response, die mid-run), so the load
//! generator's error taxonomy is checked against the real socket behaviour, not a mock.
//! Each server is torn down by its `Drop`, also when a test panics.

use std::{
    io::{Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
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
    /// Answers 200 after `service` of work on one of `workers` (requests queue for a free
    /// worker, as in a php-fpm pool): a planted capacity of `workers / service` per second.
    Capacity {
        /// Requests served at once.
        workers: usize,
        /// Time each request holds a worker.
        service: Duration,
    },
}

/// A counting semaphore for [`Behaviour::Capacity`]'s workers.
#[derive(Default)]
struct Pool {
    busy: Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Pool {
    fn work(&self, workers: usize, service: Duration) {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        while *busy >= workers {
            busy = self.freed.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy += 1;
        drop(busy);
        std::thread::sleep(service);
        *self.busy.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        self.freed.notify_one();
    }
}

/// A running misbehaving server.
pub struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts it on an ephemeral loopback port.
    pub fn start(b: Behaviour) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (s, c) = (stop.clone(), conns.clone());
        let accept = std::thread::spawn(move || accept_loop(listener, b, s, c));
        Server {
            port,
            stop,
            conns,
            accept: Some(accept),
        }
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
) {
    let started = Instant::now();
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
    let pool = Arc::new(Pool::default());
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
                let pool = pool.clone();
                handlers.push(std::thread::spawn(move || serve(stream, b, &dead, &pool)));
            }
            // A clone so a crash (or Drop) can shut the connection under its handler.
            Behaviour::Status(_) | Behaviour::DieAfter(_) | Behaviour::Capacity { .. } => {
                if let Ok(c) = stream.try_clone() {
                    keep(c);
                }
                let dead = dead.clone();
                let pool = pool.clone();
                handlers.push(std::thread::spawn(move || serve(stream, b, &dead, &pool)));
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

fn serve(mut s: TcpStream, b: Behaviour, dead: &AtomicBool, pool: &Pool) {
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
            Behaviour::Capacity { workers, service } => {
                pool.work(workers, service);
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
            Behaviour::Never => return,
        }
    }
}
