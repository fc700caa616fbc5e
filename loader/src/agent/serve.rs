//! The agent's HTTP endpoint: `GET /metrics` (OpenMetrics text), `GET /report` (the last
//! window's JSON report; 503 before the first), anything else 404. One thread accepts; each
//! request is read with a deadline and answered with `Connection: close`, so a client that
//! stalls holds one connection for at most that deadline and never the state's lock.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use super::{State, lock};
use crate::error::{Error, Result};

/// How long a client may take to send its request, or to read the answer.
const DEADLINE: Duration = Duration::from_secs(5);
/// Longest request head read.
const HEAD_CAP: usize = 8 << 10;

/// Serving until dropped.
pub struct Server {
    addr: SocketAddr,
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `addr` and serves `state` from a thread.
    pub fn start(addr: SocketAddr, state: Arc<Mutex<State>>) -> Result<Server> {
        let l = TcpListener::bind(addr)
            .map_err(|e| Error::usage(format!("--listen {addr}: cannot listen there: {e}")))?;
        let addr = l.local_addr().unwrap_or(addr);
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::Builder::new()
            .name("agent-http".into())
            .spawn(move || {
                for c in l.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(c) = c {
                        let _ = answer(c, &state);
                    }
                }
            })
            .map_err(|e| Error::usage(format!("--listen {addr}: no thread to serve it: {e}")))?;
        Ok(Server {
            addr,
            done,
            thread: Some(thread),
        })
    }

    /// The address served (the port the kernel chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `done`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request head and answers it.
fn answer(mut c: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    c.set_read_timeout(Some(DEADLINE))?;
    c.set_write_timeout(Some(DEADLINE))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < HEAD_CAP {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, kind, body, window) = route(method, path, state);
    // `/report`'s window number, which `trapdetect_agent_windows` gives in the same window's
    // scrape: what ties a Prometheus sample to its report.
    let window = window.map_or(String::new(), |n| format!("X-Trapdetect-Window: {n}\r\n"));
    let h = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{window}Connection: close\r\n\r\n",
        body.len()
    );
    c.write_all(h.as_bytes())?;
    if method != "HEAD" {
        c.write_all(body.as_bytes())?;
    }
    c.flush()
}

/// An answer: status, content type, body, and for `/report` its window's number.
type Answer = (&'static str, &'static str, String, Option<u64>);

/// The answer to a request.
fn route(method: &str, path: &str, state: &Mutex<State>) -> Answer {
    const TEXT: &str = "text/plain; charset=utf-8";
    let usage = || "GET /metrics or /report\n".to_string();
    if method != "GET" && method != "HEAD" {
        return ("405 Method Not Allowed", TEXT, usage(), None);
    }
    match path {
        "/metrics" => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            lock(state).metrics(),
            None,
        ),
        "/report" => match lock(state).report_json() {
            Ok((j, n)) => ("200 OK", "application/json", j, Some(n)),
            Err(why) => ("503 Service Unavailable", TEXT, why + "\n", None),
        },
        "/" => (
            "200 OK",
            TEXT,
            "trapdetect agent: /metrics (OpenMetrics), /report (the last window, JSON)\n".into(),
            None,
        ),
        _ => ("404 Not Found", TEXT, usage(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, req: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    /// The routes on a real socket: metrics before any window, the report's 503, a 404, a
    /// 405; the server stops when dropped (its port then refuses).
    #[test]
    fn routes_and_stop() {
        let state = Arc::new(Mutex::new(State::new(None, false)));
        let s = Server::start("127.0.0.1:0".parse().unwrap(), state.clone()).unwrap();
        let a = s.addr();
        let m = get(a, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(
            m.starts_with("HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"),
            "{m}"
        );
        assert!(
            m.contains("\r\n\r\n# TYPE trapdetect_agent_up gauge\n"),
            "{m}"
        );
        assert!(m.ends_with("# EOF\n"), "{m}");
        let r = get(a, "GET /report HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503 "), "{r}");
        assert!(r.ends_with("\r\n\r\nno window has ended yet\n"), "{r}");
        lock(&state).fail("no process named x".into(), 1.0);
        let r = get(a, "GET /report HTTP/1.1\r\n\r\n");
        assert!(
            r.ends_with("\r\n\r\nno window has traced the target yet: no process named x\n"),
            "{r}"
        );
        assert!(get(a, "GET /nope HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 404 "));
        assert!(get(a, "POST /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 405 "));
        let h = get(a, "HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(h.ends_with("\r\n\r\n"), "HEAD has no body: {h}");
        drop(s);
        assert!(TcpStream::connect(a).is_err(), "still listening after drop");
    }
}
