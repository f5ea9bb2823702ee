//! Baseline for the harness-overhead benchmark: a bare loop calling RocksDB `get` with the keys
//! iodig's workload C (uniform) would choose, on the same database and options, with no
//! measurement. Prints ops/s.
//!
//! `bare_get ROCKSDB_DIR RECORDCOUNT THREADS SECONDS`

use iodig_db::rocks::RocksFactory;
use iodig_model::props::Properties;
use iodig_workload::generators::Uniform;
use iodig_workload::keys::{significant_bytes, KeyNamer};
use iodig_workload::rng::Rng;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, records, threads, secs] = args.as_slice() else {
        eprintln!("usage: bare_get ROCKSDB_DIR RECORDCOUNT THREADS SECONDS");
        std::process::exit(2);
    };
    let records: u64 = records.parse().expect("RECORDCOUNT");
    let threads: u64 = threads.parse().expect("THREADS");
    let secs: f64 = secs.parse().expect("SECONDS");
    let mut props = Properties::new();
    props.set("rocksdb.dir", dir.as_str());
    let factory = RocksFactory::open(&props).expect("open rocksdb");
    let db = &factory.db();
    let cf = db
        .cf_handle(factory.column_family())
        .expect("usertable column family");
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, done, cf) = (&stop, &done, &cf);
            s.spawn(move || {
                let chooser = Uniform::new(0, records - 1);
                let namer = KeyNamer {
                    ordered: false,
                    zero_padding: 1,
                    keynum_bytes: significant_bytes(records),
                };
                let mut rng = Rng::seeded(1, t);
                let mut key = String::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    namer.build(chooser.next(&mut rng), &mut key);
                    let v = db.get_pinned_cf(cf, &key).expect("get");
                    std::hint::black_box(v.map(|v| v.len()));
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    let ops = done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    println!("{ops:.1}");
}
