//! `iodig verify RUN_DIR`: reads back every key a finished run's versioned writes acknowledged,
//! against the database as it is now (managed nodes are started again), and records the result
//! in that run directory.

use iodig_iotrace::{TraceMode, TraceOptions, WatchOptions};
use iodig_model::secret::REDACTED;
use iodig_runner::{LoadPolicy, Phase, RunError, RunRequest, WorkloadRun};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug, Clone)]
pub struct VerifyArgs {
    /// Run directory of a run made with -p versionedwrites=true (the one holding run.json).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// Property override, e.g. -p hosts=10.0.0.5 when the database moved, the password the
    /// run's record does not keep (-p cassandra.password=…, or its file or environment variable),
    /// or -p verify.eachnode=true to read each managed Cassandra node alone as well.
    #[arg(short = 'p', value_name = "NAME=VALUE")]
    pub property: Vec<String>,
}

pub fn run(args: &VerifyArgs) -> Result<ExitCode, RunError> {
    let dir = iodig_runner::verify::run_dir_arg(&args.run_dir)?;
    iodig_runner::verify::require_ledger(&dir)?;
    let doc = iodig_model::reading::read_run_doc(&dir).map_err(RunError::from)?;
    // The run's own properties, less the secrets its record does not keep; then the flags.
    let mut overrides: Vec<String> = doc
        .config
        .properties
        .iter()
        .filter(|(_, v)| v.as_str() != REDACTED)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    overrides.extend(args.property.iter().cloned());
    let out_dir = dir
        .parent()
        .map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf);
    let req = RunRequest {
        phase: Phase::Run,
        db: doc.config.db.clone(),
        workloads: vec![WorkloadRun {
            property_files: Vec::new(),
            overrides,
            threads: vec![1],
        }],
        repetitions: 1,
        load_threads: None,
        target: None,
        duration: None,
        warmup: std::time::Duration::ZERO,
        out_dir,
        io_events: false,
        metrics: None,
        trace: TraceOptions {
            mode: TraceMode::Off,
            ..Default::default()
        },
        watch: WatchOptions::default(),
        load: LoadPolicy::Never,
        status: false,
        seed: Some(doc.config.seed),
        restore_each_step: false,
        drop_caches: false,
        nodes: None,
        faults: Vec::new(),
        observe: Vec::new(),
        client: None,
        start_at: None,
        stop_when: None,
        verify: true,
        verify_only: Some(dir.clone()),
        resume: None,
        label: doc.config.label.clone(),
        command_line: std::env::args().collect(),
        revision: option_env!("IODIG_GIT_REVISION").map(String::from),
    };
    let stop = iodig_runner::install_stop_handler()?;
    let outcome = iodig_runner::execute(&req, &stop)?;
    println!("{}", dir.join("run.json").display());
    Ok(outcome.exit_code())
}
