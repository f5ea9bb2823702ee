//! `iodig agent`: what `run --observe` starts on an observed host over SSH. Not for people:
//! it speaks JSON lines on stdin and stdout until stdin closes.

use crate::cli::parse_slot_ms;
use clap::Args;
use iodig_iotrace::{TraceMode, TraceOptions};
use iodig_runner::remote::agent::{serve, AgentOptions};
use iodig_runner::{RunError, UsageError};
use std::process::ExitCode;

/// Flags of `iodig agent` (set by the observing iodig).
#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The binding whose node to look for on this host.
    #[arg(long, default_value = "cassandra")]
    pub db: String,

    /// The node's client address here (`IP` or `IP:PORT`), when several nodes share the host.
    #[arg(long, value_name = "ADDRESS")]
    pub node: Option<String>,

    /// auto, ebpf, diskstats or off.
    #[arg(long, default_value = "auto", value_name = "MODE")]
    pub trace: String,

    #[arg(long, default_value_t = 100, value_name = "MS", value_parser = parse_slot_ms)]
    pub slot_ms: u32,

    /// Stream every IO too (`run --events`), sent back with each step.
    #[arg(long)]
    pub events: bool,
}

pub fn run(args: &AgentArgs) -> Result<ExitCode, RunError> {
    let mode: TraceMode = args
        .trace
        .parse()
        .map_err(|e| UsageError(format!("--trace {}: {e}", args.trace)))?;
    let opts = AgentOptions {
        db: args.db.clone(),
        node: args.node.clone(),
        trace: TraceOptions {
            mode,
            slot_ms: args.slot_ms,
            ..Default::default()
        },
        revision: option_env!("IODIG_GIT_REVISION").map(String::from),
        io_events: args.events,
    };
    serve(&opts, iodig_runner::deployment::node_on_host)?;
    Ok(ExitCode::SUCCESS)
}
