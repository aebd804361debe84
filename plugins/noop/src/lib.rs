//! The smallest gate plugin: it always passes.

use gatehost_plugin::{Context, Plugin, Verdict};

struct Noop;

impl Plugin for Noop {
    fn evaluate(_ctx: Context) -> Result<Verdict, String> {
        Ok(gatehost_plugin::pass("noop: nothing to check"))
    }
}

gatehost_plugin::export_gate!(Noop);
