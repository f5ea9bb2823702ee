//! `iodig run` and `iodig load`: flags to a [`RunRequest`], then the runner does the work.

use crate::cli::{normalize_args, parse_duration, BenchArgs, Cli, Command};
use clap::Parser;
use iodig_iotrace::{TraceMode, TraceOptions, WatchOptions};
use iodig_runner::experiment_file::ExperimentFile;
use iodig_runner::remote::clients;
use iodig_runner::{LoadPolicy, Phase, RunError, RunRequest, UsageError, WorkloadRun};
use std::path::Path;
use std::process::ExitCode;

/// Warm-up of a run step unless `--warmup` or an experiment file says otherwise.
const DEFAULT_WARMUP: std::time::Duration = std::time::Duration::from_secs(2);

pub fn run(args: &BenchArgs, phase: Phase) -> Result<ExitCode, RunError> {
    if let Some(dir) = &args.resume {
        return resume(args, phase, dir);
    }
    let (req, clients) = request(args, phase)?;
    start(args, phase, req, &clients)
}

/// The request of `run` or `load` from its flags (and experiment file), checked; with the
/// experiment file's `clients`.
fn request(args: &BenchArgs, phase: Phase) -> Result<(RunRequest, Vec<String>), RunError> {
    let trace = args.trace.as_deref().unwrap_or("auto");
    let mode: TraceMode = trace
        .parse()
        .map_err(|e| UsageError(format!("--trace {trace}: {e}")))?;
    if let Some(n) = args.io_threads {
        iodig_runner::step::set_io_threads(n.into());
    }
    let mut req = RunRequest {
        phase,
        db: args.db.clone().unwrap_or_else(|| "rocksdb".into()),
        workloads: vec![WorkloadRun {
            property_files: args.workload.clone(),
            overrides: args.property.clone(),
            threads: args.threads.clone(),
        }],
        repetitions: 1,
        load_threads: args.load_threads,
        target: args.target,
        duration: args.duration,
        warmup: args.warmup.unwrap_or(DEFAULT_WARMUP),
        out_dir: args.out.clone(),
        trace: TraceOptions {
            mode,
            devices: args.device.clone(),
            slot_ms: args.slot_ms,
            events_file: None,
            live: None,
            live_histograms: false,
        },
        load: match (args.reload, args.no_load) {
            (true, _) => LoadPolicy::Always,
            (_, true) => LoadPolicy::Never,
            _ => LoadPolicy::Auto,
        },
        status: args.status,
        seed: args.seed,
        watch: WatchOptions {
            cgroups: args.cgroups.clone(),
            pids: args.pids.clone(),
            no_attribution: false,
        },
        restore_each_step: args.restore_each_step,
        drop_caches: args.drop_caches,
        nodes: args.nodes,
        observe: args.observe.clone(),
        faults: args.faults.clone(),
        client: args.client,
        start_at: args.start_at,
        stop_when: args.stop_when.clone(),
        verify: args.verify,
        io_events: args.events,
        metrics: args.metrics.clone(),
        verify_only: None,
        resume: None,
        label: args.label.clone(),
        command_line: std::env::args().collect(),
        revision: option_env!("IODIG_GIT_REVISION").map(String::from),
    };
    let mut clients = args.clients.clone();
    if let Some(path) = &args.experiment {
        let file_clients = apply_experiment_file(&mut req, path, &args.property)?;
        // A run given --client I/N is one of the file's clients, started by hand or by a fleet.
        if clients.is_empty() && args.client.is_none() {
            clients = file_clients;
        }
        apply_flags_over_file(&mut req, args, mode);
    }
    if phase == Phase::Load {
        req.warmup = std::time::Duration::ZERO;
    }
    if req.io_events && req.trace.mode == TraceMode::Off {
        return Err(UsageError(
            "--events writes the traced IOs, and tracing is off here: leave --trace at auto or give --trace ebpf".into(),
        )
        .into());
    }
    if req.duration == Some(std::time::Duration::ZERO) {
        return Err(UsageError(
            "--duration 0s: a step must last some time; give e.g. --duration 30s, or leave it out to run operationcount operations".into(),
        )
        .into());
    }
    if let Some(t) = req.target.filter(|t| t.is_nan() || *t <= 0.0) {
        return Err(UsageError(format!(
            "--target {t}: the target rate must be above 0 ops/s"
        ))
        .into());
    }
    if let Some(t) = req.start_at {
        check_start_in_future(t)?;
    }
    Ok((req, clients))
}

/// Runs a checked request: here, or on the `--clients` hosts.
fn start(
    args: &BenchArgs,
    phase: Phase,
    req: RunRequest,
    clients: &[String],
) -> Result<ExitCode, RunError> {
    if !clients.is_empty() {
        return run_clients(args, phase, &req, clients);
    }
    let stop = iodig_runner::install_stop_handler()?;
    let outcome = iodig_runner::execute(&req, &stop)?;
    Ok(outcome.exit_code())
}

/// `iodig run --resume RUN_DIR`: the run's recorded command line parsed and resolved again as
/// it was, with the run's seed, into its own directory; refused (exit 2) when the run cannot be
/// continued as it was started.
fn resume(args: &BenchArgs, phase: Phase, dir: &Path) -> Result<ExitCode, RunError> {
    if phase == Phase::Load {
        return Err(UsageError(format!(
            "iodig load --resume {}: a load is one step, so there is nothing to continue; load again with iodig load, or resume a sweep with iodig run --resume",
            dir.display()
        ))
        .into());
    }
    let secrets = resume_flags(args)?;
    let from = iodig_runner::resume::open(dir)?;
    let refuse = |why: String| -> RunError {
        UsageError(format!("--resume {}: {why}", dir.display())).into()
    };
    let argv = with_secrets(&from.doc.tool.command_line, &secrets).map_err(&refuse)?;
    let cli = Cli::try_parse_from(normalize_args(argv)).map_err(|e| {
        refuse(format!(
            "its recorded command line ({}) no longer parses: {}",
            from.doc.tool.command_line[1..].join(" "),
            e.to_string().lines().next().unwrap_or_default()
        ))
    })?;
    let Command::Run(original) = cli.command else {
        return Err(refuse("run.json does not record an iodig run".into()));
    };
    if !original.clients.is_empty() || original.client.is_some() || original.start_at.is_some() {
        return Err(refuse(
            "its steps were timed with other clients' (--clients, --client or --start-at), whose common start times have passed; run the clients again".into(),
        ));
    }
    let (mut req, clients) = request(&original, Phase::Run).map_err(|e| match e {
        RunError::Usage(e) => refuse(format!(
            "its recorded configuration no longer resolves: {e:#}"
        )),
        other => other,
    })?;
    if !clients.is_empty() {
        return Err(refuse(
            "its experiment file starts clients on other hosts (clients = […]), whose runs are merged; run them again".into(),
        ));
    }
    // Relative paths of the command line (--out, -P, the experiment file) meant the directory
    // the run was started in: from anywhere else they would name other files.
    let name = from.dir.file_name().unwrap_or_default();
    let here = req.out_dir.join(name);
    if here.canonicalize().ok().as_deref() != Some(from.dir.as_path()) {
        return Err(refuse(format!(
            "its command line puts the run in --out {}, which from here is {}, not this run; resume from the directory the run was started in (or move the run back)",
            req.out_dir.display(),
            here.display()
        )));
    }
    // The same seed makes every step's workers draw what a run without the kill drew.
    req.seed = Some(from.doc.config.seed);
    req.status |= args.status;
    if args.metrics.is_some() {
        req.metrics.clone_from(&args.metrics);
    }
    req.command_line.clone_from(&from.doc.tool.command_line);
    req.resume = Some(from);
    start(&original, Phase::Run, req, &[])
}

/// The flags given beside `--resume`: only `-s` (output), and `-p NAME=VALUE` for a secret the
/// run did not record; anything else would change the experiment. Returns those secrets.
fn resume_flags(args: &BenchArgs) -> Result<Vec<(String, String)>, RunError> {
    let BenchArgs {
        experiment,
        workload,
        property,
        db,
        threads,
        load_threads,
        io_threads,
        target,
        duration,
        warmup,
        out,
        trace,
        device,
        cgroups,
        pids,
        events,
        slot_ms,
        reload,
        no_load,
        restore_each_step,
        drop_caches,
        nodes,
        faults,
        observe,
        clients,
        status: _,
        metrics: _,
        client,
        start_at,
        seed,
        stop_when,
        resume: _,
        verify,
        label,
    } = args;
    let given: [(&str, bool); 30] = [
        ("an experiment file", experiment.is_some()),
        ("-P", !workload.is_empty()),
        ("--db", db.is_some()),
        ("--threads", !threads.is_empty()),
        ("--load-threads", load_threads.is_some()),
        ("--io-threads", io_threads.is_some()),
        ("--target", target.is_some()),
        ("--duration", duration.is_some()),
        ("--warmup", warmup.is_some()),
        ("--out", out.as_path() != Path::new("runs")),
        ("--trace", trace.is_some()),
        ("--device", !device.is_empty()),
        ("--cgroup", !cgroups.is_empty()),
        ("--pid", !pids.is_empty()),
        ("--events", *events),
        ("--slot-ms", *slot_ms != 100),
        ("--reload", *reload),
        ("--no-load", *no_load),
        ("--restore-each-step", *restore_each_step),
        ("--drop-caches", *drop_caches),
        ("--nodes", nodes.is_some()),
        ("--fault", !faults.is_empty()),
        ("--observe", !observe.is_empty()),
        ("--clients", !clients.is_empty()),
        ("--client", client.is_some()),
        ("--start-at", start_at.is_some()),
        ("--seed", seed.is_some()),
        ("--stop-when", stop_when.is_some()),
        ("--verify", *verify),
        ("--label", label.is_some()),
    ];
    if let Some((flag, _)) = given.iter().find(|(_, on)| *on) {
        return Err(UsageError(format!(
            "{flag} with --resume: a resumed run goes on with the configuration its run.json recorded, and {flag} would change the experiment; leave it out (only -s, and -p for a secret the run did not record, may be given), or start a new run"
        ))
        .into());
    }
    let mut secrets = Vec::new();
    for p in property {
        let (name, value) = p.split_once('=').unwrap_or((p, ""));
        if !iodig_model::secret::is_secret_name(name.trim()) {
            return Err(UsageError(format!(
                "-p {p} with --resume: a resumed run goes on with the properties its run.json recorded, and -p {} would change the experiment; only a secret the run did not record (e.g. -p cassandra.password=…) may be given again",
                name.trim()
            ))
            .into());
        }
        secrets.push((name.trim().to_string(), value.to_string()));
    }
    Ok(secrets)
}

/// The recorded command line with each secret it held (recorded as `***`) given again; refused
/// when one is not given, or one given was not on it.
fn with_secrets(recorded: &[String], secrets: &[(String, String)]) -> Result<Vec<String>, String> {
    let mut used = vec![false; secrets.len()];
    let mut argv = Vec::with_capacity(recorded.len());
    for a in recorded {
        match a.split_once('=') {
            Some((name, value)) if value == iodig_model::secret::REDACTED => {
                let Some(i) = secrets.iter().position(|(n, _)| n == name.trim()) else {
                    return Err(format!(
                        "the run was given the secret {} on its command line, which run.json does not keep; give it again: --resume DIR -p {}=…",
                        name.trim(), name.trim()
                    ));
                };
                used[i] = true;
                argv.push(format!("{name}={}", secrets[i].1));
            }
            _ => argv.push(a.clone()),
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(format!(
            "-p {}: the run was not given this secret on its command line; leave it out",
            secrets[i].0
        ));
    }
    Ok(argv)
}

/// A start time that has passed cannot line clients up: refused before anything starts.
fn check_start_in_future(t: std::time::SystemTime) -> Result<(), RunError> {
    let now = std::time::SystemTime::now();
    if let Ok(ago) = now.duration_since(t) {
        let example = now
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
            + 60;
        return Err(UsageError(format!(
            "--start-at {}: that time passed {:.1} s ago; give a time in the future on every client, e.g. --start-at {example} (a minute from now)",
            iodig_runner::utc::format_utc(t),
            ago.as_secs_f64()
        ))
        .into());
    }
    Ok(())
}

/// `--clients`: checks everything here first (exit 2 before any host is reached), then starts
/// the clients over ssh and shows the merged run.
fn run_clients(
    args: &BenchArgs,
    phase: Phase,
    req: &RunRequest,
    hosts: &[String],
) -> Result<ExitCode, RunError> {
    if let Some((i, n)) = req.client {
        return Err(UsageError(format!(
            "--clients starts each client with --client I/N itself; leave out --client {i}/{n} (or start the clients yourself with --client I/N --start-at TIME and merge them with iodig merge)"
        ))
        .into());
    }
    if let Some(f) = req.faults.first() {
        return Err(UsageError(format!(
            "--fault {f} with --clients: every client would inject it; inject faults from one client started by hand (--client 1/N --start-at TIME --fault …)"
        ))
        .into());
    }
    if let Some(rule) = &req.stop_when {
        return Err(UsageError(format!(
            "--stop-when '{rule}' with --clients: each client would judge its own latency and end its sweep apart from the others; leave it out and read the merged run"
        ))
        .into());
    }
    if let Some(addr) = &req.metrics {
        return Err(UsageError(format!(
            "--metrics {addr} with --clients: each client would serve its own figures on its own host; start the clients yourself (--client I/N --start-at TIME --metrics ADDR:PORT on each) and scrape each"
        ))
        .into());
    }
    if req.verify {
        return Err(UsageError(
            "--verify with --clients: each client keeps the versions of its own writes, and keys written by several clients cannot be judged from one; verify a single-client run".into(),
        )
        .into());
    }
    let hosts = iodig_runner::remote::parse_hosts("--clients", hosts)?;
    let n = hosts.len() as u64;
    // The clients' plan, resolved here as client 1 would: a bad property or file is refused
    // before any host is reached.
    let mut check = req.clone();
    check.client = Some((1, n));
    check.start_at = None;
    let plan = iodig_runner::plan::Plan::resolve(&check)?;
    if plan.workloads.iter().any(|w| w.spec.versioned_writes) {
        return Err(UsageError(
            "versionedwrites=true with --clients: keys written by several clients cannot be judged from one client's ledger; run versioned writes from a single client".into(),
        )
        .into());
    }
    let (client_args, files) = client_command(args, phase)?;
    // One client observes the database's hosts, over SSH from its own host: its ssh setup
    // (keys, ~/.ssh/config, or -p ssh.config as given, a path on that host) must reach them.
    let mut first_client_args = Vec::new();
    if !req.observe.is_empty() {
        first_client_args.extend(["--observe".to_string(), req.observe.join(",")]);
        if let Some(cfg) = plan.props.get("ssh.config") {
            first_client_args.extend(["-p".to_string(), format!("ssh.config={cfg}")]);
        }
    }
    let stop = iodig_runner::install_stop_handler()?;
    let outcome = clients::run_clients(
        &clients::ClientsRun {
            hosts,
            ssh: plan.ssh.clone(),
            args: client_args,
            first_client_args,
            files,
            seed: plan.seed,
            start_at: req.start_at,
            out: req.out_dir.clone(),
        },
        &stop,
    )?;
    crate::cmd::merge::show(&outcome.merged);
    if !outcome.failed.is_empty() {
        return Err(RunError::Failed(anyhow::anyhow!(
            "{} of {n} clients failed ({}); the merged run holds the others",
            outcome.failed.len(),
            outcome.failed.join("; ")
        )));
    }
    Ok(if outcome.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// The clients' command line: this command's flags, with the property and experiment files it
/// names sent along (as `p<k>/NAME`, `experiment.toml`), and without what each client gets of
/// its own (`--client`, `--start-at`, `--seed`, `--out`) or what is this machine's
/// (`ssh.config`). Every field is named, so a new flag cannot be forgotten here.
fn client_command(
    args: &BenchArgs,
    phase: Phase,
) -> anyhow::Result<(Vec<String>, Vec<clients::StagedFile>)> {
    let BenchArgs {
        experiment,
        workload,
        property,
        db,
        threads,
        load_threads,
        io_threads,
        target,
        duration,
        warmup,
        out: _,
        trace,
        device,
        cgroups,
        pids,
        slot_ms,
        events,
        reload,
        no_load,
        restore_each_step,
        drop_caches,
        nodes,
        observe: _,
        faults: _,
        clients: _,
        status,
        metrics: _,
        client: _,
        start_at: _,
        seed: _,
        stop_when: _,
        resume: _,
        verify: _,
        label,
    } = args;
    let mut a: Vec<String> = vec![match phase {
        Phase::Load => "load".into(),
        _ => "run".into(),
    }];
    let mut files = Vec::new();
    if let Some(path) = experiment {
        files.extend(clients::stage_experiment(path, "experiment.toml")?);
        a.push("experiment.toml".into());
    }
    for (k, w) in workload.iter().enumerate() {
        let path = Path::new(w);
        if !path.is_file() {
            // A built-in workload name: every client has its own copy.
            a.extend(["-P".into(), w.clone()]);
            continue;
        }
        let name = path
            .file_name()
            .map_or("workload".into(), |n| n.to_string_lossy().into_owned());
        let rel = format!("p{k}/{name}");
        files.push(clients::StagedFile {
            rel: rel.clone(),
            content: std::fs::read(path)
                .map_err(|e| UsageError(format!("-P {w}: cannot read it ({e})")))?,
        });
        a.extend(["-P".into(), rel]);
    }
    for p in property {
        if p.split('=').next().map(str::trim) != Some("ssh.config") {
            a.extend(["-p".into(), p.clone()]);
        }
    }
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            a.extend([name.to_string(), v]);
        }
    };
    let ms = |d: &Option<std::time::Duration>| d.map(|d| format!("{}ms", d.as_millis()));
    flag("--db", db.clone());
    flag(
        "--threads",
        (!threads.is_empty()).then(|| {
            threads
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        }),
    );
    flag("--load-threads", load_threads.map(|t| t.to_string()));
    flag("--io-threads", io_threads.map(|t| t.to_string()));
    flag("--target", target.map(|t| t.to_string()));
    flag("--duration", ms(duration));
    flag("--warmup", ms(warmup));
    flag("--trace", trace.clone());
    flag("--slot-ms", Some(slot_ms.to_string()));
    flag("--nodes", nodes.map(|n| n.to_string()));
    // Every client records the configuration's name, so the merged run keeps it.
    flag("--label", label.clone());
    for d in device {
        flag("--device", Some(d.clone()));
    }
    for c in cgroups {
        flag("--cgroup", Some(c.display().to_string()));
    }
    for p in pids {
        flag("--pid", Some(p.to_string()));
    }
    for (on, name) in [
        (*reload, "--reload"),
        (*no_load, "--no-load"),
        (*restore_each_step, "--restore-each-step"),
        (*drop_caches, "--drop-caches"),
        (*events, "--events"),
        (*status, "-s"),
    ] {
        if on {
            a.push(name.into());
        }
    }
    Ok((a, files))
}

/// Replaces the request's workloads and settings with those of an experiment file; returns its
/// `clients` list.
fn apply_experiment_file(
    req: &mut RunRequest,
    path: &Path,
    overrides: &[String],
) -> anyhow::Result<Vec<String>> {
    let file = ExperimentFile::read(path)?;
    let duration =
        |flag: &str, v: &Option<String>| -> anyhow::Result<Option<std::time::Duration>> {
            v.as_deref()
                .map(|d| {
                    parse_duration(d).map_err(|e| {
                        UsageError(format!("{}: {flag} = {d:?}: {e}", path.display())).into()
                    })
                })
                .transpose()
        };
    req.workloads = file.workload_runs(overrides);
    req.repetitions = file.repetitions.max(1);
    if let Some(db) = &file.db {
        req.db = db.clone();
    }
    if let Some(d) = duration("duration", &file.duration)? {
        req.duration = Some(d);
    }
    if let Some(w) = duration("warmup", &file.warmup)? {
        req.warmup = w;
    }
    if let Some(t) = &file.trace {
        req.trace.mode = t
            .parse()
            .map_err(|e| UsageError(format!("{}: trace = {t:?}: {e}", path.display())))?;
    }
    req.target = file.target.or(req.target);
    req.restore_each_step |= file.restore_each_step;
    req.drop_caches |= file.drop_caches;
    req.nodes = file.nodes.or(req.nodes);
    if req.observe.is_empty() {
        req.observe = file.observe.clone();
    }
    if req.faults.is_empty() {
        req.faults = file.faults.clone();
    }
    req.stop_when = file.stop_rule().or(req.stop_when.take());
    req.verify |= file.verify;
    req.label = file.label.clone().or(req.label.take());
    Ok(file.clients)
}

/// Flags given on the command line win over an experiment file's settings, so an example can
/// be shortened or pointed elsewhere without editing it (`-p` already wins over its properties).
fn apply_flags_over_file(req: &mut RunRequest, args: &BenchArgs, trace: TraceMode) {
    if let Some(db) = &args.db {
        req.db = db.clone();
    }
    if !args.threads.is_empty() {
        for w in &mut req.workloads {
            w.threads = args.threads.clone();
        }
    }
    let max_execution_given = args
        .property
        .iter()
        .any(|p| p.split('=').next().map(str::trim) == Some("maxexecutiontime"));
    if args.duration.is_some() || max_execution_given {
        // `-p maxexecutiontime=N` on the command line is YCSB's --duration: it wins too.
        req.duration = args.duration;
    }
    if let Some(w) = args.warmup {
        req.warmup = w;
    }
    if args.trace.is_some() {
        req.trace.mode = trace;
    }
    if args.target.is_some() {
        req.target = args.target;
    }
    if args.nodes.is_some() {
        req.nodes = args.nodes;
    }
    if args.stop_when.is_some() {
        req.stop_when = args.stop_when.clone();
    }
    if args.label.is_some() {
        req.label = args.label.clone();
    }
}
