//! The probes on a real HotSpot JVM: a program that asks for full collections at moments it
//! prints; every one must come back as a full `gc` pause inside a safepoint, at its moment.

use iodig_jvm::PauseProbe;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const PROGRAM: &str = r#"
public class Pauses {
    static Object[] keep;
    public static void main(String[] a) throws Exception {
        // Enough live objects that a full collection takes a few milliseconds.
        keep = new Object[400_000];
        for (int i = 0; i < keep.length; i++) keep[i] = new int[8];
        System.out.println("ready");
        System.out.flush();
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        for (int i = 0; i < 3; i++) {
            long before = System.currentTimeMillis();
            System.gc();
            System.out.println("gc " + before + " " + System.currentTimeMillis());
            Thread.sleep(200);
        }
        System.out.println("done");
        System.out.flush();
    }
}
"#;

#[test]
fn full_collections_asked_for_are_full_gc_pauses_inside_safepoints_at_their_moments() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("Pauses.java");
    std::fs::write(&src, PROGRAM).unwrap();
    let mut java = Command::new("java")
        .args(["-XX:+UseSerialGC", "-Xmx256m", "-Xms256m"])
        .arg(&src)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("java runs (scripts/setup.sh installs a JDK)");
    let mut out = BufReader::new(java.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let probe = PauseProbe::start("test jvm", java.id()).unwrap_or_else(|e| panic!("{e:?}"));
    writeln!(java.stdin.take().unwrap(), "go").unwrap();
    let mut asked = Vec::new();
    for l in out.lines() {
        let l = l.unwrap();
        if l == "done" {
            break;
        }
        let f: Vec<u64> = l.split(' ').skip(1).map(|x| x.parse().unwrap()).collect();
        asked.push((f[0], f[1]));
    }
    let doc = probe.stop();
    let _ = java.wait();
    assert!(doc.probed && doc.source.contains("libjvm.so"), "{doc:?}");
    assert_eq!(asked.len(), 3);
    let full: Vec<_> = doc
        .pauses
        .iter()
        .filter(|p| p.kind == "gc" && p.full == Some(true))
        .collect();
    assert!(full.len() >= 3, "{:?}", doc.pauses);
    for (before, after) in &asked {
        // The collection lies within the moments the program read around System.gc().
        let gc = full
            .iter()
            .find(|p| p.start_unix_us / 1000 + 1 >= *before && p.end_unix_us() / 1000 <= after + 1)
            .unwrap_or_else(|| panic!("no full gc in {before}..{after}: {:?}", doc.pauses));
        assert!(gc.duration_us > 0);
        let inside = doc.pauses.iter().any(|s| {
            s.kind == "safepoint"
                && s.start_unix_us <= gc.start_unix_us
                && s.end_unix_us() >= gc.end_unix_us()
        });
        assert!(
            inside,
            "the collection {gc:?} is inside a safepoint: {:?}",
            doc.pauses
        );
    }
}
