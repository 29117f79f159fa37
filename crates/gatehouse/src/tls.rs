//! HTTPS (D31): rustls with aws-lc-rs, certificates from PEM files or a
//! self-signed one generated on first start, and a listener that completes
//! TLS handshakes concurrently before handing connections to the server.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The server's TLS settings from PEM files.
pub fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing {}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not fit together")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificate to use: configured, or self-signed in `<data_dir>/tls/`
/// (generated on first start, then reused). Returns (cert, key, generated).
pub fn ensure_certificate(
    data_dir: &Path,
    configured: Option<(&Path, &Path)>,
) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf, bool)> {
    if let Some((c, k)) = configured {
        return Ok((c.to_owned(), k.to_owned(), false));
    }
    let dir = data_dir.join("tls");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    if cert.exists() && key.exists() {
        return Ok((cert, key, false));
    }
    let names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let generated = rcgen::generate_simple_self_signed(names)
        .context("generating a self-signed certificate")?;
    crate::write_private_file(&key, generated.signing_key.serialize_pem().as_bytes())?;
    std::fs::write(&cert, generated.cert.pem())
        .with_context(|| format!("writing {}", cert.display()))?;
    Ok((cert, key, true))
}

/// A listener yielding connections whose TLS handshake is complete.
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr, Instant)>,
    local: SocketAddr,
    accept_task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

impl TlsListener {
    /// `handshake_timeout`: D45's head deadline, which counts from the TCP
    /// accept and so includes the handshake.
    pub fn new(
        tcp: TcpListener,
        config: Arc<rustls::ServerConfig>,
        handshake_timeout: Duration,
    ) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, rx) = mpsc::channel(256);
        let accept_task = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: back off briefly.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let accepted_at = Instant::now();
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer, accepted_at)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self {
            rx,
            local,
            accept_task,
        })
    }
}

impl TlsListener {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

impl gatehouse_server::http::transport::Accept for TlsListener {
    type Io = TlsStream<TcpStream>;

    async fn accept(&mut self) -> (Self::Io, SocketAddr, Instant) {
        match self.rx.recv().await {
            Some(conn) => conn,
            None => std::future::pending().await,
        }
    }
}
