//! Runs `iodig report`'s library call on a run directory, for the benchmark script (the root
//! binary needs RocksDB built): `cargo run --release -p iodig-report --example report -- RUN_DIR`.

fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: report RUN_DIR"))?;
    let out = iodig_report::write_report(std::path::Path::new(&dir))?;
    for f in &out.files {
        println!("{}", f.display());
    }
    Ok(())
}
