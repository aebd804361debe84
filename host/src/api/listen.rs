//! The daemon's TCP listeners, and the address it advertises for its page.
//!
//! The page is advertised as `http://localhost:PORT` (browsers allow
//! passkeys there, never at an IP address), and a browser resolves
//! `localhost` to both loopback addresses, `[::1]` first. So listening on
//! `127.0.0.1:PORT` alone would hand `[::1]:PORT` to any local process: it
//! would be the page's origin, receive the operator's one-time login link
//! and the page's cookie. This module binds both of `localhost`'s
//! addresses on one port, or advertises only what it bound:
//!
//! - `--listen 127.0.0.1:PORT` (or `[::1]:PORT`) binds it, then the other
//!   loopback address on the same port. The other one taken by another
//!   process is a refusal to start ([`ListenError::Taken`]) that names it.
//!   With port 0 (any free port) the second bind uses the port the first
//!   got, and a clash there is tried again on a new port (up to
//!   [`EPHEMERAL_TRIES`] times), never a spurious failure.
//! - A machine with no such address (no IPv6 loopback, say) gets the one
//!   bound, and the page is advertised at that address itself
//!   (`http://127.0.0.1:PORT`), never at `localhost`.
//! - Any other loopback address (`127.0.0.2`) is bound alone and
//!   advertised as itself.
//!
//! It owns binding and the advertised address; it must never advertise
//! `localhost` unless it holds both of `localhost`'s addresses on the port.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// How many ports an ephemeral (`:0`) listen tries before giving up, each
/// a new one from the kernel, when the other loopback address is taken
/// on the port the first bind got.
pub const EPHEMERAL_TRIES: u32 = 32;

/// The backlog of each listener (what tokio's own `bind` uses).
const BACKLOG: u32 = 1024;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot listen on {addr}: another process holds it ({source}). The page would be at http://localhost:{port}, and browsers try both of localhost's addresses ([::1] first): whoever holds {addr} would receive the page's login link and cookie. Stop that process, or choose another port with --listen"
    )]
    Taken {
        addr: SocketAddr,
        port: u16,
        #[source]
        source: io::Error,
    },
    #[error(
        "no port was free on both 127.0.0.1 and [::1] after {tries} tries (another process took the [::1] or 127.0.0.1 half each time); choose a port with --listen"
    )]
    NoFreePort { tries: u32 },
}

/// What was bound: the listeners, the first the one `--listen` named.
pub struct Bound {
    /// `--listen`'s own listener (its address is the daemon's URL).
    pub primary: tokio::net::TcpListener,
    /// The other loopback address on the same port, when bound.
    pub partner: Option<tokio::net::TcpListener>,
    /// Why the other loopback address was not bound, when it was tried
    /// and the machine has none (the page is then advertised as the IP).
    pub partner_missing: Option<String>,
    addr: SocketAddr,
}

impl Bound {
    /// The primary listener's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The daemon's URL: `http://` and the primary address.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The other listener's address, when there is one.
    pub fn partner_addr(&self) -> Option<SocketAddr> {
        self.partner.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The page's address: `http://localhost:PORT` when both of
    /// `localhost`'s addresses are held on the port, else the address
    /// bound, as it is.
    pub fn page(&self) -> String {
        if self.partner.is_some() {
            format!("http://localhost:{}", self.addr.port())
        } else {
            self.url()
        }
    }
}

/// `localhost`'s other address for `ip`: `[::1]` for `127.0.0.1` and the
/// reverse; `None` for any other address.
fn partner_of(ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(v4) if v4 == Ipv4Addr::LOCALHOST => Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        IpAddr::V6(v6) if v6 == Ipv6Addr::LOCALHOST => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        _ => None,
    }
}

/// One listener on `addr` (`SO_REUSEADDR`, as tokio's `bind`: a port in
/// TIME_WAIT is reusable, one another socket listens on is not).
fn bind_one(addr: SocketAddr) -> io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Whether `e` says the machine has no such address (no IPv6 at all, or
/// no `::1` on its loopback), as opposed to one that is taken.
fn no_such_address(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AddrNotAvailable
        || [
            rustix::io::Errno::AFNOSUPPORT,
            rustix::io::Errno::ADDRNOTAVAIL,
            rustix::io::Errno::PROTONOSUPPORT,
        ]
        .iter()
        .any(|n| e.raw_os_error() == Some(n.raw_os_error()))
}

/// Binds `listen` and, for `127.0.0.1` or `[::1]`, `localhost`'s other
/// address on the same port (see the module's doc). Needs a tokio runtime.
pub fn bind(listen: SocketAddr) -> Result<Bound, ListenError> {
    bind_tries(|_| listen, listen.port() == 0, bind_one)
}

/// [`bind`], the address of try `n` given by `first` (`--listen` each
/// time in [`bind`]; a test names the port of its first try to make the
/// clash happen); `ephemeral`: the port is the kernel's choice, so a clash
/// is tried again on another; `bind_other` binds localhost's other address
/// ([`bind_one`] but in a test of a machine that has none).
fn bind_tries(
    mut first: impl FnMut(u32) -> SocketAddr,
    ephemeral: bool,
    bind_other: impl Fn(SocketAddr) -> io::Result<tokio::net::TcpListener>,
) -> Result<Bound, ListenError> {
    let mut n = 0;
    loop {
        let want = first(n);
        let primary = bind_one(want).map_err(|source| ListenError::Bind { addr: want, source })?;
        let addr = primary
            .local_addr()
            .map_err(|source| ListenError::Bind { addr: want, source })?;
        let Some(other) = partner_of(addr.ip()) else {
            return Ok(Bound {
                primary,
                partner: None,
                partner_missing: None,
                addr,
            });
        };
        let other = SocketAddr::new(other, addr.port());
        match bind_other(other) {
            Ok(partner) => {
                return Ok(Bound {
                    primary,
                    partner: Some(partner),
                    partner_missing: None,
                    addr,
                });
            }
            Err(e) if no_such_address(&e) => {
                tracing::warn!(%addr, %other, error = %e, "localhost's other address cannot be bound on this machine: the page is advertised at the address bound only");
                return Ok(Bound {
                    primary,
                    partner: None,
                    partner_missing: Some(format!("{other} cannot be bound here: {e}")),
                    addr,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && ephemeral => {
                n += 1;
                tracing::info!(%other, tries = n, "localhost's other address is taken on the port the kernel chose: trying another port");
                if n >= EPHEMERAL_TRIES {
                    return Err(ListenError::NoFreePort { tries: n });
                }
                drop(primary);
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                return Err(ListenError::Taken {
                    addr: other,
                    port: addr.port(),
                    source: e,
                });
            }
            Err(source) => {
                return Err(ListenError::Bind {
                    addr: other,
                    source,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// These tests need an IPv6 loopback (::1): said, never skipped.
    fn needs_v6_loopback() {
        assert!(
            std::net::TcpListener::bind("[::1]:0").is_ok(),
            "this test needs an IPv6 loopback (::1)"
        );
    }

    #[tokio::test]
    async fn both_of_localhosts_addresses_are_bound_on_one_port_and_the_page_is_localhost() {
        needs_v6_loopback();
        for listen in ["127.0.0.1:0", "[::1]:0"] {
            let b = bind(listen.parse().expect("addr")).expect("bind");
            let port = b.addr().port();
            let partner = b.partner_addr().expect("partner");
            assert_eq!(partner.port(), port, "{listen}");
            assert_ne!(partner.ip(), b.addr().ip(), "{listen}");
            assert_eq!(b.page(), format!("http://localhost:{port}"));
            assert_eq!(b.url(), format!("http://{}", b.addr()));
        }
    }

    #[tokio::test]
    async fn another_loopback_address_is_bound_alone_and_advertised_as_itself() {
        let b = bind("127.0.0.2:0".parse().expect("addr")).expect("bind");
        assert!(b.partner.is_none());
        assert_eq!(b.page(), b.url());
        assert!(b.page().starts_with("http://127.0.0.2:"), "{}", b.page());
    }

    #[tokio::test]
    async fn a_taken_partner_on_a_named_port_is_a_refusal_naming_it() {
        needs_v6_loopback();
        let impostor = std::net::TcpListener::bind("[::1]:0").expect("impostor");
        let port = impostor.local_addr().expect("addr").port();
        let err = bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .err()
            .expect("refused");
        assert!(matches!(err, ListenError::Taken { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains(&format!("[::1]:{port}")), "{text}");
        // And the other way round.
        let impostor4 = std::net::TcpListener::bind("127.0.0.1:0").expect("impostor");
        let port4 = impostor4.local_addr().expect("addr").port();
        let err = bind(SocketAddr::from((Ipv6Addr::LOCALHOST, port4)))
            .err()
            .expect("refused");
        assert!(
            err.to_string().contains(&format!("127.0.0.1:{port4}")),
            "{err}"
        );
    }

    /// The clash an ephemeral port can meet, made deterministic: the first
    /// try is given the port whose `[::1]` half an impostor holds, as if
    /// the kernel had picked it; the bind goes on to another port.
    #[tokio::test]
    async fn an_ephemeral_port_whose_other_half_is_taken_is_tried_again_elsewhere() {
        needs_v6_loopback();
        let impostor = std::net::TcpListener::bind("[::1]:0").expect("impostor");
        let taken = impostor.local_addr().expect("addr").port();
        let b = bind_tries(
            |n| {
                let port = if n == 0 { taken } else { 0 };
                SocketAddr::from((Ipv4Addr::LOCALHOST, port))
            },
            true,
            bind_one,
        )
        .expect("bound on another port");
        assert_ne!(b.addr().port(), taken);
        assert_eq!(b.partner_addr().map(|a| a.port()), Some(b.addr().port()));
        // Every try clashing ends with a reason, not a loop.
        let err = bind_tries(
            |_| SocketAddr::from((Ipv4Addr::LOCALHOST, taken)),
            true,
            bind_one,
        )
        .err()
        .expect("gives up");
        assert!(
            matches!(err, ListenError::NoFreePort { tries } if tries == EPHEMERAL_TRIES),
            "{err}"
        );
    }

    /// A machine with no IPv6 loopback (its bind answers EADDRNOTAVAIL, or
    /// EAFNOSUPPORT with no IPv6 at all): 127.0.0.1 alone, and the page at
    /// that IP, never `localhost`.
    #[tokio::test]
    async fn with_no_other_loopback_address_the_page_is_the_address_bound() {
        for errno in [
            rustix::io::Errno::ADDRNOTAVAIL,
            rustix::io::Errno::AFNOSUPPORT,
        ] {
            let b = bind_tries(
                |_| SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                true,
                |_| Err(io::Error::from_raw_os_error(errno.raw_os_error())),
            )
            .expect("bound alone");
            assert!(b.partner.is_none());
            assert_eq!(b.page(), b.url());
            assert!(b.page().starts_with("http://127.0.0.1:"), "{}", b.page());
            assert!(
                b.partner_missing
                    .as_deref()
                    .is_some_and(|m| m.contains("[::1]"))
            );
        }
    }
}
