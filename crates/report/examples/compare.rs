//! Runs `iodig compare`'s library call, for the benchmark scripts (the root binary needs
//! RocksDB built): `cargo run --release -p iodig-report --example compare -- OUT RUN_DIR...`
//! (a run may be given as `LABEL=RUN_DIR`, as to `iodig compare`).

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: compare OUT RUN_DIR RUN_DIR..."))?;
    let out = iodig_report::write_compare(&iodig_report::CompareOptions {
        runs: args.map(Into::into).collect(),
        out: out.into(),
        fail_on_regression_pct: None,
        op: None,
    })?;
    println!("{} files", out.files.len());
    Ok(())
}
