//! The `gatehost` binary: see `gatehost --help`.

fn main() {
    std::process::exit(gatehost::cli::main());
}
