//! One builder for the `iodig run` / `iodig load` command lines of the tests, so that each test
//! says what its run is (binding, workload, properties, threads, timing, tracing, output)
//! instead of spelling the argument list out flag by flag.

use super::Run;
use std::path::Path;
use std::process::Command;

/// An iodig command line for a test, built by meaning rather than flag by flag.
///
/// Each call adds its flag at the end, as given: nothing is replaced or deduplicated, so a flag
/// called twice is passed twice (`-p` twice with one name: the later wins, as in iodig).
#[derive(Debug)]
pub struct IodigArgs(Vec<String>);

impl IodigArgs {
    /// `iodig run`.
    pub fn run() -> Self {
        Self(vec!["run".into()])
    }

    /// `iodig load`.
    pub fn load() -> Self {
        Self(vec!["load".into()])
    }

    /// `run --db basic -P WORKLOAD --trace off --out OUT`: the no-op binding, untraced, the
    /// command line most CLI tests start from.
    pub fn run_basic(workload: &str, out: impl AsRef<Path>) -> Self {
        Self::run()
            .db("basic")
            .workload(workload)
            .trace("off")
            .out(out)
    }

    /// Any command line exactly as written.
    pub fn verbatim(args: &[&str]) -> Self {
        Self(args.iter().map(ToString::to_string).collect())
    }

    /// An experiment file (the positional `EXPERIMENT.toml`).
    pub fn experiment(self, file: impl AsRef<Path>) -> Self {
        self.arg(path_str(file.as_ref()))
    }

    /// `--db NAME`.
    pub fn db(self, db: &str) -> Self {
        self.args(&["--db", db])
    }

    /// `-P FILE`: a workload property file (or a built-in name such as `workloada`).
    pub fn workload(self, workload: impl AsRef<Path>) -> Self {
        self.args(&["-P", path_str(workload.as_ref())])
    }

    /// `-p NAME=VALUE`.
    pub fn p(self, property: impl AsRef<str>) -> Self {
        self.args(&["-p", property.as_ref()])
    }

    /// `-p NAME=VALUE` for each property, in order.
    pub fn props(self, properties: &[&str]) -> Self {
        properties.iter().fold(self, Self::p)
    }

    /// `--threads N[,N…]`.
    pub fn threads(self, threads: &str) -> Self {
        self.args(&["--threads", threads])
    }

    /// `--duration TIME`.
    pub fn duration(self, duration: &str) -> Self {
        self.args(&["--duration", duration])
    }

    /// `--warmup TIME`.
    pub fn warmup(self, warmup: &str) -> Self {
        self.args(&["--warmup", warmup])
    }

    /// `--target OPS`.
    pub fn target(self, ops_per_sec: &str) -> Self {
        self.args(&["--target", ops_per_sec])
    }

    /// `--trace MODE`.
    pub fn trace(self, mode: &str) -> Self {
        self.args(&["--trace", mode])
    }

    /// `--fault AT:ACTION:TARGET`.
    pub fn fault(self, fault: &str) -> Self {
        self.args(&["--fault", fault])
    }

    /// `--observe HOST[,HOST…]`.
    pub fn observe(self, hosts: &str) -> Self {
        self.args(&["--observe", hosts])
    }

    /// `--nodes N`.
    pub fn nodes(self, nodes: &str) -> Self {
        self.args(&["--nodes", nodes])
    }

    /// `--no-load`.
    pub fn no_load(self) -> Self {
        self.arg("--no-load")
    }

    /// `--verify`.
    pub fn verify(self) -> Self {
        self.arg("--verify")
    }

    /// `--out DIR`.
    pub fn out(self, dir: impl AsRef<Path>) -> Self {
        let dir = path_str(dir.as_ref()).to_string();
        self.args(&["--out", &dir])
    }

    /// One argument, verbatim.
    pub fn arg(mut self, arg: impl AsRef<str>) -> Self {
        self.0.push(arg.as_ref().to_string());
        self
    }

    /// Arguments, verbatim and in order.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.0.extend(args.iter().map(ToString::to_string));
        self
    }

    /// The argument list.
    pub fn list(&self) -> &[String] {
        &self.0
    }

    /// `iodig` with these arguments, to spawn (and signal) or to give an environment.
    pub fn command(&self) -> Command {
        let mut c = super::iodig();
        c.args(&self.0);
        c
    }

    /// Runs iodig with these arguments to its end.
    pub fn output(&self) -> Run {
        Run::of(self.command().output().expect("iodig runs"))
    }

    /// Runs iodig and checks it exited 2 with a one-line error holding every needle.
    pub fn usage_error(&self, needles: &[&str]) -> Run {
        let args = &self.0;
        let r = self.output();
        assert_eq!(r.code(), 2, "args {args:?}\nstderr: {}", r.stderr);
        let err_line = r
            .stderr
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or_else(|| panic!("no error line: {}", r.stderr));
        for n in needles {
            assert!(r.stderr.contains(n), "{n:?} not in: {}", r.stderr);
        }
        assert!(err_line.len() < 400, "error is not one line: {err_line}");
        r
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str()
        .unwrap_or_else(|| panic!("not UTF-8: {}", path.display()))
}
