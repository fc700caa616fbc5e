//! HTTP/2 for `load --http2` (the `h2` crate): each lane multiplexes its requests as streams
//! over a fixed number of connections (`--connections`), at most `--max-streams` at once on
//! each (and never more than the server's SETTINGS allow). Cleartext is h2c with prior
//! knowledge; over TLS, ALPN must select `h2`. A request waiting for a free stream is still
//! timed from its intended instant, so a client-side stream limit shows as latency, not as a
//! lower offered rate.
//!
//! The requests are the HTTP/1.1 ones the plan prebuilt, translated once (Host becomes
//! `:authority`, connection-specific headers dropped), so both protocols send the same thing.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::sync::{Mutex, Semaphore};

use super::{
    classify::{ErrorKind, classify},
    clock::mono_ns,
    exchange::{Answer, H2Settings, Progress},
    transport::{Connector, Stream},
};

/// Connection-level receive window: many streams' bodies in flight without stalls.
const CONN_WINDOW: u32 = 16 << 20;
/// Per-stream receive window.
const STREAM_WINDOW: u32 = 1 << 20;

/// One request, ready to send as HTTP/2.
#[derive(Debug)]
struct Template {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Template {
    /// From a prebuilt HTTP/1.1 request (`None` if it does not translate).
    fn from_h1(req: &[u8], scheme: &str) -> Option<Template> {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut r = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(n) = r.parse(req).ok()? else {
            return None;
        };
        let method = http::Method::from_bytes(r.method?.as_bytes()).ok()?;
        let mut authority = None;
        let mut map = http::HeaderMap::new();
        for h in r.headers.iter() {
            if h.name.eq_ignore_ascii_case("host") {
                authority = Some(std::str::from_utf8(h.value).ok()?.to_string());
                continue;
            }
            // Connection-specific headers are forbidden in HTTP/2 (RFC 9113, 8.2.2).
            if ["connection", "keep-alive", "transfer-encoding", "upgrade"]
                .iter()
                .any(|c| h.name.eq_ignore_ascii_case(c))
            {
                continue;
            }
            map.append(
                http::HeaderName::from_bytes(h.name.as_bytes()).ok()?,
                http::HeaderValue::from_bytes(h.value).ok()?,
            );
        }
        let uri = http::Uri::builder()
            .scheme(scheme)
            .authority(authority?)
            .path_and_query(r.path?)
            .build()
            .ok()?;
        Some(Template {
            method,
            uri,
            headers: map,
            body: Bytes::copy_from_slice(&req[n..]),
        })
    }

    fn request(&self) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }
}

/// One open HTTP/2 connection.
struct Conn {
    send: SendRequest<Bytes>,
    streams: Arc<Semaphore>,
    /// Set when the connection ended (its driver task returned) or the server sent GOAWAY.
    dead: Arc<AtomicBool>,
}

/// A lane's HTTP/2 connections.
pub struct H2Pool {
    connector: Connector,
    templates: Vec<Template>,
    slots: Vec<Mutex<Option<Conn>>>,
    next: AtomicUsize,
    max_streams: usize,
}

impl std::fmt::Debug for H2Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "H2Pool({} connections)", self.slots.len())
    }
}

/// Why a stream failed: socket errors keep their kind; the server refusing or abandoning the
/// stream is a reset; anything else is a protocol error.
fn kind(e: &h2::Error) -> ErrorKind {
    if let Some(io) = e.get_io() {
        return classify(io);
    }
    if e.is_go_away() || e.is_reset() {
        return ErrorKind::ConnReset;
    }
    ErrorKind::BadResponse
}

/// The server told us to go elsewhere before it processed the stream: safe to resend.
fn retryable(e: &h2::Error) -> bool {
    e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM)
}

impl H2Pool {
    /// A pool for `connector` sending the translated `requests` (`scheme` `http`/`https`).
    pub fn new(
        connector: Connector,
        requests: &[Box<[u8]>],
        scheme: &str,
        s: H2Settings,
    ) -> Option<Self> {
        let templates = requests
            .iter()
            .map(|r| Template::from_h1(r, scheme))
            .collect::<Option<Vec<_>>>()?;
        Some(H2Pool {
            connector,
            templates,
            slots: (0..s.connections.max(1))
                .map(|_| Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
            max_streams: s.max_streams.max(1),
        })
    }

    /// Whether the next request will find its connection open (or being opened by another
    /// request): it then needs no connect of its own, so no token of the connect rate.
    pub fn next_is_open(&self) -> bool {
        let k = self.next.load(Ordering::Relaxed) % self.slots.len();
        match self.slots[k].try_lock() {
            Ok(g) => g.as_ref().is_some_and(|c| !c.dead.load(Ordering::Acquire)),
            Err(_) => true,
        }
    }

    /// Closes every connection (the drivers end once their handles are gone).
    pub fn close(&self) {
        for s in &self.slots {
            if let Ok(mut g) = s.try_lock() {
                *g = None;
            }
        }
    }

    async fn open(&self, p: &mut Progress, opened: &AtomicU64) -> Result<Conn, ErrorKind> {
        let (s, o) = self.connector.open().await?;
        opened.fetch_add(1, Ordering::Relaxed);
        p.connect_ns = Some(o.connect_ns);
        p.tls_ns = o.tls_ns;
        p.tls_resumed = o.resumed;
        if matches!(&s, Stream::Tls(t) if t.get_ref().1.alpn_protocol() != Some(b"h2")) {
            // The server did not agree to HTTP/2 (no `http2` on its TLS listener).
            return Err(ErrorKind::Tls);
        }
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONN_WINDOW)
            .handshake::<_, Bytes>(s)
            .await
            .map_err(|e| kind(&e))?;
        let dead = Arc::new(AtomicBool::new(false));
        let d = dead.clone();
        tokio::spawn(async move {
            let _ = conn.await;
            d.store(true, Ordering::Release);
        });
        Ok(Conn {
            send,
            streams: Arc::new(Semaphore::new(self.max_streams)),
            dead,
        })
    }

    /// Sends request `target` as a stream on the next connection (opened if needed) and
    /// reads its response. A stream the server refused before processing it (GOAWAY,
    /// REFUSED_STREAM) is resent once on a fresh connection (counted in `retries`).
    pub async fn exchange(
        &self,
        target: u32,
        p: &mut Progress,
        opened: &AtomicU64,
        retries: &AtomicU64,
    ) -> Result<Answer, ErrorKind> {
        let k = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut retried = false;
        loop {
            let (send, streams, dead) = {
                let mut g = self.slots[k].lock().await;
                let alive = g.as_ref().is_some_and(|c| !c.dead.load(Ordering::Acquire));
                p.reused = alive;
                if !alive {
                    *g = None;
                    *g = Some(self.open(p, opened).await?);
                }
                let c = g.as_ref().ok_or(ErrorKind::ConnError)?;
                (c.send.clone(), c.streams.clone(), c.dead.clone())
            };
            match self.stream(send, &streams, target, p).await {
                Err(e) if retryable(&e) && !retried && p.bytes_in == 0 => {
                    dead.store(true, Ordering::Release);
                    retried = true;
                    retries.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    if e.is_go_away() || e.is_io() {
                        dead.store(true, Ordering::Release);
                    }
                    return Err(kind(&e));
                }
                Ok(a) => return Ok(a),
            }
        }
    }

    async fn stream(
        &self,
        send: SendRequest<Bytes>,
        streams: &Arc<Semaphore>,
        target: u32,
        p: &mut Progress,
    ) -> Result<Answer, h2::Error> {
        // The semaphore is never closed, so acquiring only waits.
        let _permit = streams.clone().acquire_owned().await.ok();
        let mut send = send.ready().await?;
        let t = &self.templates[target as usize];
        p.sent_ns = mono_ns();
        let end = t.body.is_empty();
        let (resp, mut tx) = send.send_request(t.request(), end)?;
        if !end {
            tx.send_data(t.body.clone(), true)?;
        }
        let resp = resp.await?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut n = 0u64;
        while let Some(chunk) = body.data().await {
            let c = chunk?;
            n += c.len() as u64;
            p.bytes_in += c.len() as u64;
            let _ = body.flow_control().release_capacity(c.len());
        }
        Ok(Answer {
            status,
            body_bytes: n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h1_requests_translate() {
        let t = Template::from_h1(
            b"POST /a?b=1 HTTP/1.1\r\nHost: site-1:8443\r\nUser-Agent: t\r\nConnection: close\r\n\
              X-T: 1\r\nContent-Length: 2\r\n\r\nhi",
            "https",
        )
        .unwrap();
        assert_eq!(t.method, http::Method::POST);
        assert_eq!(t.uri.to_string(), "https://site-1:8443/a?b=1");
        assert_eq!(t.headers.get("x-t").unwrap(), "1");
        assert_eq!(t.headers.get("content-length").unwrap(), "2");
        assert!(t.headers.get("connection").is_none());
        assert!(t.headers.get("host").is_none(), "Host becomes :authority");
        assert_eq!(&t.body[..], b"hi");
        assert!(
            Template::from_h1(b"GET / HTTP/1.1\r\n\r\n", "http").is_none(),
            "no Host"
        );
    }
}
