//! iodig's entry point: parse the command line, run the subcommand, map errors to exit codes
//! (0 ok, 1 failure or failed check, 2 usage or input error, 3 missing privilege asked for).

mod cli;
mod cmd;
mod scrub;

use clap::Parser;
use std::process::ExitCode;

// The CQL driver allocates per request and per response frame; glibc's allocator cost about a
// tenth of client CPU at 1024 requests in flight, mimalloc's thread-local free lists far less.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's collection (in the static library the allocator links): with `force`, freed
    /// pages held for reuse go back to the system now.
    fn mi_collect(force: bool);
    /// glibc's: frees the unused top and whole unused pages of its heaps (returns 1 if any).
    fn malloc_trim(pad: usize) -> i32;
}

/// Between steps: the last step's freed memory back to the system, so RSS tracks what is live.
/// Rust's allocations are mimalloc's; C libraries' (libbpf parsing the kernel's BTF for every
/// traced step, RocksDB) are glibc's, which keeps freed heap for reuse too.
fn release_memory() {
    // SAFETY: mi_collect takes no pointers and may be called from any thread at any time.
    unsafe { mi_collect(true) }
    // SAFETY: malloc_trim takes no pointers and is thread-safe (it locks each arena).
    unsafe {
        malloc_trim(0);
    }
}

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse_from(cli::normalize_args(std::env::args())) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // clap uses 2 for usage errors already; help and version are 0.
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    // Parsed: the arguments' copies are owned now, so the secrets among the originals can go.
    scrub::hide_secret_args();
    iodig_runner::memory::set_release(release_memory);
    let result: Result<ExitCode, cmd::Failure> = match &cli.command {
        cli::Command::Run(args) => {
            cmd::bench::run(args, iodig_runner::Phase::Run).map_err(cmd::Failure::from)
        }
        cli::Command::Load(args) => {
            cmd::bench::run(args, iodig_runner::Phase::Load).map_err(cmd::Failure::from)
        }
        cli::Command::Trace(args) => cmd::trace::run(args).map_err(cmd::Failure::from),
        cli::Command::Cassandra(args) => cmd::cassandra::run(args).map_err(cmd::Failure::from),
        cli::Command::Merge(args) => cmd::merge::run(args).map_err(cmd::Failure::from),
        cli::Command::Report(args) => cmd::report::run(args).map_err(cmd::Failure::from),
        cli::Command::Compare(args) => cmd::compare::run(args).map_err(cmd::Failure::from),
        cli::Command::Verify(args) => cmd::verify::run(args).map_err(cmd::Failure::from),
        cli::Command::Agent(args) => cmd::agent::run(args).map_err(cmd::Failure::from),
    };
    match result {
        Ok(code) => code,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.exit_code)
        }
    }
}
