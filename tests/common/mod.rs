//! Helpers shared by the integration tests: run the real `iodig` binary and read what it wrote.

#![allow(dead_code)]

pub mod findings;
pub mod loopfs;
pub mod sshd;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Run {
    pub out: Output,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.out.status.code().unwrap_or(-1)
    }

    /// The run directory announced on stderr.
    pub fn run_dir(&self) -> PathBuf {
        let line = self
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("results: "))
            .unwrap_or_else(|| {
                panic!("no results line in stderr:\n{}", self.stderr);
            });
        PathBuf::from(line.trim())
    }

    pub fn run_json(&self) -> serde_json::Value {
        read_json(&self.run_dir().join("run.json"))
    }
}

/// Stops the managed Cassandra nodes of a directory even when an assertion fails.
pub struct Nodes<'a>(pub &'a Path);

impl Drop for Nodes<'_> {
    fn drop(&mut self) {
        let _ = iodig()
            .args([
                "cassandra",
                "down",
                "--grace",
                "20",
                "--dir",
                self.0.to_str().unwrap(),
            ])
            .output();
    }
}

pub fn iodig() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_iodig"));
    c.env("CI", "1");
    c
}

pub fn run_iodig(args: &[&str]) -> Run {
    let out = iodig().args(args).output().expect("iodig runs");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        out,
    }
}

/// `iodig run --db basic -P WORKLOAD …extra… --trace off --out OUT`: the no-op binding without
/// tracing, the argument list most CLI tests start from.
pub fn run_basic(workload: &str, out: &str, extra: &[&str]) -> Run {
    let mut args = vec!["run", "--db", "basic", "-P", workload];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--trace", "off", "--out", out]);
    run_iodig(&args)
}

pub fn read_json(path: &Path) -> serde_json::Value {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// Parses YCSB's summary lines the way scripts written for YCSB do:
/// `[METRIC], Measurement, value`.
pub fn parse_ycsb(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let close = l.find("], ").expect("metric closes with ], ");
            let metric = l[1..close].to_string();
            let rest = &l[close + 3..];
            let (name, value) = rest.rsplit_once(", ").expect("name, value");
            (metric, name.to_string(), value.to_string())
        })
        .collect()
}

pub fn ycsb_value(parsed: &[(String, String, String)], metric: &str, name: &str) -> Option<f64> {
    parsed
        .iter()
        .find(|(m, n, _)| m == metric && n == name)
        .map(|(_, _, v)| v.parse().unwrap())
}
