// tokio_echo: the Rust tokio echo peer, written as a tokio user would: the multi-thread
// runtime, one task per connection.
//
//     tokio_echo PORT [WORKERS]
//
// WORKERS sets the runtime's worker threads; without it tokio takes the CPUs of the affinity
// mask (TOKIO_WORKER_THREADS overrides that, as in any tokio program).
use std::process::exit;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn serve(mut sock: TcpStream) {
    let _ = sock.set_nodelay(true);
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return, // the client closed, or an error
            Ok(n) => n,
        };
        if sock.write_all(&buf[..n]).await.is_err() {
            return; // write_all finishes partial writes itself
        }
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("tokio_echo: {msg}");
    exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 || args.len() > 3 {
        fail("usage: tokio_echo PORT [WORKERS]");
    }
    let port: u16 = match args[1].parse() {
        Ok(p) if p > 0 => p,
        _ => fail(&format!("port '{}': want 1 to 65535", args[1])),
    };
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(w) = args.get(2) {
        match w.parse::<usize>() {
            Ok(n) if n > 0 => {
                rt.worker_threads(n);
            }
            _ => fail(&format!("WORKERS '{w}': want a number of threads, 1 or more")),
        }
    }
    let rt = rt.build().unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    rt.block_on(async move {
        let listener = match TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("tokio_echo: 127.0.0.1:{port}: {e}");
                exit(1)
            }
        };
        loop {
            match listener.accept().await {
                Ok((sock, _)) => {
                    tokio::spawn(serve(sock));
                }
                Err(e) => {
                    // e.g. EMFILE: keep serving the connections there are, without spinning
                    eprintln!("tokio_echo: accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
    });
}
