//! `iodig trace`: the block-IO tracer alone, like biosnoop + iostat, for a duration or while a
//! command runs; prints the briefs' summary and per-second tables, or the TraceDoc as JSON.

use crate::cli::{parse_duration, parse_slot_ms};
use anyhow::{Context, Result};
use iodig_iotrace::render::By;
use iodig_iotrace::{render, BadTarget, TraceError, TraceMode, TraceOptions, WatchOptions};
use iodig_runner::RunError;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct TraceArgs {
    /// Block device to trace ("vda", "/dev/nvme0n1", or a partition: its whole disk is traced);
    /// repeat for several. Default: every whole disk that sees IO.
    #[arg(long = "device", short = 'd', value_name = "DEV")]
    pub devices: Vec<String>,
    /// How long to trace ("30s", "500ms", "2m", "10"). Default: until COMMAND exits or Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Width of the sub-second slots behind the per-second max figures (must divide 1000).
    #[arg(long, default_value_t = 100, value_name = "MS", value_parser = parse_slot_ms)]
    pub slot_ms: u32,
    /// Print one JSON document (the TraceDoc, see docs/tracing.md) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write every IO as a CSV line to FILE (eBPF mode; drops are counted as lost events).
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// auto: eBPF, or diskstats with the reason when eBPF is not possible; ebpf: exit 3 instead.
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<TraceMode>())]
    pub mode: TraceMode,
    /// Watch a cgroup (a directory under the blkio/io hierarchy, absolute or relative to its
    /// root, e.g. system.slice/cassandra.service): its IO is named in the output. Repeatable.
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<PathBuf>,
    /// Watch a process by pid: its IO is named in the output. Repeatable.
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Group the summary and per-second tables by who issued the IO (eBPF mode).
    #[arg(long, value_name = "class|cgroup|process", value_parser = |s: &str| s.parse::<By>())]
    pub by: Option<By>,
    /// Do not attribute IO to submitters (one BPF program less per IO; for overhead comparisons).
    #[arg(long)]
    pub no_attribution: bool,
    /// Command to run and trace; iodig exits with its exit code.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(args: &TraceArgs) -> Result<ExitCode, RunError> {
    let opts = TraceOptions {
        mode: args.mode,
        devices: args.devices.clone(),
        slot_ms: args.slot_ms,
        events_file: args.events.clone(),
        live: None,
        live_histograms: false,
    };
    let watch = WatchOptions {
        cgroups: args.cgroups.clone(),
        pids: args.pids.clone(),
        no_attribution: args.no_attribution,
    };
    let session = iodig_iotrace::start_watching(&opts, &watch).map_err(start_error)?;
    if let Some(note) = session.note() {
        eprintln!("iodig trace: {note}");
    }
    let stop = iodig_runner::install_stop_handler()?;
    let child_code = trace_until_done(args, &stop)?;
    let doc = session.stop().context("stopping the tracer")?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?
        );
    } else if let Some(by) = args.by {
        print!("{}", render::by(&doc, by));
    } else {
        print!("{}", render::text(&doc));
    }
    Ok(child_code.map_or(ExitCode::SUCCESS, ExitCode::from))
}

/// The tracer's refusal by kind: a device or watch target that is not there is the user's to
/// fix (2); eBPF asked for by name and not possible is a missing privilege (3).
fn start_error(e: TraceError) -> RunError {
    match e {
        TraceError::UnknownDevice { .. } => RunError::Usage(e.into()),
        TraceError::Other(e) if e.downcast_ref::<BadTarget>().is_some() => RunError::Usage(e),
        TraceError::Privilege { .. } => RunError::Privilege(anyhow::anyhow!(
            "{e} (--mode ebpf was asked for; try --mode auto)"
        )),
        TraceError::Other(e) => RunError::Failed(e),
    }
}

/// Waits for the duration, the command, or SIGINT/SIGTERM; returns the command's exit code.
/// The command is waited for on a thread of its own, so this one wakes only to look at the
/// stop flag: a tracer that polled its child every few ms would take CPU from the IO it
/// measures.
fn trace_until_done(args: &TraceArgs, stop: &AtomicBool) -> Result<Option<u8>> {
    const LOOK: Duration = Duration::from_millis(200);
    let deadline = args.duration.map(|d| Instant::now() + d);
    let child = match args.command.split_first() {
        Some((prog, rest)) => Some(
            Command::new(prog)
                .args(rest)
                .spawn()
                .with_context(|| format!("cannot run {prog:?} (the COMMAND after --)"))?,
        ),
        None => None,
    };
    let pid = child.as_ref().map(Child::id);
    let (done_tx, done) = mpsc::channel();
    if let Some(mut c) = child {
        std::thread::Builder::new()
            .name("iodig-command".into())
            .spawn(move || {
                let _ = done_tx.send(c.wait());
            })
            .context("cannot start the thread that waits for the command")?;
    }
    loop {
        let wait = deadline.map_or(LOOK, |d| {
            d.saturating_duration_since(Instant::now()).min(LOOK)
        });
        match done.recv_timeout(wait) {
            Ok(status) => return Ok(Some(exit_code(status?))),
            // Without a command the sender lives on here, so this times out: a plain wait.
            Err(RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the thread waiting for the command ended without its status")
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
    // Interrupted or out of time: the command (if any) gets the same signal a terminal would send.
    // It may have ended meanwhile, and been reaped: its pid may be another process's already.
    if let Ok(status) = done.try_recv() {
        return Ok(Some(exit_code(status?)));
    }
    match pid {
        Some(pid) => {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            Ok(Some(exit_code(
                done.recv().context("waiting for the command")??,
            )))
        }
        None => Ok(None),
    }
}

/// The command's exit code; 128 + signal when a signal ended it (shell convention).
fn exit_code(st: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    st.code().map_or_else(
        || 128u8.wrapping_add(st.signal().unwrap_or(0) as u8),
        |c| c as u8,
    )
}
