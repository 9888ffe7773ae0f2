//! `ledger`: the Evidence Ledger command-line program (`cli` holds its
//! flags and one module per subcommand).

use std::process::ExitCode;

mod cli;

/// jemalloc, not glibc's malloc, for the server's many short-lived buffers
/// freed on other threads than the one that made them: 12% more events/s
/// on the benchmark (docs/DECISIONS.md, bench/README.md).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    cli::main()
}
