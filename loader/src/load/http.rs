//! A minimal HTTP/1.1 response reader: enough of RFC 9112 to find where each response ends
//! (Content-Length, chunked, until close, no body for HEAD/204/304, interim 1xx skipped) and
//! whether the connection may carry the next request. Bodies are counted, never kept, so a
//! flood's memory does not scale with response size. Pure, so it is tested without sockets.

/// The response header block may not exceed this (nginx's default large buffers are 32 KiB).
pub const MAX_HEAD: usize = 64 * 1024;

/// Where the reader is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Body { remaining: u64 },
    ChunkSize,
    ChunkData { remaining: u64 },
    ChunkDataEnd,
    Trailers,
    UntilEof,
    Done,
}

/// Not an HTTP/1.x response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// Reads one response incrementally.
#[derive(Clone, Debug)]
pub struct ResponseReader {
    head_request: bool,
    state: State,
    /// Final status code (0 until the head is parsed).
    pub status: u16,
    /// Body bytes received (chunk framing excluded).
    pub body_bytes: u64,
    /// Whether the connection may be reused after this response.
    pub reusable: bool,
}

impl ResponseReader {
    /// A reader for the response to a request; `head_request` for HEAD (no body follows).
    pub fn new(head_request: bool) -> Self {
        ResponseReader {
            head_request,
            state: State::Head,
            status: 0,
            body_bytes: 0,
            reusable: false,
        }
    }

    /// The response is complete.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes what it can of `buf` and returns how many bytes it used; 0 means it needs more.
    pub fn feed(&mut self, buf: &[u8]) -> Result<usize, Malformed> {
        let mut used = 0;
        while used < buf.len() && self.state != State::Done {
            let n = self.step(&buf[used..])?;
            if n == 0 {
                break;
            }
            used += n;
        }
        Ok(used)
    }

    /// The peer closed the connection: complete for a read-until-close body, an error otherwise.
    pub fn eof(&mut self) -> bool {
        if self.state == State::UntilEof {
            self.state = State::Done;
        }
        self.state == State::Done
    }

    fn step(&mut self, buf: &[u8]) -> Result<usize, Malformed> {
        match self.state {
            State::Head => self.head(buf),
            State::Body { remaining } => {
                let n = remaining.min(buf.len() as u64);
                self.body_bytes += n;
                self.state = if n == remaining {
                    State::Done
                } else {
                    State::Body {
                        remaining: remaining - n,
                    }
                };
                Ok(n as usize)
            }
            State::UntilEof => {
                self.body_bytes += buf.len() as u64;
                Ok(buf.len())
            }
            State::ChunkSize => {
                let Some(end) = line_end(buf) else {
                    return if buf.len() > 4096 {
                        Err(Malformed("chunk size line too long"))
                    } else {
                        Ok(0)
                    };
                };
                let line = &buf[..end];
                let hex = line
                    .split(|&b| b == b';')
                    .next()
                    .unwrap_or_default()
                    .trim_ascii();
                let size = std::str::from_utf8(hex)
                    .ok()
                    .filter(|s| !s.is_empty() && s.len() <= 15)
                    .and_then(|s| u64::from_str_radix(s, 16).ok())
                    .ok_or(Malformed("bad chunk size"))?;
                self.state = if size == 0 {
                    State::Trailers
                } else {
                    State::ChunkData { remaining: size }
                };
                Ok(end + 2)
            }
            State::ChunkData { remaining } => {
                let n = remaining.min(buf.len() as u64);
                self.body_bytes += n;
                self.state = if n == remaining {
                    State::ChunkDataEnd
                } else {
                    State::ChunkData {
                        remaining: remaining - n,
                    }
                };
                Ok(n as usize)
            }
            State::ChunkDataEnd => {
                if buf.len() < 2 {
                    return Ok(0);
                }
                if &buf[..2] != b"\r\n" {
                    return Err(Malformed("chunk not followed by CRLF"));
                }
                self.state = State::ChunkSize;
                Ok(2)
            }
            State::Trailers => {
                let Some(end) = line_end(buf) else {
                    return if buf.len() > MAX_HEAD {
                        Err(Malformed("trailers too long"))
                    } else {
                        Ok(0)
                    };
                };
                if end == 0 {
                    self.state = State::Done;
                }
                Ok(end + 2)
            }
            State::Done => Ok(0),
        }
    }

    fn head(&mut self, buf: &[u8]) -> Result<usize, Malformed> {
        // Uninitialized: filling 96 empty headers (3 KiB) cost more than parsing nginx's few.
        let mut headers = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; 96];
        let mut r = httparse::Response::new(&mut []);
        let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut r,
            buf,
            &mut headers,
        ) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err(Malformed("response head too large"));
            }
            Ok(httparse::Status::Partial) => return Ok(0),
            Err(httparse::Error::TooManyHeaders) => return Err(Malformed("too many headers")),
            Err(_) => return Err(Malformed("not an HTTP/1.x response")),
        };
        let status = r.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            // Interim response (100 Continue, 103 Early Hints): the final one follows.
            return Ok(n);
        }
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut close = r.version == Some(0);
        for h in r.headers.iter() {
            let v = h.value.trim_ascii();
            if h.name.eq_ignore_ascii_case("content-length") {
                let l = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or(Malformed("bad Content-Length"))?;
                if length.is_some_and(|old| old != l) {
                    return Err(Malformed("conflicting Content-Length"));
                }
                length = Some(l);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for tok in v.split(|&b| b == b',') {
                    let tok = tok.trim_ascii();
                    if tok.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if tok.eq_ignore_ascii_case(b"keep-alive") && r.version == Some(0) {
                        close = false;
                    }
                }
            }
        }
        self.status = status;
        self.reusable = !close;
        self.state = if self.head_request || status == 204 || status == 304 || status == 101 {
            if status == 101 {
                self.reusable = false;
            }
            State::Done
        } else if chunked {
            State::ChunkSize
        } else if let Some(l) = length {
            if l == 0 {
                State::Done
            } else {
                State::Body { remaining: l }
            }
        } else {
            self.reusable = false;
            State::UntilEof
        };
        Ok(n)
    }
}

fn line_end(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in pieces of `step` bytes, as a socket might deliver it.
    fn read(wire: &[u8], step: usize, head: bool) -> (ResponseReader, usize) {
        let mut r = ResponseReader::new(head);
        let mut pending: Vec<u8> = vec![];
        let mut consumed = 0;
        for piece in wire.chunks(step) {
            pending.extend_from_slice(piece);
            let n = r.feed(&pending).unwrap();
            pending.drain(..n);
            consumed += n;
            if r.done() {
                break;
            }
        }
        (r, consumed)
    }

    #[test]
    fn content_length_in_any_split() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nServer: x\r\n\r\nhello worldEXTRA";
        for step in [1, 2, 7, 64, 1000] {
            let (r, used) = read(wire, step, false);
            assert!(r.done(), "step {step}");
            assert_eq!((r.status, r.body_bytes, r.reusable), (200, 11, true));
            assert_eq!(used, wire.len() - 5, "leftover bytes are not consumed");
        }
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let wire = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n\
                     5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n";
        for step in [1, 3, 500] {
            let (r, used) = read(wire, step, false);
            assert!(r.done(), "step {step}");
            assert_eq!((r.status, r.body_bytes, r.reusable), (503, 31, true));
            assert_eq!(used, wire.len());
        }
    }

    #[test]
    fn close_delimited_interim_and_bodiless() {
        let (mut r, _) = read(b"HTTP/1.0 200 OK\r\n\r\nabc", 100, false);
        assert!(!r.done());
        assert!(r.eof());
        assert_eq!((r.body_bytes, r.reusable), (3, false));

        let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let (r, used) = read(wire, 5, false);
        assert!(r.done());
        assert_eq!((r.status, r.body_bytes, used), (204, 0, wire.len()));

        let (r, _) = read(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", 100, true);
        assert!(r.done(), "HEAD has no body");

        let (r, _) = read(
            b"HTTP/1.1 429 Too Many\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            100,
            false,
        );
        assert!(r.done());
        assert_eq!((r.status, r.reusable), (429, false));

        let (r, _) = read(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
            100,
            false,
        );
        assert!(r.done() && r.reusable);
    }

    #[test]
    fn truncated_body_is_not_complete() {
        let (mut r, _) = read(
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
            100,
            false,
        );
        assert!(!r.done());
        assert!(!r.eof());
    }

    #[test]
    fn garbage_is_malformed() {
        for wire in [
            &b"SSH-2.0-OpenSSH_9.2\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            let mut r = ResponseReader::new(false);
            assert!(r.feed(wire).is_err(), "{}", String::from_utf8_lossy(wire));
        }
        let mut r = ResponseReader::new(false);
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(r.feed(wire), Err(Malformed("bad chunk size")));
        let mut r = ResponseReader::new(false);
        let huge = vec![b'a'; MAX_HEAD + 10];
        let mut wire = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        wire.extend_from_slice(&huge);
        assert!(r.feed(&wire).is_err());
    }
}
