//! TLS for `https://` targets: one rustls client configuration per run, shared by every lane so
//! a reconnect resumes a session the run already holds (the cost a returning browser pays, not
//! a full handshake per connection). Trust comes from `--cacert FILE`, else the system bundle;
//! `--insecure` skips certificate checks for a self-signed test server (the handshake's
//! signatures are still verified, so the crypto cost measured is the real one).

use std::{path::Path, sync::Arc};

use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::{
        Resumption,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    crypto::WebPkiSupportedAlgorithms,
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};

use crate::error::{Error, Result};

/// Where Debian (and most distributions) keep the system's trusted CAs.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Sessions kept per run: one server name, but TLS 1.3 tickets are single-use and a flood
/// reconnects many connections at once.
const SESSIONS: usize = 4096;

/// How to trust the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Accept any certificate (self-signed test servers).
    pub insecure: bool,
    /// PEM file of CA certificates to trust instead of the system bundle.
    pub cacert: Option<std::path::PathBuf>,
}

/// The client configuration for a run; `alpn` in preference order (`h2`, `http/1.1`).
pub fn config(o: &TlsOptions, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Untrusted(format!("TLS setup: {e}")))?;
    let mut cfg = if o.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(
                provider.signature_verification_algorithms,
            )))
            .with_no_client_auth()
    } else {
        let file = o
            .cacert
            .as_deref()
            .unwrap_or_else(|| Path::new(SYSTEM_BUNDLE));
        builder
            .with_root_certificates(roots(file, o.cacert.is_some())?)
            .with_no_client_auth()
    };
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    cfg.resumption = Resumption::in_memory_sessions(SESSIONS);
    Ok(Arc::new(cfg))
}

/// The name sent as SNI and checked against the certificate (an IP literal sends no SNI).
pub fn server_name(host: &str) -> Result<ServerName<'static>> {
    ServerName::try_from(host.to_string()).map_err(|_| {
        Error::usage(format!(
            "--url host `{}` is neither a DNS name nor an IP address (needed for TLS)",
            crate::escape::text(host)
        ))
    })
}

fn roots(file: &Path, given: bool) -> Result<RootCertStore> {
    let what = if given {
        format!("--cacert {}", file.display())
    } else {
        format!(
            "the system CA bundle {} (pass --cacert FILE, or --insecure for a self-signed server)",
            file.display()
        )
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
        .and_then(|it| it.collect::<std::result::Result<_, _>>())
        .map_err(|e| Error::usage(format!("{what}: {e}")))?;
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(Error::usage(format!("{what}: no usable CA certificate")));
    }
    Ok(store)
}

/// `--insecure`: any certificate chain is accepted, signatures are still checked.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_trust_inputs_are_usage_errors() {
        let o = TlsOptions {
            insecure: false,
            cacert: Some("/nonexistent/ca.pem".into()),
        };
        let e = config(&o, &[b"http/1.1"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("--cacert /nonexistent/ca.pem"),
            "{e}"
        );
        let o = TlsOptions {
            insecure: false,
            cacert: Some("/dev/null".into()),
        };
        let e = config(&o, &[b"http/1.1"]).unwrap_err();
        assert!(e.to_string().contains("no usable CA certificate"), "{e}");
        let o = TlsOptions {
            insecure: true,
            cacert: None,
        };
        let c = config(&o, &[b"h2", b"http/1.1"]).unwrap();
        assert_eq!(c.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert!(server_name("127.0.0.1").is_ok());
        assert!(server_name("localhost").is_ok());
        assert!(server_name("bad name").is_err());
    }
}
