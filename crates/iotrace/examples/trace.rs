//! Developer harness: `trace [SECS] [DEV…]` traces with the library and prints the text report
//! and the JSON document (the real CLI is `iodig trace`).

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(Ok(3.0), |s| s.parse())?;
    let opts = iodig_iotrace::TraceOptions {
        devices: args.collect(),
        ..Default::default()
    };
    let session = iodig_iotrace::start(&opts)?;
    eprintln!("mode {} note {:?}", session.mode(), session.note());
    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    let doc = session.stop()?;
    print!("{}", iodig_iotrace::render::text(&doc));
    std::fs::write(
        "/tmp/iotrace-example.json",
        serde_json::to_vec_pretty(&doc)?,
    )?;
    Ok(())
}
