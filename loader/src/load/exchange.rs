//! What the client engines (HTTP/1.1 native and hyper, HTTP/2) and the transport share: the
//! progress and answer of one exchange, and the HTTP/2 settings the connector negotiates for.
//! A leaf, so the engines and the transport need not import one another for these.

/// What a request got as far as, kept outside the request future so a timeout still knows it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// When the request's first byte was written (0: never sent).
    pub sent_ns: u64,
    /// Time to establish a new connection (socket connect), when one was opened.
    pub connect_ns: Option<u64>,
    /// TLS handshake time of that new connection.
    pub tls_ns: Option<u64>,
    /// That handshake resumed an earlier session.
    pub tls_resumed: bool,
    /// Response bytes read so far.
    pub bytes_in: u64,
    /// Sent on a pooled connection.
    pub reused: bool,
}

/// A complete response.
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Body bytes.
    pub body_bytes: u64,
}

/// HTTP/2 settings of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct H2Settings {
    /// Connections per lane.
    pub connections: usize,
    /// Concurrent streams per connection, at most.
    pub max_streams: usize,
}
