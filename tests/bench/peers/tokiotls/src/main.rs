// tokio_tls_echo: the Rust TLS echo peer, written as a tokio-rustls user would: the multi-thread
// runtime, one task per connection, rustls with its ring provider and its defaults (TLS 1.2 and
// 1.3, X25519 first), and stateless session tickets (rustls's Ticketer, keys it rotates itself)
// as nginx, OpenSSL and Go give them by default.
//
//     tokio_tls_echo --cert CHAIN.pem --key KEY.pem --port PORT [--workers N]
//
// --workers sets the runtime's worker threads; without it tokio takes the CPUs of the affinity
// mask. On the client's close_notify or EOF the server sends its own close_notify.
use std::process::exit;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

async fn serve(acceptor: TlsAcceptor, sock: TcpStream) {
    let _ = sock.set_nodelay(true);
    let mut tls = match acceptor.accept(sock).await {
        Ok(s) => s,
        Err(_) => return, // a failed handshake: rustls has sent its alert
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match tls.read(&mut buf).await {
            Ok(0) | Err(_) => break, // close_notify, or a bare EOF (UnexpectedEof)
            Ok(n) => n,
        };
        // write_all hands the bytes to rustls; flush makes sure every record is on the socket
        if tls.write_all(&buf[..n]).await.is_err() || tls.flush().await.is_err() {
            return;
        }
    }
    let _ = tls.shutdown().await; // close_notify, then the socket's FIN
}

fn fail(code: i32, msg: &str) -> ! {
    eprintln!("tokio_tls_echo: {msg}");
    exit(code)
}

const USAGE: &str =
    "usage: tokio_tls_echo --cert CHAIN.pem --key KEY.pem --port PORT [--workers N]";

fn config(cert: &str, key: &str) -> rustls::ServerConfig {
    let chain: Vec<CertificateDer> = match CertificateDer::pem_file_iter(cert) {
        Ok(it) => it
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| fail(1, &format!("certificate {cert}: {e}"))),
        Err(e) => fail(1, &format!("certificate {cert}: {e}")),
    };
    if chain.is_empty() {
        fail(1, &format!("certificate {cert}: no certificate in it"));
    }
    let pkey =
        PrivateKeyDer::from_pem_file(key).unwrap_or_else(|e| fail(1, &format!("key {key}: {e}")));
    let mut cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, pkey) // checks that the key matches the certificate
        .unwrap_or_else(|e| fail(1, &format!("{cert}, {key}: {e}")));
    cfg.ticketer =
        rustls::crypto::ring::Ticketer::new().unwrap_or_else(|e| fail(1, &format!("tickets: {e}")));
    cfg
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut cert, mut key, mut port, mut workers) = (None, None, 0u16, None);
    for pair in args.chunks(2) {
        let v = pair.get(1).unwrap_or_else(|| fail(2, USAGE));
        match pair[0].as_str() {
            "--cert" => cert = Some(v.clone()),
            "--key" => key = Some(v.clone()),
            "--port" => {
                port = v
                    .parse()
                    .unwrap_or_else(|_| fail(2, &format!("port '{v}': want 1 to 65535")))
            }
            "--workers" => match v.parse::<usize>() {
                Ok(n) if n > 0 => workers = Some(n),
                _ => fail(
                    2,
                    &format!("--workers '{v}': want a number of threads, 1 or more"),
                ),
            },
            _ => fail(2, USAGE),
        }
    }
    let (cert, key) = match (cert, key) {
        (Some(c), Some(k)) if port > 0 => (c, k),
        _ => fail(
            2,
            &format!("--cert, --key and --port (1 to 65535) are needed ({USAGE})"),
        ),
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let acceptor = TlsAcceptor::from(Arc::new(config(&cert, &key)));
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(n) = workers {
        rt.worker_threads(n);
    }
    let rt = rt
        .build()
        .unwrap_or_else(|e| fail(1, &format!("runtime: {e}")));
    rt.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap_or_else(|e| fail(1, &format!("127.0.0.1:{port}: {e}")));
        loop {
            match listener.accept().await {
                Ok((sock, _)) => {
                    tokio::spawn(serve(acceptor.clone(), sock));
                }
                Err(e) => {
                    // e.g. EMFILE: keep serving the connections there are, without spinning
                    eprintln!("tokio_tls_echo: accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
    });
}
