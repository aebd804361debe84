//! A plugin that tries to open a network connection: it imports
//! `wasi:sockets`, which gatehost does not grant, so it must never load.

use gatehost_plugin::{Context, Plugin, Verdict};

struct Socket;

impl Plugin for Socket {
    fn evaluate(_ctx: Context) -> Result<Verdict, String> {
        match std::net::TcpStream::connect("127.0.0.1:9") {
            Ok(_) => Ok(gatehost_plugin::pass("ESCAPED: connected")),
            Err(e) => Ok(gatehost_plugin::fail(format!("denied: {e}"), Vec::new())),
        }
    }
}

gatehost_plugin::export_gate!(Socket);
