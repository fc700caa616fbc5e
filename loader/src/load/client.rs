//! The one HTTP/1.1 client in trapdetect: TCP or unix streams, with or without TLS (see
//! [`super::transport`]), a keep-alive pool sized for floods
//! (thousands in flight), requests prebuilt once, responses read with [`super::http`], and
//! every failure classified from its errno (see [`super::classify`]).
//!
//! A waiting request holds no read buffer: reads go to one buffer per lane (a read is
//! synchronous once the socket is readable), so 10,000 requests parked on a server that never
//! answers cost little more than their sockets, and a response that arrives whole allocates
//! nothing.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use tokio::io::{AsyncRead, AsyncWriteExt};

use super::exchange::{Answer, Progress};
use super::{
    classify::{ErrorKind, classify},
    clock::mono_ns,
    http::ResponseReader,
    transport::{Connector, Stream},
};

/// Connection pool and prebuilt requests for one target address.
#[derive(Debug)]
pub struct Client {
    connector: Connector,
    keepalive: bool,
    head: bool,
    requests: Arc<[Box<[u8]>]>,
    pool: Mutex<Vec<Stream>>,
    pool_cap: usize,
    /// Connections opened.
    pub opened: AtomicU64,
    /// Requests retried once because a pooled connection had been closed by the server while
    /// idle (no byte of a response was read): the server's keep-alive timeout, not an error.
    /// With HTTP/2: streams the server refused before processing them (GOAWAY).
    pub stale_retries: AtomicU64,
    /// HTTP/2 connections, when the run speaks HTTP/2.
    h2: Option<super::h2::H2Pool>,
    /// hyper's HTTP/1.1 client instead of the hand-written one (`--engine hyper`).
    hyper: Option<super::hyper_h1::HyperPool>,
}

/// Which HTTP/1.1 client sends the requests (the hidden `--engine`; HTTP/2 always uses the
/// `h2` crate). Both sit behind the same scheduler, budget and recorder, so `cargo xtask
/// bench load-hyper` compares the clients alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// The hand-written client of this module.
    #[default]
    Native,
    /// hyper's `client::conn::http1`.
    Hyper,
}

impl Client {
    /// A client opening connections with `connector` and sending `requests[target]`;
    /// `pool_cap` idle connections are kept.
    pub fn new(
        connector: Connector,
        requests: Arc<[Box<[u8]>]>,
        keepalive: bool,
        head: bool,
        pool_cap: usize,
        engine: Engine,
    ) -> Self {
        let h2 = connector.http2.and_then(|settings| {
            let scheme = if connector.tls.is_some() {
                "https"
            } else {
                "http"
            };
            super::h2::H2Pool::new(connector.clone(), &requests, scheme, settings)
        });
        let hyper = (h2.is_none() && engine == Engine::Hyper)
            .then(|| {
                super::hyper_h1::HyperPool::new(connector.clone(), &requests, keepalive, pool_cap)
            })
            .flatten();
        Client {
            h2,
            hyper,
            connector,
            keepalive,
            head,
            requests,
            pool: Mutex::new(Vec::new()),
            pool_cap,
            opened: AtomicU64::new(0),
            stale_retries: AtomicU64::new(0),
        }
    }

    fn take(&self) -> Option<Stream> {
        self.pool.lock().ok()?.pop()
    }

    fn put(&self, s: Stream) {
        if let Ok(mut p) = self.pool.lock()
            && p.len() < self.pool_cap
        {
            p.push(s);
        }
    }

    /// Idle pooled connections (a request sent now opens a new one when there is none). With
    /// HTTP/2 requests share connections as streams: 1 when the next request's connection is
    /// open, else 0.
    pub fn idle(&self) -> usize {
        if let Some(h2) = &self.h2 {
            return usize::from(h2.next_is_open());
        }
        if let Some(hy) = &self.hyper {
            return hy.idle();
        }
        if !self.keepalive {
            return 0;
        }
        self.pool.lock().map_or(0, |p| p.len())
    }

    /// Closes every idle connection.
    pub fn close_idle(&self) {
        if let Ok(mut p) = self.pool.lock() {
            p.clear();
        }
        if let Some(h2) = &self.h2 {
            h2.close();
        }
        if let Some(hy) = &self.hyper {
            hy.close();
        }
    }

    async fn connect(&self, p: &mut Progress) -> Result<Stream, ErrorKind> {
        let (s, o) = self.connector.open().await?;
        self.opened.fetch_add(1, Ordering::Relaxed);
        p.connect_ns = Some(o.connect_ns);
        p.tls_ns = o.tls_ns;
        p.tls_resumed = o.resumed;
        Ok(s)
    }

    /// Sends request `target` and reads its response. A pooled connection the server closed
    /// while idle gets one retry on a fresh connection (counted in `stale_retries`).
    pub async fn exchange(&self, target: u32, p: &mut Progress) -> Result<Answer, ErrorKind> {
        // The HTTP/2 and hyper paths and the connect (with its TLS handshake) are boxed: their
        // futures are large, and inline they would make every request's task ~2 KiB, copied
        // on each spawn and allocated past glibc's small-size caches (docs/load.md, OVERHEAD).
        if let Some(h2) = &self.h2 {
            return Box::pin(h2.exchange(target, p, &self.opened, &self.stale_retries)).await;
        }
        if let Some(hy) = &self.hyper {
            return Box::pin(hy.exchange(target, p, &self.opened, &self.stale_retries)).await;
        }
        let mut retried = false;
        loop {
            // The retry of a request a stale connection dropped goes on a fresh one: the pool's
            // other idle connections are as old, and a server that closes each connection
            // after its response without saying so has closed them all (uWSGI's
            // `--http-socket`: a retry on the next pooled one failed too, and 13 % of the
            // arrivals at half its capacity were counted as errors).
            let pooled = if self.keepalive && !retried {
                self.take()
            } else {
                None
            };
            p.reused = pooled.is_some();
            let mut s = match pooled {
                Some(s) => s,
                None => Box::pin(self.connect(p)).await?,
            };
            p.bytes_in = 0;
            match self.once(&mut s, target, p).await {
                Ok((answer, reusable)) => {
                    if reusable && self.keepalive {
                        self.put(s);
                    }
                    return Ok(answer);
                }
                Err(ErrorKind::Eof | ErrorKind::ConnReset)
                    if p.reused && !retried && p.bytes_in == 0 =>
                {
                    retried = true;
                    self.stale_retries.fetch_add(1, Ordering::Relaxed);
                }
                Err(k) => return Err(k),
            }
        }
    }

    async fn once(
        &self,
        s: &mut Stream,
        target: u32,
        p: &mut Progress,
    ) -> Result<(Answer, bool), ErrorKind> {
        let req = &self.requests[target as usize];
        p.sent_ns = mono_ns();
        s.write_all(req).await.map_err(|e| classify(&e))?;
        if s.buffered() {
            s.flush().await.map_err(|e| classify(&e))?;
        }
        let mut r = ResponseReader::new(self.head);
        // Bytes of a response head or chunk-size line split across reads; empty (no heap)
        // for the usual response that arrives whole.
        let mut pending: Vec<u8> = Vec::new();
        loop {
            // No separate wait for readability: poll_read registers the waker and returns
            // Pending without a syscall while the socket is not known to be readable.
            let step = std::future::poll_fn(|cx| {
                SCRATCH.with_borrow_mut(|buf| {
                    let mut rb = tokio::io::ReadBuf::new(&mut buf[..]);
                    // poll_read (not try_read) so a short read clears readiness: the next
                    // response on this connection then costs no extra EAGAIN read.
                    match std::pin::Pin::new(&mut *s).poll_read(cx, &mut rb) {
                        std::task::Poll::Pending => std::task::Poll::Pending,
                        std::task::Poll::Ready(Err(e)) => std::task::Poll::Ready(Err(classify(&e))),
                        std::task::Poll::Ready(Ok(())) => {
                            std::task::Poll::Ready(Ok(feed(&mut r, &mut pending, rb.filled())))
                        }
                    }
                })
            })
            .await?;
            match step {
                Fed::Eof => {
                    return if r.eof() {
                        Ok((answer(&r), false))
                    } else {
                        Err(ErrorKind::Eof)
                    };
                }
                Fed::Bad => return Err(ErrorKind::BadResponse),
                Fed::More(n) => p.bytes_in += n as u64,
                Fed::Done(n, clean) => {
                    p.bytes_in += n as u64;
                    // Bytes after the response (pipelining we never asked for): do not reuse.
                    return Ok((answer(&r), r.reusable && clean));
                }
            }
        }
    }
}

thread_local! {
    /// Each lane's one read buffer: a read is synchronous once the socket is readable, so the
    /// requests of a lane take turns with it instead of each allocating its own.
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0u8; 16 * 1024].into_boxed_slice());
}

/// What one read brought.
enum Fed {
    /// The peer closed (0-byte read).
    Eof,
    /// Not an HTTP/1.x response.
    Bad,
    /// `n` bytes, the response is not complete yet.
    More(usize),
    /// `n` bytes, the response is complete; `clean` when nothing followed it.
    Done(usize, bool),
}

/// Feeds one read (`got`) to the reader, keeping what it could not use yet in `pending`.
fn feed(r: &mut ResponseReader, pending: &mut Vec<u8>, got: &[u8]) -> Fed {
    if got.is_empty() {
        return Fed::Eof;
    }
    let n = got.len();
    let (buf, keep): (&[u8], bool) = if pending.is_empty() {
        (got, false)
    } else {
        pending.extend_from_slice(got);
        (&pending[..], true)
    };
    let used = match r.feed(buf) {
        Ok(u) => u,
        Err(_) => return Fed::Bad,
    };
    if r.done() {
        return Fed::Done(n, used == buf.len());
    }
    if keep {
        pending.drain(..used);
    } else {
        pending.extend_from_slice(&got[used..]);
    }
    Fed::More(n)
}

fn answer(r: &ResponseReader) -> Answer {
    Answer {
        status: r.status,
        body_bytes: r.body_bytes,
    }
}
