//! The command line: one subcommand per verb, flags named as YCSB names them where YCSB has them.

use clap::{Args, Parser, Subcommand};
/// The one duration syntax of every flag (`--duration`, `--warmup`, …), shared with `--fault`.
pub use iodig_model::duration::parse_duration;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "iodig",
    version,
    about = "Benchmark a database on its storage and dig past the averages",
    long_about = "iodig runs YCSB workloads against embedded RocksDB or Apache Cassandra, traces the block IO \
underneath with eBPF, samples the system, and writes one run directory per run.\n\n\
EXAMPLES:\n  iodig run                                   # workload A on RocksDB, threads 1,4,16, traced\n  \
iodig run -P workloads/workloadc -p recordcount=1000000 --threads 1,2,4 --duration 30s\n  \
iodig run --resume runs/20260101-120000-workloadc-rocksdb   # continue a killed sweep\n  \
iodig load --db basic -p recordcount=5 -p basicdb.verbose=true --threads 1\n  \
iodig trace --duration 10s"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Load the dataset if needed, then run the workload over a sweep of thread counts.
    Run(BenchArgs),
    /// Load phase only (YCSB's `load`).
    Load(BenchArgs),
    /// Trace block IO alone, for a duration or while a command runs (like biosnoop + iostat).
    Trace(crate::cmd::trace::TraceArgs),
    /// Combine the run directories of clients that drove one database together (exact merge).
    Merge(MergeArgs),
    /// Write report.html, report.md and CSV files into a run directory.
    Report(crate::cmd::report::ReportArgs),
    /// Compare runs with the first: advantage tables, latency ratios, significance, regressions.
    Compare(crate::cmd::compare::CompareArgs),
    /// Read back every key a run's versioned writes acknowledged (-p versionedwrites=true) and
    /// count missing, stale and corrupt ones; exit 1 if any.
    Verify(crate::cmd::verify::VerifyArgs),
    /// Start, stop and inspect local Apache Cassandra nodes.
    Cassandra(crate::cmd::cassandra::CassandraArgs),
    /// The observer `run --observe` starts on another host over SSH (requests on stdin).
    #[command(hide = true)]
    Agent(crate::cmd::agent::AgentArgs),
}

/// Flags of `iodig merge`.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Run directories, one per client (`--client 1/N` … `--client N/N`).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,

    /// Where the merged run directory is created.
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub out: PathBuf,
}

/// Flags shared by `run` and `load`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// An experiment file (TOML: workloads × thread counts × repetitions, see docs/experiments.md).
    /// Its settings replace -P; --threads, --db, --duration, --warmup, --trace, --target and
    /// --stop-when given on the command line win over the file's, as -p wins over its properties.
    #[arg(value_name = "EXPERIMENT.toml")]
    pub experiment: Option<PathBuf>,

    /// YCSB workload property file; several allowed, later ones win. Bare names workloada…workloadf
    /// use the built-in copies.
    #[arg(short = 'P', value_name = "FILE")]
    pub workload: Vec<String>,

    /// Property override, YCSB style (`-p recordcount=1000000`); wins over -P files.
    #[arg(short = 'p', value_name = "NAME=VALUE")]
    pub property: Vec<String>,

    /// Database binding: rocksdb (embedded, default), basic (no-op), cassandra.
    #[arg(long, value_name = "NAME")]
    pub db: Option<String>,

    /// Client threads (YCSB's -threads); a comma list runs one step per count, e.g. 4,8,16.
    #[arg(
        long,
        value_name = "N[,N…]",
        value_delimiter = ',',
        allow_negative_numbers = true
    )]
    pub threads: Vec<u64>,

    /// Threads for the load step of `run` (default: 2 × cores, at least 4).
    #[arg(long, value_name = "N")]
    pub load_threads: Option<u64>,

    /// OS threads that run the requests of network bindings (cassandra), however many are in
    /// flight (default: one per core, at most 4). One thread may cost a little less CPU per
    /// operation when the database shares the machine; more lift the client's ceiling.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub io_threads: Option<u16>,

    /// Target throughput in ops/s for the whole client (YCSB's -target); latency is then also
    /// measured from each operation's intended start.
    #[arg(long, value_name = "OPS")]
    pub target: Option<f64>,

    /// Measured duration of each run step, e.g. 30s, 2m (default: operationcount, else 10s).
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    pub duration: Option<Duration>,

    /// Unmeasured warm-up before each run step [default: 2s].
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    pub warmup: Option<Duration>,

    /// Directory of run directories (and of iodig-managed data).
    #[arg(long, default_value = "runs", value_name = "DIR")]
    pub out: PathBuf,

    /// Block-IO observation: auto (eBPF, else diskstats, the default), ebpf, diskstats, off.
    #[arg(long, value_name = "MODE")]
    pub trace: Option<String>,

    /// Also trace this block device (the data directory's device is always traced).
    #[arg(long, value_name = "DEV")]
    pub device: Vec<String>,

    /// Watch a cgroup (a service, a container) and name its IO in the trace and the report:
    /// absolute, or relative to the IO cgroup hierarchy's root; repeatable.
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<PathBuf>,

    /// Watch a process by pid and name its IO in the trace and the report; repeatable.
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,

    /// Also write every traced IO of each step to its io-events.csv, one line per IO
    /// (unix_ns,device,op,cmd_flags,sector,bytes,device_ns,qd): the biosnoop view of the run,
    /// about 60 bytes per IO (eBPF only; with the diskstats fallback the step says so).
    #[arg(long)]
    pub events: bool,

    /// Width of the tracer's time slots in ms (bursts are reported per slot).
    #[arg(long, default_value_t = 100, value_name = "MS", value_parser = parse_slot_ms)]
    pub slot_ms: u32,

    /// Load again even if the database already holds this dataset (an embedded database's data
    /// directory is wiped first; external hosts are written over).
    #[arg(long, conflicts_with = "no_load")]
    pub reload: bool,

    /// Never load; run on the data as it is.
    #[arg(long)]
    pub no_load: bool,

    /// Restore the loaded dataset before every run step, as the 4-node brief restores from a
    /// backup before every test: RocksDB from a checkpoint beside its data directory, managed
    /// Cassandra nodes from a snapshot, Cassandra nodes on --observe hosts through iodig's
    /// agent there.
    #[arg(long)]
    pub restore_each_step: bool,

    /// Empty the page cache before every run step (after any restore), here and on every
    /// --observe host, so no step reads what the one before left in memory. Needs root.
    #[arg(long)]
    pub drop_caches: bool,

    /// Managed Cassandra nodes to start on 127.0.0.1…N when no hosts are given (default 1);
    /// with replication set by -p cassandra.replicationfactor.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=254))]
    pub nodes: Option<u32>,

    /// Inject a fault into every run step, at an offset from its start: AT:ACTION:TARGET with
    /// ACTION kill, pause=DURATION, stop or restart and TARGET nodeN (managed Cassandra nodes);
    /// e.g. --fault 10s:kill:node2 --fault 40s:restart:node2. Repeatable. Each fault is an event
    /// on the step's time line.
    #[arg(long = "fault", value_name = "AT:ACTION:TARGET")]
    pub faults: Vec<String>,

    /// Observe the database node on these hosts over SSH (HOST, USER@HOST, HOST:PORT or an
    /// ~/.ssh/config alias; comma-separated or repeated): iodig runs its own tracer, system
    /// sampler and event reader there during each step and keeps them per node in the step's
    /// `nodes/HOST/`. `-p ssh.config=FILE` uses another ssh_config.
    #[arg(long, value_name = "HOST[,HOST…]", value_delimiter = ',')]
    pub observe: Vec<String>,

    /// Start one client per host over SSH (HOST, USER@HOST, HOST:PORT or an ~/.ssh/config
    /// alias; comma-separated or repeated; this machine may be one of them), each with
    /// `--client I/N`, the same flags and files and one common start, then merge their runs into
    /// --out (docs/clients.md). --threads and --target are per client.
    #[arg(long, value_name = "HOST[,HOST…]", value_delimiter = ',')]
    pub clients: Vec<String>,

    /// Serve the run's live figures at http://ADDR:PORT/metrics for Prometheus (docs/live.md):
    /// operations, latency histograms, each place's IO, queue depth, activity classes, CPU and
    /// memory, events. Bound before the run starts; `-p metrics.linger=SECONDS` serves on that
    /// long after it ends.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,

    /// Show status lines on stderr (YCSB's -s); on a terminal a live bar is shown anyway.
    #[arg(short = 's')]
    pub status: bool,

    /// This client's slice of the key space when N clients drive one database: I of N (1-based).
    #[arg(long, value_parser = parse_client, value_name = "I/N")]
    pub client: Option<(u64, u64)>,

    /// Begin the first step at TIME (unix seconds, or RFC 3339 such as 2026-01-01T12:00:00Z) and
    /// each following one on a schedule every client computes alike (docs/clients.md), so
    /// clients started apart (`--client I/N` on several machines) measure together.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,

    /// Seed of all random choices: the same seed and thread count repeat the op sequence.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// End a workload's thread sweep at the first step that meets this rule, e.g.
    /// 'read.p99 > 50ms' (OP.STAT > LIMIT: read, update, insert, scan, delete, rmw; avg, p50,
    /// p90, p95, p99, p99.9, p99.99, max; > >= < <=). The thread counts left are "(not tested)".
    #[arg(long, value_name = "RULE", value_parser = iodig_runner::StopRule::parse)]
    pub stop_when: Option<iodig_runner::StopRule>,

    /// Continue the run in RUN_DIR that was killed, interrupted or stopped by an error: its
    /// finished steps are kept as they are, the step it was in runs again, and the rest follow
    /// with the configuration run.json recorded. Only -s may be given with it, and -p for a
    /// secret property the run did not record (recorded as ***).
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<PathBuf>,
    /// The configuration's name, e.g. "Micron 9300" (recorded in run.json): `iodig compare` and
    /// `iodig report` name the run by it instead of its directory. One line, not empty.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// After the last step, read back every key the run's versioned writes acknowledged
    /// (-p versionedwrites=true) and count missing, stale and corrupt ones (exit 1 if any).
    #[arg(long)]
    pub verify: bool,
}

/// Parses `--fail-on-regression`: a percentage, 0 or more.
pub fn parse_percentage(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err(format!("{s:?}: give a percentage ≥ 0, e.g. 5")),
    }
}

/// Parses `--slot-ms`, refusing widths the tracer cannot use before anything starts.
pub fn parse_slot_ms(s: &str) -> Result<u32, String> {
    let ms: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number of milliseconds"))?;
    iodig_iotrace::check_slot_ms(ms)
}

/// Parses `--start-at`; the time being in the future is checked when the command runs.
pub fn parse_start_at(s: &str) -> Result<std::time::SystemTime, String> {
    iodig_runner::start_at::parse_start_at(s)
}

/// Parses `I/N` of `--client`.
pub fn parse_client(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: write I/N, e.g. 2/4"))?;
    let (i, n) = (
        i.trim()
            .parse()
            .map_err(|_| format!("{s:?}: I is not a number"))?,
        n.trim()
            .parse()
            .map_err(|_| format!("{s:?}: N is not a number"))?,
    );
    if i == 0 || n == 0 || i > n {
        return Err(format!("{s:?}: need 1 ≤ I ≤ N"));
    }
    Ok((i, n))
}

/// Accepts YCSB's single-dash flags (`-threads 8`, `-target 1000`, `-db basic`).
pub fn normalize_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter()
        .map(|a| match a.as_str() {
            "-threads" | "-target" | "-db" => format!("-{a}"),
            _ => a,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert_eq!(parse_duration("0.5").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("10x").unwrap_err().contains("unit"));
        assert!(parse_duration("-3s").is_err());
    }

    #[test]
    fn ycsb_flags_are_accepted() {
        let args =
            normalize_args(["iodig", "run", "-threads", "8", "-db", "basic"].map(String::from));
        let cli = Cli::try_parse_from(args).unwrap();
        let Command::Run(b) = cli.command else {
            panic!("not run")
        };
        assert_eq!(b.threads, vec![8]);
        assert_eq!(b.db.as_deref(), Some("basic"));
    }
}
