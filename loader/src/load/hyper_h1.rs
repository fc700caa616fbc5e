//! hyper's HTTP/1.1 client (`hyper::client::conn::http1`) as the wire of the generator, behind
//! the same scheduler, connection budget, pool discipline and recorder as the hand-written
//! path ([`super::client`]). It exists so `cargo xtask bench load-hyper` compares the two
//! clients at the same job (issue 13: the hand-written path may stay only if it is faster),
//! and it is selected with the hidden `--engine hyper`.
//!
//! Connections come from the same [`Connector`] (TCP, unix socket, TLS), so connect and TLS
//! handshake times are recorded the same way. Each connection's I/O runs in its own task, as
//! hyper requires; a connection that is not put back in the pool aborts that task, so a
//! request that timed out closes its socket as the hand-written path does.

use std::sync::{
    Mutex,
    atomic::{AtomicU64, Ordering},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

use super::{
    classify::{ErrorKind, classify},
    clock::mono_ns,
    exchange::{Answer, Progress},
    transport::Connector,
};

/// One prebuilt request, as the parts hyper needs (it takes a fresh `Request` per send).
#[derive(Debug)]
struct Template {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Template {
    /// From a prebuilt HTTP/1.1 request; every header is kept (Host, Connection,
    /// Content-Length included), so both engines send the same request.
    fn from_h1(req: &[u8]) -> Option<Template> {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut r = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(n) = r.parse(req).ok()? else {
            return None;
        };
        let mut map = http::HeaderMap::new();
        for h in r.headers.iter() {
            map.append(
                http::HeaderName::from_bytes(h.name.as_bytes()).ok()?,
                http::HeaderValue::from_bytes(h.value).ok()?,
            );
        }
        Some(Template {
            method: http::Method::from_bytes(r.method?.as_bytes()).ok()?,
            uri: r.path?.parse().ok()?,
            headers: map,
            body: Bytes::copy_from_slice(&req[n..]),
        })
    }

    fn request(&self) -> http::Request<Full<Bytes>> {
        let mut r = http::Request::new(Full::new(self.body.clone()));
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }
}

/// One open connection: hyper's handle, and its I/O task, aborted when the handle is dropped
/// anywhere but in the pool (timeout, error, not reusable) so the socket closes with it.
struct Conn {
    send: SendRequest<Full<Bytes>>,
    task: tokio::task::AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A lane's hyper connections.
pub struct HyperPool {
    connector: Connector,
    templates: Vec<Template>,
    pool: Mutex<Vec<Conn>>,
    pool_cap: usize,
    keepalive: bool,
}

impl std::fmt::Debug for HyperPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HyperPool({} requests)", self.templates.len())
    }
}

/// What a hyper error was, in the generator's taxonomy: a socket error keeps its errno's
/// kind; the connection ending before a complete response is `eof`; bytes hyper could not
/// parse are `bad_response`.
fn kind(e: &hyper::Error) -> ErrorKind {
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return classify(io);
        }
        src = s.source();
    }
    if e.is_parse() || e.is_parse_status() {
        ErrorKind::BadResponse
    } else if e.is_incomplete_message() || e.is_canceled() || e.is_closed() {
        ErrorKind::Eof
    } else {
        ErrorKind::BadResponse
    }
}

impl HyperPool {
    /// A pool sending the prebuilt `requests` (`None` if one does not translate).
    pub fn new(
        connector: Connector,
        requests: &[Box<[u8]>],
        keepalive: bool,
        pool_cap: usize,
    ) -> Option<Self> {
        let templates = requests
            .iter()
            .map(|r| Template::from_h1(r))
            .collect::<Option<Vec<_>>>()?;
        Some(HyperPool {
            connector,
            templates,
            pool: Mutex::new(Vec::new()),
            pool_cap,
            keepalive,
        })
    }

    /// Idle pooled connections.
    pub fn idle(&self) -> usize {
        if !self.keepalive {
            return 0;
        }
        self.pool.lock().map_or(0, |p| p.len())
    }

    /// Closes every idle connection.
    pub fn close(&self) {
        if let Ok(mut p) = self.pool.lock() {
            p.clear();
        }
    }

    fn take(&self) -> Option<Conn> {
        let mut p = self.pool.lock().ok()?;
        // A connection the server closed while idle shows as closed once its task saw it.
        while let Some(c) = p.pop() {
            if !c.send.is_closed() {
                return Some(c);
            }
        }
        None
    }

    fn put(&self, c: Conn) {
        if let Ok(mut p) = self.pool.lock()
            && p.len() < self.pool_cap
        {
            p.push(c);
        }
    }

    async fn connect(&self, p: &mut Progress, opened: &AtomicU64) -> Result<Conn, ErrorKind> {
        let (s, o) = self.connector.open().await?;
        opened.fetch_add(1, Ordering::Relaxed);
        p.connect_ns = Some(o.connect_ns);
        p.tls_ns = o.tls_ns;
        p.tls_resumed = o.resumed;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
            .await
            .map_err(|e| kind(&e))?;
        let task = tokio::spawn(async move {
            // Its errors reach the request through `send_request`.
            let _ = conn.await;
        })
        .abort_handle();
        Ok(Conn { send, task })
    }

    /// Sends request `target` and reads its response whole (body counted, not kept). A
    /// pooled connection that failed before any response head gets one retry on a fresh
    /// connection (counted in `stale_retries`), as in the hand-written path.
    pub async fn exchange(
        &self,
        target: u32,
        p: &mut Progress,
        opened: &AtomicU64,
        stale_retries: &AtomicU64,
    ) -> Result<Answer, ErrorKind> {
        let t = &self.templates[target as usize];
        let mut retried = false;
        loop {
            // The retry goes on a fresh connection (client.rs: the pool's others are as old).
            let pooled = if self.keepalive && !retried {
                self.take()
            } else {
                None
            };
            p.reused = pooled.is_some();
            let mut c = match pooled {
                Some(c) => c,
                None => self.connect(p, opened).await?,
            };
            p.bytes_in = 0;
            let sent = async {
                c.send.ready().await?;
                p.sent_ns = mono_ns();
                c.send.send_request(t.request()).await
            }
            .await;
            let resp = match sent {
                Ok(r) => r,
                Err(e) => {
                    let k = kind(&e);
                    if p.reused && !retried && matches!(k, ErrorKind::Eof | ErrorKind::ConnReset) {
                        retried = true;
                        stale_retries.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    return Err(k);
                }
            };
            let status = resp.status().as_u16();
            // hyper closes the connection after such a response; it must not be taken again.
            let closing = resp.version() < http::Version::HTTP_11
                || resp
                    .headers()
                    .get(http::header::CONNECTION)
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
            let mut body = resp.into_body();
            let mut body_bytes = 0u64;
            while let Some(f) = body.frame().await {
                let f = f.map_err(|e| kind(&e))?;
                if let Some(d) = f.data_ref() {
                    body_bytes += d.len() as u64;
                }
            }
            // The head's bytes are not visible through hyper: count the body (and 1 for the
            // head, so "something arrived" holds).
            p.bytes_in = body_bytes + 1;
            if self.keepalive && !closing && !c.send.is_closed() {
                self.put(c);
            }
            return Ok(Answer { status, body_bytes });
        }
    }
}
