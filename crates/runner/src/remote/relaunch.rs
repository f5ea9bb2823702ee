//! Starting a node on an observed host again as it was (`--fault …:restart:HOST`): before
//! iodig kills or stops a node it did not start, the same SSH command reads how the node was
//! started (command line, environment, working directory, user, cgroups, where its output
//! went); `restart` starts that again, detached from the SSH session, back in its cgroups so
//! the host's agent keeps counting its IO, and finds the new process by its command line.

use super::ssh::quote;

/// Shell lines that print the launch record of process `$pid`; `$s` is empty for root and
/// `sudo -n` otherwise, as another user's environment and working directory need it.
pub fn capture_script(pid: u32) -> String {
    let p = format!("/proc/{pid}");
    [
        format!("printf 'launch.cwd=%s\\n' \"$($s readlink {p}/cwd | base64 -w0)\""),
        format!("printf 'launch.cmdline=%s\\n' \"$(base64 -w0 < {p}/cmdline)\""),
        format!("printf 'launch.environ=%s\\n' \"$($s cat {p}/environ | base64 -w0)\""),
        format!("printf 'launch.uid=%s\\n' \"$(awk '/^Uid:/ {{print $2}}' {p}/status)\""),
        format!("printf 'launch.gid=%s\\n' \"$(awk '/^Gid:/ {{print $2}}' {p}/status)\""),
        format!("printf 'launch.cgroup=%s\\n' \"$(base64 -w0 < {p}/cgroup)\""),
        format!("printf 'launch.stdout=%s\\n' \"$($s readlink {p}/fd/1 | base64 -w0)\""),
    ]
    .join("; ")
}

/// How a node was started, as read from /proc before it went down.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// Its working directory.
    pub cwd: String,
    /// Its command line, argument by argument.
    pub argv: Vec<String>,
    /// Its environment, `NAME=value` each.
    pub env: Vec<String>,
    /// The user and group it ran as.
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
    /// Its cgroups as /proc/PID/cgroup lists them (`ID:CONTROLLERS:PATH`).
    pub cgroups: Vec<String>,
    /// Where its standard output went when that was a file, so the new one appends there.
    pub output: Option<String>,
}

impl Launch {
    /// Reads the record [`capture_script`] printed; None when any part is missing, as when the
    /// process was gone before it could be read.
    pub fn parse(printed: &str) -> Result<Launch, String> {
        let field = |name: &str| -> Result<Vec<u8>, String> {
            let prefix = format!("launch.{name}=");
            let line = printed
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .ok_or_else(|| format!("the node's {name} could not be read"))?;
            use base64::Engine as _;
            match name {
                "uid" | "gid" => Ok(line.trim().as_bytes().to_vec()),
                _ => base64::engine::general_purpose::STANDARD
                    .decode(line.trim())
                    .map_err(|e| format!("the node's {name} came back garbled: {e}")),
            }
        };
        let text = |name: &str| -> Result<String, String> {
            String::from_utf8(field(name)?)
                .map_err(|_| format!("the node's {name} is not UTF-8, so iodig cannot repeat it"))
        };
        let list = |name: &str| -> Result<Vec<String>, String> {
            Ok(text(name)?
                .split('\0')
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect())
        };
        let number = |name: &str| -> Result<u32, String> {
            text(name)?
                .parse()
                .map_err(|_| format!("the node's {name} could not be read"))
        };
        let argv = list("cmdline")?;
        if argv.is_empty() {
            return Err("the node's command line is empty (it had already exited)".into());
        }
        let cwd = text("cwd")?.trim_end().to_string();
        if cwd.is_empty() {
            return Err("the node's working directory could not be read".into());
        }
        let output = text("stdout")
            .ok()
            .map(|o| o.trim_end().to_string())
            .filter(|o| o.starts_with('/') && !o.starts_with("/dev/"));
        Ok(Launch {
            cwd,
            argv,
            env: list("environ")?,
            uid: number("uid")?,
            gid: number("gid")?,
            cgroups: text("cgroup")?.lines().map(str::to_string).collect(),
            output,
        })
    }

    /// The script (for `sh -s` on the host) that starts the node again and prints the new
    /// process's pid on a line `pid=N`. It refuses when a process with the same command line
    /// already runs (the host's own supervisor was quicker), so two nodes never share a data
    /// directory.
    pub fn restart_script(&self) -> String {
        let argv: Vec<String> = self.argv.iter().map(|a| quote(a)).collect();
        let env: Vec<String> = self.env.iter().map(|e| quote(e)).collect();
        let cgroup_dirs: Vec<String> = self.cgroup_dirs().iter().map(|d| quote(d)).collect();
        let exec = format!("exec env -i {} {}", env.join(" "), argv.join(" "));
        // The child joins the old cgroups (each hierarchy it was in, where the group still
        // exists), drops to the node's user, then becomes the node.
        let child = format!(
            "for d in {}; do [ -w \"$d/cgroup.procs\" ] && echo $$ > \"$d/cgroup.procs\"; done; {}",
            if cgroup_dirs.is_empty() {
                "''".to_string()
            } else {
                cgroup_dirs.join(" ")
            },
            if self.uid == 0 {
                exec
            } else {
                format!(
                    "if [ \"$(id -u)\" -ne {uid} ]; then exec setpriv --reuid={uid} --regid={gid} --clear-groups sh -c {inner}; else {exec}; fi",
                    uid = self.uid,
                    gid = self.gid,
                    inner = quote(&exec),
                )
            }
        );
        // Compared with `cmp` without `-s`: GNU cmp -s first compares sizes, and every file
        // under /proc says it is empty, so it never matched.
        let cmdline: String = self.argv.iter().map(|a| format!("{a}\0")).collect();
        use base64::Engine as _;
        let want = base64::engine::general_purpose::STANDARD.encode(cmdline.as_bytes());
        // Where the node's output went, or a file of its own, so a node that dies at once
        // leaves its reason somewhere the error can quote.
        let output = self
            .output
            .as_deref()
            .map_or("\"$(mktemp -t iodig-restart-XXXXXX.log)\"".into(), quote);
        format!(
            "set -u\n\
             if [ \"$(id -u)\" -eq 0 ]; then s=''; else s='sudo -n'; fi\n\
             want=$(mktemp) || exit 1\n\
             trap 'rm -f \"$want\"' EXIT\n\
             printf '%s' {want} | base64 -d > \"$want\"\n\
             same() {{ for p in /proc/[0-9]*; do cmp \"$p/cmdline\" \"$want\" >/dev/null 2>&1 && echo \"${{p#/proc/}}\"; done; }}\n\
             running=$(same)\n\
             if [ -n \"$running\" ]; then echo \"a process with the node's command line already runs (pid $running); not starting a second\" >&2; exit 1; fi\n\
             cd {cwd} || exit 1\n\
             out={output}\n\
             $s nohup setsid sh -c {child} </dev/null >>\"$out\" 2>&1 &\n\
             i=0\n\
             while [ $i -lt 100 ]; do pid=$(same); [ -n \"$pid\" ] && {{ echo \"pid=$pid\"; exit 0; }}; sleep 0.1; i=$((i+1)); done\n\
             echo \"the node did not start: no process with its command line after 10 s; the end of $out:\" >&2\n\
             tail -c 1500 \"$out\" >&2; exit 1\n",
            cwd = quote(&self.cwd),
            child = quote(&child),
        )
    }

    /// The cgroup directories the node was in, under /sys/fs/cgroup: the v2 group (in the
    /// unified tree, or `unified/` beside v1 on a hybrid host) and one per v1 hierarchy.
    fn cgroup_dirs(&self) -> Vec<String> {
        let mut dirs = Vec::new();
        for line in &self.cgroups {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if path == "/" {
                continue;
            }
            if id == "0" {
                dirs.push(format!("/sys/fs/cgroup{path}"));
                dirs.push(format!("/sys/fs/cgroup/unified{path}"));
            } else if let Some(c) = controllers.split(',').next().filter(|c| !c.is_empty()) {
                let c = c.strip_prefix("name=").unwrap_or(c);
                dirs.push(format!(
                    "/sys/fs/cgroup/{}{path}",
                    controllers_dir(controllers, c)
                ));
            }
        }
        dirs
    }
}

/// The directory a v1 hierarchy is mounted on: `cpu,cpuacct` has its own; a named one
/// (`name=systemd`) sits under its name.
fn controllers_dir(controllers: &str, first: &str) -> String {
    if controllers.starts_with("name=") {
        first.to_string()
    } else {
        controllers.to_string()
    }
}

/// The new node's pid from the restart script's output.
pub fn started_pid(printed: &str) -> Option<u32> {
    printed
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|p| p.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn printed() -> String {
        [
            format!("launch.cwd={}", b64("/var/lib/cassandra\n")),
            format!(
                "launch.cmdline={}",
                b64("java\0-Xmx1G\0-cp\0a b.jar\0org.apache.cassandra.service.CassandraDaemon\0")
            ),
            format!("launch.environ={}", b64("PATH=/usr/bin\0HOME=/root\0")),
            "launch.uid=0".into(),
            "launch.gid=0".into(),
            format!(
                "launch.cgroup={}",
                b64("12:blkio:/iodig/node1\n3:cpu,cpuacct:/\n1:name=systemd:/x\n0::/iodig/node1\n")
            ),
            format!("launch.stdout={}", b64("/tmp/node1/out.log\n")),
        ]
        .join("\n")
    }

    #[test]
    fn a_launch_record_is_read_back_whole() {
        let l = Launch::parse(&printed()).unwrap();
        assert_eq!(l.cwd, "/var/lib/cassandra");
        assert_eq!(l.argv.len(), 5);
        assert_eq!(l.argv[3], "a b.jar");
        assert_eq!(l.env, vec!["PATH=/usr/bin", "HOME=/root"]);
        assert_eq!(l.output.as_deref(), Some("/tmp/node1/out.log"));
        assert_eq!(
            l.cgroup_dirs(),
            vec![
                "/sys/fs/cgroup/blkio/iodig/node1",
                "/sys/fs/cgroup/systemd/x",
                "/sys/fs/cgroup/iodig/node1",
                "/sys/fs/cgroup/unified/iodig/node1",
            ]
        );
    }

    #[test]
    fn a_process_gone_before_it_was_read_is_said_so() {
        let gone = printed().replace(
            &format!(
                "launch.cmdline={}",
                b64("java\0-Xmx1G\0-cp\0a b.jar\0org.apache.cassandra.service.CassandraDaemon\0")
            ),
            "launch.cmdline=",
        );
        assert!(Launch::parse(&gone).unwrap_err().contains("already exited"));
        let no_cwd = printed().replace(&b64("/var/lib/cassandra\n"), "");
        assert!(Launch::parse(&no_cwd)
            .unwrap_err()
            .contains("working directory"));
    }

    #[test]
    fn the_restart_repeats_the_command_line_quoted_and_finds_the_new_pid() {
        let mut l = Launch::parse(&printed()).unwrap();
        let s = l.restart_script();
        assert!(s.contains("cd /var/lib/cassandra"), "{s}");
        assert!(s.contains("\\''a b.jar'\\''"), "{s}");
        assert!(s.contains("out=/tmp/node1/out.log"), "{s}");
        assert!(!s.contains("setpriv"), "root runs it as root: {s}");
        assert!(
            s.contains("cmp \"$p/cmdline\"") && !s.contains("cmp -s"),
            "/proc files say they are empty, which cmp -s takes as different: {s}"
        );
        l.uid = 999;
        l.gid = 998;
        assert!(l
            .restart_script()
            .contains("setpriv --reuid=999 --regid=998"));
        assert_eq!(started_pid("noise\npid=4321\n"), Some(4321));
        assert_eq!(started_pid("pid=\n"), None);
    }
}
