//! Where the bytes go: a TCP address or a unix socket, optionally wrapped in TLS. The HTTP
//! client sees one [`Stream`] type whatever the transport, and a new connection reports its
//! socket setup and its TLS handshake apart, so a slow handshake is never read as a slow server.

use std::{
    fmt, io,
    net::SocketAddr,
    path::PathBuf,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use rustls::pki_types::ServerName;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpStream, UnixStream},
};
use tokio_rustls::{TlsConnector, client::TlsStream};

use super::{
    classify::{ErrorKind, classify},
    clock::mono_ns,
};

/// The resolved place connections go to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A unix stream socket (`--unix-socket`).
    Unix(PathBuf),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(a) => write!(f, "{a}"),
            Address::Unix(p) => write!(f, "unix:{}", crate::escape::text(&p.to_string_lossy())),
        }
    }
}

/// TLS settings of a connector.
#[derive(Clone)]
pub struct Tls {
    /// Shared by every lane: its session cache makes reconnects resume.
    pub connector: TlsConnector,
    /// SNI and the name the certificate must carry.
    pub name: ServerName<'static>,
}

/// Opens connections to one address, with TLS when the URL is `https://`.
#[derive(Clone)]
pub struct Connector {
    /// Where.
    pub address: Address,
    /// TLS, if any.
    pub tls: Option<Tls>,
    /// HTTP/2 instead of HTTP/1.1.
    pub http2: Option<super::exchange::H2Settings>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Connector({}, tls: {})",
            self.address,
            self.tls.is_some()
        )
    }
}

/// Timings of one new connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct Opened {
    /// Socket connect, ns.
    pub connect_ns: u64,
    /// TLS handshake after the connect, ns.
    pub tls_ns: Option<u64>,
    /// The handshake resumed an earlier session.
    pub resumed: bool,
}

impl Connector {
    /// Opens one connection.
    pub async fn open(&self) -> Result<(Stream, Opened), ErrorKind> {
        let t0 = mono_ns();
        let plain = match &self.address {
            Address::Tcp(a) => {
                let s = TcpStream::connect(a).await.map_err(|e| classify(&e))?;
                // One write per request already; no reason to let Nagle hold a body back.
                let _ = s.set_nodelay(true);
                Plain::Tcp(s)
            }
            Address::Unix(p) => {
                Plain::Unix(UnixStream::connect(p).await.map_err(|e| classify(&e))?)
            }
        };
        let t1 = mono_ns();
        let mut o = Opened {
            connect_ns: t1 - t0,
            ..Opened::default()
        };
        let Some(tls) = &self.tls else {
            return Ok((Stream::Plain(plain), o));
        };
        let s = tls
            .connector
            .connect(tls.name.clone(), plain)
            .await
            .map_err(|e| classify_tls(&e))?;
        o.tls_ns = Some(mono_ns() - t1);
        o.resumed = s.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        Ok((Stream::Tls(Box::new(s)), o))
    }
}

/// A handshake the server refused or we rejected (certificate, alert) is `tls`; a socket
/// error during it keeps its own kind.
fn classify_tls(e: &io::Error) -> ErrorKind {
    if e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
    {
        ErrorKind::Tls
    } else {
        classify(e)
    }
}

/// A socket without TLS.
#[derive(Debug)]
pub enum Plain {
    /// TCP.
    Tcp(TcpStream),
    /// Unix stream socket.
    Unix(UnixStream),
}

/// One connection, whatever its transport.
#[derive(Debug)]
pub enum Stream {
    /// Cleartext.
    Plain(Plain),
    /// TLS over either socket.
    Tls(Box<TlsStream<Plain>>),
}

impl Stream {
    /// Whether bytes written may sit in a buffer until flushed.
    pub fn buffered(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr, [$($v:path),+]) => {
        match $self.get_mut() {
            $($v($s) => $e,)+
        }
    };
}

impl AsyncRead for Plain {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, s => Pin::new(s).poll_read(cx, buf), [Plain::Tcp, Plain::Unix])
    }
}

impl AsyncWrite for Plain {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, s => Pin::new(s).poll_write(cx, buf), [Plain::Tcp, Plain::Unix])
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => Pin::new(s).poll_flush(cx), [Plain::Tcp, Plain::Unix])
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, s => Pin::new(s).poll_shutdown(cx), [Plain::Tcp, Plain::Unix])
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A connector for `address`, with TLS when `tls` is given, speaking HTTP/2 with `http2`.
pub fn connector(
    address: Address,
    tls: Option<(Arc<rustls::ClientConfig>, ServerName<'static>)>,
    http2: Option<super::exchange::H2Settings>,
) -> Connector {
    Connector {
        address,
        http2,
        tls: tls.map(|(cfg, name)| Tls {
            connector: TlsConnector::from(cfg),
            name,
        }),
    }
}
