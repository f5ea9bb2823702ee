//! `run --clients` over a real OpenSSH server on two loopback addresses: two iodig clients on
//! the no-op binding start their steps together at one common time, come back over ssh and
//! merge to exactly the sum of their operations; with `--observe`, client 1 alone observes the
//! database's hosts and the merge keeps it; bad values are refused before anything starts.

mod common;

use common::sshd::Sshd;
use common::{read_json, run_step, IodigArgs};
use serde_json::Value;
use std::path::Path;

/// The tests that start clients run one at a time: clients share their working directories on
/// a host (one per client number), and the death test kills client 2 by what it runs.
static CLIENTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    CLIENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The value after `flag` in a run's recorded command line.
fn flag_value(run: &Value, flag: &str) -> String {
    let line: Vec<&str> = run["tool"]["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = line.iter().position(|a| *a == flag).unwrap();
    line[at + 1].to_string()
}

#[test]
fn two_clients_over_ssh_start_together_and_merge_to_the_sum_of_their_operations() {
    let _one = one_at_a_time();
    let sshd = Sshd::start(&["127.0.0.1", "127.0.0.2"]);
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    // A property file given by path: it must travel to the clients, under its own name.
    let workload = tmp.path().join("mixed");
    std::fs::write(
        &workload,
        "recordcount=1000\noperationcount=0\nreadproportion=0.8\nupdateproportion=0.2\n\
         requestdistribution=uniform\n",
    )
    .unwrap();
    let out = tmp.path().join("runs");
    let r = IodigArgs::run()
        .db("basic")
        .workload(&workload)
        .p(sshd.property())
        .threads("1,2")
        .duration("2s")
        .warmup("0s")
        .target("300")
        .trace("off")
        .args(&["--clients", "127.0.0.1,127.0.0.2"])
        .out(&out)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let merged_dir = r.run_dir();
    let merged = r.run_json();
    let clients: Vec<Value> = (1..=2)
        .map(|i| read_json(&merged_dir.join(format!("clients/{i}/run.json"))))
        .collect();

    // Each client got its slice, its own seed and the staged file's properties.
    for (i, c) in clients.iter().enumerate() {
        let props = &c["config"]["properties"];
        assert_eq!(props["insertstart"], (i * 500).to_string(), "{props}");
        assert_eq!(props["insertcount"], "500", "{props}");
        assert_eq!(props["readproportion"], "0.8", "{props}");
        assert_eq!(flag_value(c, "--client"), format!("{}/2", i + 1));
        assert_eq!(c["status"], "completed");
    }
    assert_eq!(
        clients[1]["config"]["seed"].as_u64().unwrap(),
        clients[0]["config"]["seed"].as_u64().unwrap() + 1,
        "client I gets seed + I − 1"
    );

    // Exactly the sum, step by step.
    let steps = merged["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{merged}");
    for (k, step) in steps.iter().enumerate() {
        assert_eq!(
            step["workload"], "mixed",
            "the file's name labels the steps"
        );
        let own: Vec<&Value> = clients.iter().map(|c| &c["steps"][k]).collect();
        let sum = |f: &dyn Fn(&Value) -> u64| own.iter().map(|s| f(s)).sum::<u64>();
        assert!(sum(&|s| s["operations"].as_u64().unwrap()) > 0);
        assert_eq!(
            step["operations"].as_u64().unwrap(),
            sum(&|s| s["operations"].as_u64().unwrap())
        );
        for op in ["READ", "UPDATE"] {
            assert_eq!(
                step["series"][op]["count"].as_u64().unwrap(),
                sum(&|s| s["series"][op]["count"].as_u64().unwrap_or(0)),
                "{op}"
            );
            assert_eq!(
                step["returns"][op]["OK"].as_u64().unwrap(),
                sum(&|s| s["returns"][op]["OK"].as_u64().unwrap_or(0)),
                "{op}"
            );
        }
        // Each client's system samples are kept under the merged step.
        let step_dir = merged_dir.join(step["dir"].as_str().unwrap());
        let parts: Vec<Value> =
            serde_json::from_value(read_json(&step_dir.join("clients.json"))).unwrap();
        assert_eq!(parts.len(), 2);
        for (i, part) in parts.iter().enumerate() {
            assert_eq!(part["client"], i as u64 + 1);
            assert_eq!(part["host"], ["127.0.0.1", "127.0.0.2"][i]);
            assert_eq!(part["operations"], own[i]["operations"]);
            let kept = merged_dir.join(part["dir"].as_str().unwrap());
            let own_dir = merged_dir
                .join(format!("clients/{}", i + 1))
                .join(own[i]["dir"].as_str().unwrap());
            for f in ["sys.json", "db-events.jsonl.gz"] {
                assert!(part["files"].as_array().unwrap().contains(&f.into()));
                assert_eq!(
                    std::fs::read(kept.join(f)).unwrap(),
                    std::fs::read(own_dir.join(f)).unwrap(),
                    "{f}"
                );
            }
        }
    }

    // Both clients began each step at its common start: the first at --start-at, the second
    // after the first's 2 s and the 3 s gap.
    let start_at: f64 = flag_value(&clients[0], "--start-at").parse().unwrap();
    assert_eq!(
        flag_value(&clients[1], "--start-at"),
        flag_value(&clients[0], "--start-at")
    );
    for c in &clients {
        for (k, due) in [(0, start_at), (1, start_at + 5.0)] {
            let began = c["steps"][k]["started_unix_ms"].as_f64().unwrap() / 1000.0;
            assert!(
                (began - due).abs() < 0.3,
                "step {k} began at {began}, due {due}"
            );
        }
    }
    // Nothing left behind on the "hosts": the staged files went when the clients ended.
    let home = std::env::var("HOME").unwrap();
    for i in 1..=2 {
        let dir = Path::new(&home).join(format!(".cache/iodig/clients/{i}"));
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("stage-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

/// Workload C on the no-op binding, one thread per client, on 127.0.0.1 and 127.0.0.2, into
/// `out`.
fn two_clients(sshd: &Sshd, out: &Path) -> IodigArgs {
    IodigArgs::run_basic("workloadc", out)
        .props(&["recordcount=1000", &sshd.property()])
        .threads("1")
        .warmup("0s")
        .args(&["--clients", "127.0.0.1,127.0.0.2"])
}

#[test]
fn with_observe_client_1_alone_observes_and_the_merge_keeps_it() {
    let _one = one_at_a_time();
    let sshd = Sshd::start(&["127.0.0.1", "127.0.0.2"]);
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    let r = two_clients(&sshd, &out)
        .duration("2s")
        .observe("127.0.0.2")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let merged_dir = r.run_dir();
    let clients: Vec<Value> = (1..=2)
        .map(|i| read_json(&merged_dir.join(format!("clients/{i}/run.json"))))
        .collect();
    assert_eq!(flag_value(&clients[0], "--observe"), "127.0.0.2");
    let line = clients[1]["tool"]["command_line"].to_string();
    assert!(
        !line.contains("--observe"),
        "client 2 observes nothing: {line}"
    );
    // The merged run has client 1's observed host, and its step the host's files.
    let merged = r.run_json();
    let observed = &merged["cluster"]["observed"];
    assert_eq!(observed[0]["host"], "127.0.0.2", "{merged}");
    let step = run_step(&merged);
    let nodes = step["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{step}");
    assert_eq!(nodes[0]["host"], "127.0.0.2");
    let node_dir = merged_dir.join(nodes[0]["dir"].as_str().unwrap());
    assert!(
        node_dir.join("sys.json").is_file(),
        "the host's system samples in {}",
        node_dir.display()
    );
}

/// The pid of the iodig process running as client `i/n` (not the shells around it).
fn client_pid(i: u64, n: u64) -> Option<u32> {
    let want = format!("{i}/{n}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_iodig = args.first().is_some_and(|a| {
            Path::new(a)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("iodig-"))
        });
        let is_client = args.windows(2).any(|w| w[0] == "--client" && w[1] == want);
        (is_iodig && is_client).then_some(pid)
    })
}

#[test]
fn a_client_that_dies_mid_run_is_left_out_of_the_merge_which_says_so() {
    let _one = one_at_a_time();
    let sshd = Sshd::start(&["127.0.0.1", "127.0.0.2"]);
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    // Client 2 is killed once its step is under way (it starts a few seconds after launch).
    let killer = std::thread::spawn(|| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Some(pid) = client_pid(2, 2) {
                std::thread::sleep(std::time::Duration::from_secs(6));
                // SAFETY: kill has no memory preconditions; the pid is the client we found.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                return Some(pid);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        None
    });
    let r = two_clients(&sshd, &out)
        .target("200")
        .duration("8s")
        .output();
    let killed = killer.join().unwrap();
    assert!(killed.is_some(), "client 2 never ran: {}", r.stderr);
    assert_eq!(r.code(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("1 of 2 clients failed") && r.stderr.contains("client 2 (127.0.0.2"),
        "{}",
        r.stderr
    );
    // The merged run holds client 1's operations alone, and says who is missing.
    let merged = r.run_json();
    let client1 = read_json(&r.run_dir().join("clients/1/run.json"));
    let ops = |run: &Value| {
        run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["phase"] == "run")
            .map(|s| s["operations"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert!(ops(&client1) > 0);
    assert_eq!(ops(&merged), ops(&client1), "{merged}");
    assert!(
        merged["notes"].to_string().contains("client 2"),
        "{}",
        merged["notes"]
    );
}

#[test]
fn bad_clients_and_start_times_exit_2_before_anything_starts() {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = tmp.path().join("runs");
    // Nothing listens on port 9 of 127.0.0.3: ssh is refused at once.
    let config = tmp.path().join("ssh_config");
    std::fs::write(
        &config,
        "Host *\n  Port 9\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n",
    )
    .unwrap();
    let ssh_config = format!("ssh.config={}", config.display());
    let past = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 60)
        .to_string();
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["--clients", "127.0.0.1,127.0.0.2", "--client", "1/2"],
            &["--clients", "leave out --client 1/2"],
        ),
        (
            &["--clients", "h:99999"],
            &["--clients", "\"h:99999\"", "port"],
        ),
        (
            &["--clients", "127.0.0.3"],
            &["--clients 127.0.0.3: ssh failed", "sshd runs there"],
        ),
        (
            &["--start-at", &past],
            &["--start-at", "passed", "in the future"],
        ),
        (
            &["--clients", "127.0.0.3", "--start-at", &past],
            &["--start-at", "passed"],
        ),
        (&["--start-at", "tomorrow"], &["--start-at", "RFC 3339"]),
    ];
    for (extra, says) in cases {
        let r = IodigArgs::run_basic("workloada", &out)
            .p(&ssh_config)
            .duration("1s")
            .args(extra)
            .output();
        assert_eq!(r.code(), 2, "{extra:?}: {}", r.stderr);
        for s in says {
            assert!(r.stderr.contains(s), "{extra:?}: {s:?} not in {}", r.stderr);
        }
        let runs: Vec<_> = std::fs::read_dir(&out)
            .map(|d| d.flatten().collect())
            .unwrap_or_default();
        assert!(runs.is_empty(), "{extra:?} left {runs:?}");
    }
}
