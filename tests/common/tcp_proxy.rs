//! A loopback TCP proxy for partition tests: a test puts it between a
//! daemon and its PostgreSQL server (the daemon's `[store] url` names the
//! proxy's port), then [`TcpProxy::cut`]s the network (every connection
//! through it is dropped, every new one closed at once, as a host whose
//! route is gone and whose peer resets) and [`TcpProxy::heal`]s it.
//!
//! It listens on `127.0.0.1:0` and forwards each connection to `upstream`
//! with two copying threads; it never reads or changes what it forwards.
//! Dropped, it stops accepting and ends every connection. It must never
//! outlive its test (its threads end with their connections and its
//! listener).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The proxy: its address, and the connections it carries.
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    /// Set by `cut`: new connections are closed at once.
    cut: AtomicBool,
    /// Set when the proxy is dropped: the acceptor returns.
    stopping: AtomicBool,
    /// Both ends of every live connection (shut down by `cut`).
    live: Mutex<Vec<(TcpStream, TcpStream)>>,
    /// Connections forwarded, and refused while cut.
    forwarded: AtomicUsize,
    refused: AtomicUsize,
}

impl TcpProxy {
    /// A proxy to `upstream` (`127.0.0.1:PORT`), listening on a free
    /// loopback port.
    pub fn start(upstream: SocketAddr) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let acceptor = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = conn else { continue };
                if s.cut.load(Ordering::SeqCst) {
                    s.refused.fetch_add(1, Ordering::SeqCst);
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                s.live
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((c3, s3));
                s.forwarded.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || pump(client, server));
                std::thread::spawn(move || pump(s2, c2));
            }
        });
        TcpProxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The proxy's port (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Cuts the network: every connection through the proxy is ended now
    /// (both ends see it closed), and new ones are closed as soon as they
    /// are accepted, until [`TcpProxy::heal`].
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
        self.end_all();
    }

    /// Heals the network: new connections are forwarded again.
    pub fn heal(&self) {
        self.shared.cut.store(false, Ordering::SeqCst);
    }

    /// Connections forwarded so far.
    pub fn forwarded(&self) -> usize {
        self.shared.forwarded.load(Ordering::SeqCst)
    }

    /// Connections closed at once because the network was cut.
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }

    fn end_all(&self) {
        let live = std::mem::take(&mut *self.shared.live.lock().unwrap_or_else(|p| p.into_inner()));
        for (client, server) in live {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which sees `stopping` and returns.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
        self.end_all();
    }
}

/// Copies `from` to `to` until either ends; then ends both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
