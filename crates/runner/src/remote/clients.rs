//! `run --clients HOST,…`: one iodig client per host over the user's OpenSSH, each with
//! `--client I/N`, its own seed and one common `--start-at`; their run directories come back
//! as tar streams over the same ssh and are merged exactly into the local `--out`.
//!
//! The clients get the local command's flags, and the property and experiment files it named
//! are sent with it (the files, not their resolved properties: each client resolves them as a
//! client started by hand would, with its own `--client` slice). Every host is reached, sent
//! iodig and the files before the start time is chosen, so an unreachable host fails the run
//! before anything starts (exit 2). A client that fails mid-run is left out of the merge, which
//! says which and why; the others' results are kept. With `--observe`, client 1 observes the
//! database's hosts (over SSH from its own host); the merged run keeps what it observed.

use super::ssh::{self, quote, Ssh, SshHost};
use crate::errors::UsageError;
use crate::merge::{merge_clients, ClientRun};
use crate::utc::format_utc;
use crate::utc::unix_ms;
use anyhow::{anyhow, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Time a client needs between being started and its first step (starting the process,
/// resolving the plan, opening the binding), on top of what reaching the hosts took.
const STARTUP_LEAD: Duration = Duration::from_secs(4);
/// Where a client works on its host: its staged files, its runs and an embedded database's
/// data (kept between runs, one directory per client number, so a dataset is loaded once).
const REMOTE_HOME: &str = "$HOME/.cache/iodig/clients";

/// A file the clients need, sent to each host beside the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedFile {
    /// Path relative to the client's working directory, as the client's arguments name it.
    pub rel: String,
    /// The file's bytes as read on this machine.
    pub content: Vec<u8>,
}

/// What `run --clients` starts.
pub struct ClientsRun {
    /// One client per host, client I on the I-th (`--clients`).
    pub hosts: Vec<SshHost>,
    /// How ssh is called (`ssh.config`).
    pub ssh: Ssh,
    /// The client's `run`/`load` arguments, without `--client`, `--start-at`, `--seed`, `--out`.
    pub args: Vec<String>,
    /// What client 1 alone gets besides: `--observe` (one client observes the database's
    /// hosts, from its own host; several would trace the same IO several times).
    pub first_client_args: Vec<String>,
    /// The property, workload and experiment files the arguments name, sent to every host.
    pub files: Vec<StagedFile>,
    /// Client I gets seed + I − 1, so clients draw different operations, reproducibly.
    pub seed: u64,
    /// The common start the user gave; otherwise one is chosen once every host is ready.
    pub start_at: Option<SystemTime>,
    /// Where the merged run directory goes.
    pub out: PathBuf,
}

/// How the clients ended.
pub struct ClientsOutcome {
    /// The merged run directory under `out`; each client's own run is in its `clients/<i>/`.
    pub merged: PathBuf,
    /// `client I (HOST): why`, for each client left out of the merge.
    pub failed: Vec<String>,
    /// Ctrl-C or SIGTERM came while clients ran; each was asked to end its step.
    pub interrupted: bool,
}

/// A host made ready: iodig is there and the files are staged.
struct Ready {
    host: SshHost,
    bin: String,
    /// The slowest single ssh command to it, to judge how far ahead to start.
    slowest: Duration,
}

/// One client while it runs and after.
struct Client {
    index: u64,
    host: SshHost,
    child: Child,
    /// Its process id on the host, once announced (to stop it on Ctrl-C).
    pid: Arc<Mutex<Option<u32>>>,
    /// Its run directory as it announced it (relative to its working directory).
    run_dir: Arc<Mutex<Option<String>>>,
    /// The last lines it wrote on stderr, for the reason it failed.
    said: Arc<Mutex<Vec<String>>>,
    status: Option<std::process::ExitStatus>,
}

/// Per-run name of the staging directory on the hosts (several runs may share a host).
fn stage_name() -> String {
    format!(
        "stage-{}-{}",
        std::process::id(),
        unix_ms(SystemTime::now())
    )
}

/// The client's working directory on its host, as the remote shell expands it.
fn remote_dir(index: u64) -> String {
    format!("{REMOTE_HOME}/{index}")
}

/// Starts the clients, waits for them, fetches and merges their runs.
pub fn run_clients(run: &ClientsRun, stop: &AtomicBool) -> Result<ClientsOutcome> {
    let n = run.hosts.len() as u64;
    let stage = stage_name();
    let mut ready = Vec::new();
    for (host, index) in run.hosts.iter().zip(1..) {
        ready.push(prepare(run, host, index, &stage).map_err(|e| UsageError(format!("{e:#}")))?);
    }
    let slowest = ready.iter().map(|r| r.slowest).max().unwrap_or_default();
    let start_at = match run.start_at {
        Some(t) => {
            if t < SystemTime::now() + slowest * 2 + Duration::from_secs(1) {
                return Err(UsageError(format!(
                    "--start-at {}: too soon to start the clients (reaching the slowest host takes {:.1} s); give a later time, or leave --start-at out and iodig picks one",
                    format_utc(t),
                    slowest.as_secs_f64()
                ))
                .into());
            }
            t
        }
        None => {
            let t = SystemTime::now() + STARTUP_LEAD + slowest * 3;
            // A whole second: easy to read in messages and in every client's command line.
            let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() + 1;
            UNIX_EPOCH + Duration::from_secs(secs)
        }
    };
    iodig_model::eprintln_lossy!(
        "clients: {n} on {}; common start {}",
        run.hosts
            .iter()
            .map(|h| h.spec.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        format_utc(start_at)
    );
    let mut clients = Vec::new();
    for (r, index) in ready.iter().zip(1..) {
        clients.push(launch(run, r, index, n, start_at, &stage)?);
    }
    let interrupted = wait_all(run, &mut clients, stop);
    collect(run, clients, start_at, interrupted)
}

/// Reaches one host: sends iodig when it has none, stages the files, measures a round trip.
fn prepare(run: &ClientsRun, host: &SshHost, index: u64, stage: &str) -> Result<Ready> {
    let began = Instant::now();
    let ssh::Provisioned {
        remote: bin, how, ..
    } = ssh::provision(&run.ssh, host, ssh::Role::Client)?;
    let mut slowest = began.elapsed();
    let dir = format!("{}/{stage}", remote_dir(index));
    for f in &run.files {
        let target = format!("{dir}/{}", f.rel);
        let parent = target.rsplit_once('/').map_or(dir.as_str(), |(p, _)| p);
        let began = Instant::now();
        send_bytes(
            &run.ssh,
            host,
            &format!("mkdir -p \"{parent}\" && cat > \"{target}\""),
            &f.content,
        )?;
        slowest = slowest.max(began.elapsed());
    }
    if run.files.is_empty() {
        run.ssh.output(host, &format!("mkdir -p \"{dir}\""), None)?;
    }
    let began = Instant::now();
    let date = run.ssh.output(host, "date +%s%N", None)?;
    let rtt = began.elapsed();
    slowest = slowest.max(rtt);
    check_clock(host, &date, began, rtt);
    iodig_model::eprintln_lossy!("clients: {} ready ({how})", host.spec);
    Ok(Ready {
        host: host.clone(),
        bin,
        slowest,
    })
}

/// `--start-at` is read by each host's own clock: a host whose clock is clearly off (more than
/// the ssh round trip can explain, plus half a second) would start apart from the others.
fn check_clock(host: &SshHost, date: &str, sent: Instant, rtt: Duration) {
    let Ok(remote_ns) = date.trim().parse::<u128>() else {
        return;
    };
    let local_ns = (SystemTime::now() - (Instant::now() - sent) + rtt / 2)
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let off_ms = (remote_ns as f64 - local_ns as f64) / 1e6;
    if off_ms.abs() > rtt.as_secs_f64() * 1000.0 + 500.0 {
        iodig_model::eprintln_lossy!(
            "warning: --clients {}: its clock is {off_ms:+.0} ms off this machine's; the clients start by their own clocks, so synchronise them (NTP, chrony) or its steps run apart",
            host.spec
        );
    }
}

/// Runs a remote command with `bytes` on its stdin.
fn send_bytes(ssh: &Ssh, host: &SshHost, command: &str, bytes: &[u8]) -> Result<()> {
    let mut child = ssh
        .command(host, command)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run `ssh`")?;
    if let Some(mut stdin) = child.stdin.take() {
        // A failed write shows as the command's failure below.
        let _ = stdin.write_all(bytes);
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(anyhow!(
            "{}",
            ssh::failure(host, &String::from_utf8_lossy(&out.stderr))
        ));
    }
    Ok(())
}

/// Starts client `index` of `n` on its host.
fn launch(
    run: &ClientsRun,
    r: &Ready,
    index: u64,
    n: u64,
    start_at: SystemTime,
    stage: &str,
) -> Result<Client> {
    let start = start_at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut args = run.args.clone();
    if index == 1 {
        args.extend(run.first_client_args.iter().cloned());
    }
    args.extend([
        "--client".into(),
        format!("{index}/{n}"),
        "--start-at".into(),
        format!("{}.{:03}", start.as_secs(), start.subsec_millis()),
        "--seed".into(),
        run.seed.wrapping_add(index - 1).to_string(),
        "--out".into(),
        "../runs".into(),
    ]);
    let args = args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
    let dir = remote_dir(index);
    // Root runs it as is, else password-less sudo when there is one (for eBPF), else the user
    // (the client then falls back to diskstats and says so). Its pid is announced so a Ctrl-C
    // here can end its step cleanly there; the staged files go when it ends.
    let script = format!(
        "b=\"{bin}\"; cd \"{dir}/{stage}\" || exit 1; \
         if [ \"$(id -u)\" -eq 0 ]; then \"$b\" {args} & \
         elif sudo -n true 2>/dev/null; then sudo -n \"$b\" {args} & \
         else \"$b\" {args} & fi; \
         p=$!; echo \"iodig-client-pid $p\"; wait $p; rc=$?; cd .. && rm -rf \"{stage}\"; exit $rc",
        bin = r.bin
    );
    let mut cmd = run.ssh.command(&r.host, &script);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group: the terminal's Ctrl-C reaches iodig here, which asks each client
    // to end its step, instead of killing the ssh connections mid-step.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().context("cannot run `ssh`")?;
    let pid = Arc::new(Mutex::new(None));
    let run_dir = Arc::new(Mutex::new(None));
    let said = Arc::new(Mutex::new(Vec::new()));
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    {
        let pid = Arc::clone(&pid);
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(p) = l.strip_prefix("iodig-client-pid ") {
                    *pid.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = p.trim().parse().ok();
                }
            }
        });
    }
    {
        let (run_dir, said) = (Arc::clone(&run_dir), Arc::clone(&said));
        let prefix = format!("[client {index} {}]", r.host.spec);
        std::thread::spawn(move || {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(d) = l.strip_prefix("run directory: ") {
                    *run_dir
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(d.to_string());
                }
                if l.trim().is_empty() {
                    continue;
                }
                iodig_model::eprintln_lossy!("{prefix} {l}");
                let mut s = said
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                s.push(l);
                if s.len() > 20 {
                    s.remove(0);
                }
            }
        });
    }
    Ok(Client {
        index,
        host: r.host.clone(),
        child,
        pid,
        run_dir,
        said,
        status: None,
    })
}

/// Waits for every client; on Ctrl-C asks each to end its step (SIGTERM, which iodig takes as
/// it takes Ctrl-C). Returns whether the run was interrupted.
fn wait_all(run: &ClientsRun, clients: &mut [Client], stop: &AtomicBool) -> bool {
    let mut stopping = false;
    loop {
        let mut running = false;
        for c in clients.iter_mut() {
            if c.status.is_none() {
                match c.child.try_wait() {
                    Ok(Some(s)) => c.status = Some(s),
                    Ok(None) => running = true,
                    // A client that can no longer be waited for did not finish: counted
                    // failed, with ssh's own exit code for a lost connection.
                    Err(_) => {
                        use std::os::unix::process::ExitStatusExt;
                        c.status = Some(std::process::ExitStatus::from_raw(255 << 8));
                    }
                }
            }
        }
        if !running {
            return stopping;
        }
        if stop.load(Ordering::Relaxed) && !stopping {
            stopping = true;
            for c in clients.iter().filter(|c| c.status.is_none()) {
                let pid = *c
                    .pid
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(pid) = pid {
                    iodig_model::eprintln_lossy!(
                        "clients: asking client {} ({}) to end its step",
                        c.index,
                        c.host.spec
                    );
                    let _ = run.ssh.output(&c.host, &format!("kill -TERM {pid}"), None);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Fetches every client's run directory, merges those that finished and keeps every fetched
/// run whole under the merged run's `clients/<i>/`.
fn collect(
    run: &ClientsRun,
    clients: Vec<Client>,
    start_at: SystemTime,
    interrupted: bool,
) -> Result<ClientsOutcome> {
    let staging = run.out.join(format!(".{}", stage_name()));
    std::fs::create_dir_all(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))?;
    let mut merged_from = Vec::new();
    let mut fetched = Vec::new();
    let mut failed = Vec::new();
    for c in &clients {
        let code = c.status.and_then(|s| s.code());
        let announced = c
            .run_dir
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let said = c
            .said
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let name = announced
            .as_deref()
            .and_then(|d| Path::new(d).file_name())
            .map(|n| n.to_string_lossy().into_owned());
        let local = match &name {
            Some(name) => fetch(run, c, name, &staging).map_err(|e| format!("{e:#}")),
            None => Err("it wrote no run directory".to_string()),
        };
        // 130: it ended its step on Ctrl-C, as asked; its run is whole up to there.
        let finished = code == Some(0) || (interrupted && code == Some(130));
        match (finished, local) {
            (true, Ok(dir)) => {
                merged_from.push(ClientRun {
                    dir: dir.clone(),
                    client: c.index,
                    host: Some(c.host.spec.clone()),
                    name: format!("clients/{}", c.index),
                });
                fetched.push((c.index, dir));
            }
            (finished, local) => {
                let why = if finished {
                    format!(
                        "its run directory could not be fetched: {}",
                        local.as_ref().err().map_or("", String::as_str)
                    )
                } else {
                    failure_reason(code, &said)
                };
                let reason = format!("client {} ({}) failed: {why}", c.index, c.host.spec);
                iodig_model::eprintln_lossy!("warning: {reason}; the merge leaves it out");
                failed.push(reason);
                if let Ok(dir) = local {
                    fetched.push((c.index, dir));
                }
            }
        }
    }
    if merged_from.is_empty() {
        return Err(anyhow!(
            "no client finished: {}{}",
            failed.join("; "),
            if fetched.is_empty() {
                String::new()
            } else {
                format!(" (what came back is in {})", staging.display())
            }
        ));
    }
    let mut notes = vec![format!(
        "run by {} clients started over ssh with --clients, common start {} (--start-at); each client's own run directory is in clients/<i>/",
        clients.len(),
        format_utc(start_at)
    )];
    notes.extend(failed.iter().map(|f| format!("{f}; left out of the merge")));
    let merged = merge_clients(&merged_from, &run.out, notes).with_context(|| {
        format!(
            "cannot merge the clients' runs (they are in {})",
            staging.display()
        )
    })?;
    let keep = merged.join("clients");
    std::fs::create_dir_all(&keep)?;
    for (index, dir) in fetched {
        let to = keep.join(index.to_string());
        std::fs::rename(&dir, &to)
            .with_context(|| format!("cannot move {} to {}", dir.display(), to.display()))?;
    }
    let _ = std::fs::remove_dir_all(&staging);
    Ok(ClientsOutcome {
        merged,
        failed,
        interrupted,
    })
}

/// Why a client failed, from its exit status and last words.
fn failure_reason(code: Option<i32>, said: &[String]) -> String {
    let last = said
        .iter()
        .rev()
        .find(|l| l.starts_with("error:") || l.contains("ssh") || l.contains("warning:"))
        .or(said.last())
        .map_or("it said nothing".to_string(), |l| l.trim().to_string());
    match code {
        Some(255) => format!("the ssh connection failed or was lost: {last}"),
        Some(c) => format!("exit code {c}: {last}"),
        None => format!("ssh was killed: {last}"),
    }
}

/// Streams a client's run directory back as tar over ssh into `staging/<i>/`; removes it from
/// the host once it is here.
fn fetch(run: &ClientsRun, c: &Client, name: &str, staging: &Path) -> Result<PathBuf> {
    let dest = staging.join(c.index.to_string());
    std::fs::create_dir_all(&dest)?;
    let runs = format!("{}/runs", remote_dir(c.index));
    let mut ssh = run
        .ssh
        .command(
            &c.host,
            &format!("cd \"{runs}\" && tar -cf - {}", quote(name)),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run `ssh`")?;
    let tar = Command::new("tar")
        .arg("-C")
        .arg(&dest)
        .args(["-xf", "-"])
        .stdin(ssh.stdout.take().expect("piped"))
        .stderr(Stdio::piped())
        .output()
        .context("cannot run `tar` to unpack the client's run")?;
    let sent = ssh.wait_with_output()?;
    if !sent.status.success() {
        return Err(anyhow!(
            "{}",
            ssh::failure(&c.host, &String::from_utf8_lossy(&sent.stderr))
        ));
    }
    if !tar.status.success() {
        return Err(anyhow!(
            "tar: {}",
            String::from_utf8_lossy(&tar.stderr).trim()
        ));
    }
    let dir = dest.join(name);
    if !dir.join(iodig_model::files::RUN).is_file() {
        return Err(anyhow!("{} came back without run.json", dir.display()));
    }
    let _ = run.ssh.output(
        &c.host,
        &format!("cd \"{runs}\" && rm -rf {}", quote(name)),
        None,
    );
    Ok(dir)
}

/// An experiment file for the clients: the same settings, its workload files staged beside it
/// (`w<k>/<name>`, keeping their names, which label the steps), and no `clients` list of its
/// own. Returns the staged files, the experiment file last.
pub fn stage_experiment(path: &Path, rel: &str) -> Result<Vec<StagedFile>> {
    let file = crate::experiment_file::ExperimentFile::read(path)?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut table: toml::Table = toml::from_str(&text)
        .map_err(|e| UsageError(format!("{}: {}", path.display(), e.message())))?;
    table.remove("clients");
    let mut staged = Vec::new();
    if let Some(toml::Value::Array(entries)) = table.get_mut("workload") {
        for (k, (entry, resolved)) in entries.iter_mut().zip(&file.workloads).enumerate() {
            let local = Path::new(&resolved.file);
            if !local.is_file() {
                // A built-in workload name: the client has its own copy.
                continue;
            }
            let name = local
                .file_name()
                .map_or("workload".into(), |n| n.to_string_lossy().into_owned());
            let rel_file = format!("w{k}/{name}");
            staged.push(StagedFile {
                rel: rel_file.clone(),
                content: std::fs::read(local)
                    .with_context(|| format!("cannot read {}", local.display()))?,
            });
            if let Some(t) = entry.as_table_mut() {
                t.insert("file".into(), toml::Value::String(rel_file));
            }
        }
    }
    staged.push(StagedFile {
        rel: rel.to_string(),
        content: toml::to_string(&table)?.into_bytes(),
    });
    Ok(staged)
}
