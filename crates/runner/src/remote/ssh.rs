//! Reaching another host with the user's own OpenSSH client: `host`, `user@host`, `host:port`
//! and `~/.ssh/config` aliases, keys and agent as the user has them, never a password prompt
//! (BatchMode). Puts this very iodig binary on the host when it has none that runs there, once
//! the host's architecture and glibc can run it (`floor`), or else the agent build when that
//! one can (`--observe`), and runs the copy once there first.

use super::floor::{self, HostProbe};
use anyhow::{bail, Context, Result};
use std::hash::Hasher;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// One `--observe` / `--clients` host as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshHost {
    /// As given (the name iodig shows and the directory name under `nodes/`).
    pub spec: String,
    /// `user@host` or `host` as ssh takes it.
    pub destination: String,
    /// The port of `host:port`; None leaves it to ssh (its config, else 22).
    pub port: Option<u16>,
    /// The flag that named it (`--observe`, `--clients`), for messages.
    pub flag: &'static str,
}

impl SshHost {
    /// `host`, `user@host`, `host:port`, `user@[v6]:port`; the message names the value and the
    /// forms that work.
    pub fn parse(spec: &str) -> Result<SshHost, String> {
        let bad = |why: &str| {
            format!(
                "{spec:?}: {why}; use HOST, USER@HOST, HOST:PORT or an alias from ~/.ssh/config"
            )
        };
        let s = spec.trim();
        if s.is_empty() {
            return Err(bad("empty host"));
        }
        if s.starts_with('-') || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("not a host name"));
        }
        let (user, rest) = match s.rsplit_once('@') {
            Some((u, r)) if !u.is_empty() && !r.is_empty() => (Some(u), r),
            Some(_) => return Err(bad("user or host missing around '@'")),
            None => (None, s),
        };
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("unclosed '[' of an IPv6 address"))?;
            match after.strip_prefix(':') {
                Some(p) => (h, Some(p)),
                None if after.is_empty() => (h, None),
                None => return Err(bad("text after ']'")),
            }
        } else if rest.matches(':').count() == 1 {
            let (h, p) = rest.split_once(':').expect("one colon");
            (h, Some(p))
        } else {
            (rest, None)
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let port = port
            .map(|p| p.parse::<u16>().ok().filter(|p| *p > 0))
            .map(|p| p.ok_or_else(|| bad("the port is not a number from 1 to 65535")))
            .transpose()?;
        Ok(SshHost {
            spec: s.to_string(),
            destination: match user {
                Some(u) => format!("{u}@{host}"),
                None => host.to_string(),
            },
            port,
            flag: "--observe",
        })
    }

    /// A name safe as one path component, for the host's directory in a step.
    pub fn dir_name(&self) -> String {
        self.spec
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-@".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

/// How iodig calls ssh.
#[derive(Debug, Clone, Default)]
pub struct Ssh {
    /// An ssh_config file to use instead of `~/.ssh/config` (`-p ssh.config=PATH`).
    pub config: Option<PathBuf>,
}

impl Ssh {
    /// `ssh [options] destination -- remote_command`, which never asks for a password, gives
    /// up on an unreachable host after 10 s and notices a dead link within 15 s.
    pub fn command(&self, host: &SshHost, remote_command: &str) -> Command {
        let mut c = Command::new("ssh");
        c.args([
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
            "-T",
        ]);
        if let Some(cfg) = &self.config {
            c.arg("-F").arg(cfg);
        }
        if let Some(p) = host.port {
            c.args(["-p", &p.to_string()]);
        }
        c.arg(&host.destination).arg("--").arg(remote_command);
        c
    }

    /// Runs a short remote command and returns its stdout; the error names the host and what
    /// ssh said, with the fix for the usual causes.
    pub fn output(
        &self,
        host: &SshHost,
        remote_command: &str,
        input: Option<&Path>,
    ) -> Result<String> {
        let mut cmd = self.command(host, remote_command);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(match input {
            Some(p) => Stdio::from(
                std::fs::File::open(p).with_context(|| format!("cannot read {}", p.display()))?,
            ),
            None => Stdio::null(),
        });
        let out = cmd.output().context(
            "cannot run `ssh`: install the OpenSSH client (apt-get install openssh-client)",
        )?;
        stdout_of(host, &out)
    }

    /// Runs `remote_command` on the host with `input` on its standard input (a script for
    /// `sh -s`, which no command-line length limit then cuts); its standard output.
    pub fn output_with_stdin(
        &self,
        host: &SshHost,
        remote_command: &str,
        input: &[u8],
    ) -> Result<String> {
        let mut cmd = self.command(host, remote_command);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().context(
            "cannot run `ssh`: install the OpenSSH client (apt-get install openssh-client)",
        )?;
        let mut stdin = child.stdin.take().expect("piped");
        let input = input.to_vec();
        // Written from a thread of its own: a script larger than the pipe would otherwise
        // wait for ssh to read it while ssh waits for its output to be read.
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().context("ssh did not finish")?;
        let _ = writer.join();
        stdout_of(host, &out)
    }

    /// The host name ssh would connect to for this host (aliases resolved by `ssh -G`).
    pub fn resolved_hostname(&self, host: &SshHost) -> Option<String> {
        let mut c = Command::new("ssh");
        c.arg("-G");
        if let Some(cfg) = &self.config {
            c.arg("-F").arg(cfg);
        }
        if let Some(p) = host.port {
            c.args(["-p", &p.to_string()]);
        }
        let out = c
            .arg(&host.destination)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("hostname ").map(str::to_string))
    }
}

/// One line saying why ssh failed, naming the host and the fix.
pub fn failure(host: &SshHost, stderr: &str) -> String {
    let said = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Warning: Permanently added"))
        .collect::<Vec<_>>()
        .join("; ");
    let fix = if said.contains("Permission denied") {
        "; give ssh a key it can use without a prompt (ssh-agent, IdentityFile in ~/.ssh/config)"
    } else if said.contains("Host key verification failed") {
        "; add the host to known_hosts first (ssh HOST once)"
    } else if said.contains("Could not resolve")
        || said.contains("timed out")
        || said.contains("refused")
    {
        "; check the name, the port and that sshd runs there"
    } else {
        ""
    };
    format!("{} {}: ssh failed: {said}{fix}", host.flag, host.spec)
}

/// The local binary and a name for its content, so a host keeps one copy per build.
pub fn local_binary() -> Result<&'static (PathBuf, String, u64)> {
    static BIN: OnceLock<std::result::Result<(PathBuf, String, u64), String>> = OnceLock::new();
    BIN.get_or_init(|| {
        let path =
            std::env::current_exe().map_err(|e| format!("cannot find iodig's own binary: {e}"))?;
        let (hash, len) = content_name(&path)?;
        Ok((path, hash, len))
    })
    .as_ref()
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// A name for a file's content and its length.
fn content_name(path: &Path) -> std::result::Result<(String, u64), String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
        len += n as u64;
    }
    Ok((format!("{:016x}", h.finish()), len))
}

/// The environment variable that names the agent build's path (empty: none).
pub const AGENT_ENV: &str = "IODIG_AGENT";

/// Where iodig looks for the agent build (`scripts/build-agent.sh` makes one): the file that
/// `IODIG_AGENT` names, else `iodig-agent` beside this binary. None when `IODIG_AGENT` is set
/// empty (no agent build) or this binary's directory is unknown.
pub fn agent_build_path() -> Option<PathBuf> {
    match std::env::var_os(AGENT_ENV) {
        Some(p) if p.is_empty() => None,
        Some(p) => Some(PathBuf::from(p)),
        None => Some(local_binary().ok()?.0.parent()?.join("iodig-agent")),
    }
}

/// The agent build found where iodig looks: its path, content name, length and what it is
/// built for (read from the file: its name proves nothing), or why it cannot be read.
pub struct AgentBuildFile {
    /// Its local path.
    pub path: PathBuf,
    /// Its content's name (as [`local_binary`]'s), or why it cannot be read.
    pub read: std::result::Result<(String, u64, super::elf::BinaryFacts), String>,
}

/// The agent build, read once for the run; None when there is no file where iodig looks.
pub fn agent_build() -> Option<&'static AgentBuildFile> {
    static AGENT: OnceLock<Option<AgentBuildFile>> = OnceLock::new();
    AGENT
        .get_or_init(|| {
            let path = agent_build_path()?;
            if !path.exists() {
                return None;
            }
            let read = super::elf::binary_facts(&path)
                .and_then(|facts| content_name(&path).map(|(hash, len)| (hash, len, facts)));
            Some(AgentBuildFile { path, read })
        })
        .as_ref()
}

/// What a host runs of iodig: `--observe` runs the agent, which the agent build can be;
/// `--clients` runs the whole client, which only iodig's own binary is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `iodig agent` (`--observe`).
    Agent,
    /// `iodig run` (`--clients`).
    Client,
}

/// This binary on a host, ready to run, and what the host said of itself on the way.
#[derive(Debug, Clone)]
pub struct Provisioned {
    /// The binary's path there, as the remote shell expands it.
    pub remote: String,
    /// What was done, for the record.
    pub how: String,
    /// The host's architecture, glibc, kernel and BTF.
    pub probe: HostProbe,
}

/// Makes sure the host has a binary that runs under `~/.cache/iodig/bin`: the one there when
/// it runs (a build made on that host's OS is used as is), else this one, sent after checking
/// that the host's architecture and glibc can run it, else (`Role::Agent`) the agent build when
/// its own architecture and glibc floor fit the host; the copy sent is run once there before
/// it is used.
pub fn provision(ssh: &Ssh, host: &SshHost, role: Role) -> Result<Provisioned> {
    let (path, hash, len) = local_binary()?;
    let remote = remote_path(hash);
    let label = format!("{} {}", host.flag, host.spec);
    let agent = match role {
        Role::Agent => agent_build(),
        Role::Client => None,
    };
    // The agent build's copy on the host is asked about in the same probe.
    let agent_read = agent.and_then(|a| a.read.as_ref().ok());
    let agent_remote = agent_read.map(|(h, ..)| remote_path(h));
    let probe = HostProbe::parse(&ssh.output(
        host,
        &floor::probe_script(&remote, agent_remote.as_deref()),
        None,
    )?);
    if probe.binary == Some(Ok(())) {
        let how = format!("iodig {hash} already on the host");
        return Ok(Provisioned { remote, how, probe });
    }
    let own_floor = match super::elf::own_glibc_floor() {
        Ok(f) => f.as_ref(),
        Err(e) => {
            // Not knowing the floor is no reason to refuse: the first run there still tells.
            iodig_model::eprintln_lossy!("warning: cannot read this iodig's glibc floor: {e}");
            None
        }
    };
    let looked_at = agent_build_path().map(|p| p.display().to_string());
    let agent_path = agent.map(|a| a.path.display().to_string());
    let candidate = match (role, agent, &agent_path, &looked_at) {
        (Role::Client, ..) => floor::AgentBuild::NotApplicable,
        (_, Some(a), Some(path), _) => floor::AgentBuild::Found {
            path,
            facts: a.read.as_ref().map(|(.., f)| f).map_err(String::as_str),
        },
        (_, _, _, Some(path)) => floor::AgentBuild::Missing { path },
        // IODIG_AGENT set empty: the fix names where iodig would look by default, which
        // it does only once the variable is unset.
        _ => floor::AgentBuild::Missing {
            path: "iodig-agent beside this iodig (with IODIG_AGENT unset: set empty, it turns the agent build off)",
        },
    };
    match floor::choose(
        &label,
        &remote,
        &probe,
        std::env::consts::ARCH,
        own_floor,
        &candidate,
    ) {
        floor::Choice::Refuse(why) => bail!("{why}"),
        floor::Choice::Own => {
            iodig_model::eprintln_lossy!(
                "note: sending iodig ({:.1} MB) to {} (~/.cache/iodig/bin)",
                *len as f64 / 1e6,
                host.spec
            );
            send(ssh, host, &probe, (path, &remote), "iodig", &remote)?;
            Ok(Provisioned {
                remote,
                how: format!("iodig {hash} sent ({len} bytes)"),
                probe,
            })
        }
        floor::Choice::AgentBuild { why } => {
            let (Some(a), Some((a_hash, a_len, facts)), Some(a_remote)) =
                (agent, agent_read, agent_remote)
            else {
                bail!("{label}: the agent build was chosen but cannot be read");
            };
            let needs = facts.floor.as_ref().map_or_else(
                || "no versioned glibc".to_string(),
                |f| format!("glibc {}", f.version),
            );
            // One line either way: the host gets another binary than this one, and why.
            if probe.agent_binary == Some(Ok(())) {
                iodig_model::eprintln_lossy!(
                    "note: {} {why}: using the agent build already there ({a_remote}, needs {needs})",
                    host.spec
                );
                return Ok(Provisioned {
                    remote: a_remote,
                    how: format!("iodig agent build {a_hash} already on the host (needs {needs})"),
                    probe,
                });
            }
            iodig_model::eprintln_lossy!(
                "note: {} {why}: sending the agent build {} instead ({:.1} MB, needs {needs}; ~/.cache/iodig/bin)",
                host.spec,
                a.path.display(),
                *a_len as f64 / 1e6
            );
            send(
                ssh,
                host,
                &probe,
                (&a.path, &a_remote),
                "the agent build",
                &remote,
            )?;
            Ok(Provisioned {
                remote: a_remote,
                how: format!("iodig agent build {a_hash} sent ({a_len} bytes, needs {needs})"),
                probe,
            })
        }
    }
}

/// Where a binary of content `hash` is kept on a host, as its shell expands it.
fn remote_path(hash: &str) -> String {
    format!("$HOME/.cache/iodig/bin/iodig-{hash}")
}

/// Puts `local` at `remote` on the host and runs it once there: a library missing there or too
/// old (libstdc++, OpenSSL, a glibc the probe could not read) is the dynamic loader's own
/// words now, not a silent agent later. A copy that cannot run is removed, since it would only
/// be sent again. `what` names it in the error (`iodig`, `the agent build`), and the fix names
/// `host_build_at`, the path where iodig picks up a build made on the host (its own binary's).
fn send(
    ssh: &Ssh,
    host: &SshHost,
    probe: &HostProbe,
    (local, remote): (&Path, &str),
    what: &str,
    host_build_at: &str,
) -> Result<()> {
    let ran = ssh.output(
        host,
        &format!(
            "mkdir -p \"$HOME/.cache/iodig/bin\" && cat > \"{remote}.tmp\" && chmod 755 \"{remote}.tmp\" && mv \"{remote}.tmp\" \"{remote}\" && if e=$(\"{remote}\" --version 2>&1); then echo runs; else rm -f \"{remote}\"; printf 'fails %s\\n' \"$(printf '%s\\n' \"$e\" | head -n 1)\"; fi"
        ),
        Some(local),
    )?;
    if let Some(said) = ran.trim().strip_prefix("fails") {
        bail!(
            "{} {}: {what} does not run on the host ({}): {}; build iodig on that host's OS and put it at {host_build_at} there: iodig runs the build it finds there instead of sending this one",
            host.flag,
            host.spec,
            host_os(probe),
            said.trim()
        );
    }
    Ok(())
}

/// The host as the probe saw it, for messages: `x86_64, glibc 2.28, kernel 4.18.0-425.el8`.
fn host_os(p: &HostProbe) -> String {
    let glibc = p
        .glibc
        .as_ref()
        .map_or_else(|| "no glibc named".to_string(), |g| format!("glibc {g}"));
    format!("{}, {glibc}, kernel {}", p.arch, p.kernel)
}

/// A finished ssh's standard output, or its failure named with the host and the fix.
fn stdout_of(host: &SshHost, out: &std::process::Output) -> Result<String> {
    if !out.status.success() {
        bail!("{}", failure(host, &String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Quotes one argument for the remote POSIX shell.
pub fn quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@".contains(c))
    {
        return arg.to_string();
    }
    format!("'{}'", arg.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_forms_that_work() {
        let h = SshHost::parse("db1").unwrap();
        assert_eq!((h.destination.as_str(), h.port), ("db1", None));
        let h = SshHost::parse("root@127.0.0.2:2222").unwrap();
        assert_eq!(
            (h.destination.as_str(), h.port),
            ("root@127.0.0.2", Some(2222))
        );
        let h = SshHost::parse("[::1]:22").unwrap();
        assert_eq!((h.destination.as_str(), h.port), ("::1", Some(22)));
        let h = SshHost::parse("fe80::1").unwrap();
        assert_eq!((h.destination.as_str(), h.port), ("fe80::1", None));
        assert_eq!(SshHost::parse("u@h:22").unwrap().dir_name(), "u@h_22");
    }

    #[test]
    fn bad_hosts_are_named() {
        for bad in [
            "",
            "-oProxyCommand=x",
            "a b",
            "@h",
            "u@",
            "h:0",
            "h:99999",
            "h:x",
            "[::1",
        ] {
            let e = SshHost::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{:?}", bad.trim())), "{bad}: {e}");
        }
    }

    #[test]
    fn quoting_keeps_arguments_whole() {
        assert_eq!(quote("/var/tmp/x"), "/var/tmp/x");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn ssh_failures_name_the_host_and_the_fix() {
        let h = SshHost::parse("db9").unwrap();
        let m = failure(&h, "root@db9: Permission denied (publickey).\n");
        assert!(m.starts_with("--observe db9: ssh failed"), "{m}");
        assert!(m.contains("ssh-agent"), "{m}");
    }
}
