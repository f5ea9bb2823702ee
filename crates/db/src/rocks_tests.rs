//! The RocksDB binding's own tests: records' encoding, closing flushes, checkpoint and restore.

use super::*;

#[test]
fn layout_round_trips_and_filters() {
    let mut r = Record::new();
    r.push("field0", b"abc");
    r.push("field1", b"");
    let mut buf = Vec::new();
    encode(&r, &mut buf);
    assert_eq!(&buf[..4], &6i32.to_be_bytes());
    let mut back = Record::new();
    assert!(decode(&buf, None, &mut back));
    assert_eq!(back, r);
    let only = ["field1".to_string()];
    assert!(decode(&buf, Some(&only), &mut back));
    assert_eq!(back.len(), 1);
    assert!(!decode(&buf[..buf.len() - 1], None, &mut back));
}

#[test]
fn closing_flushes_every_memtable_despite_the_merge_threshold() {
    // Small memtables and YCSB's merge threshold of 2: after these writes one immutable
    // memtable is typically left below the threshold, which no background flush takes.
    let dir = tempfile::tempdir().unwrap();
    let mut props = Properties::new();
    props.set("rocksdb.dir", dir.path().to_string_lossy());
    props.set("rocksdb.writebuffersize", "64K");
    let factory = RocksFactory::open(&props).unwrap();
    let db = factory.db();
    let cf = db.cf_handle(factory.column_family()).unwrap();
    for i in 0..3_000u32 {
        db.put_cf(&cf, format!("user{i:08}"), [b'x'; 100]).unwrap();
    }
    let int = |name: &str| db.property_int_value_cf(&cf, name).unwrap().unwrap();
    assert!(int("rocksdb.num-entries-active-mem-table") > 0);
    factory.close().unwrap();
    assert_eq!(int("rocksdb.num-immutable-mem-table"), 0);
    assert_eq!(int("rocksdb.num-entries-active-mem-table"), 0);
    assert!(int("rocksdb.num-live-versions") >= 1);
    assert_eq!(
        db.get_cf(&cf, "user00002999").unwrap().as_deref(),
        Some(&[b'x'; 100][..])
    );
}

#[test]
fn a_restore_puts_back_what_the_checkpoint_kept_and_leaves_the_rest() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let mut props = Properties::new();
    props.set("rocksdb.dir", dir.to_string_lossy());
    let factory = RocksFactory::open(&props).unwrap();
    let put = |k: &str, v: &[u8]| {
        let db = factory.db();
        let cf = db.cf_handle(factory.column_family()).unwrap();
        db.put_cf(&cf, k, v).unwrap();
    };
    let get = |k: &str| {
        let db = factory.db();
        let cf = db.cf_handle(factory.column_family()).unwrap();
        db.get_cf(&cf, k).unwrap()
    };
    for i in 0..500u32 {
        put(&format!("user{i:05}"), b"loaded");
    }
    std::fs::write(dir.join("iodig-marker"), "kept").unwrap();
    let kept = root.path().join("db.checkpoint");
    factory.checkpoint(&kept).unwrap();
    // A step writes over the dataset, inserts and leaves some in its memtable.
    put("user00007", b"changed");
    put("user99999", b"inserted");
    factory.close().unwrap();
    put("user00008", b"in the memtable");
    // A worker still holding the database keeps it from being restored.
    let held = factory.worker().unwrap();
    assert!(factory
        .restore(&kept)
        .unwrap_err()
        .to_string()
        .contains("still holds"));
    drop(held);
    factory.restore(&kept).unwrap();
    assert_eq!(get("user00007").as_deref(), Some(&b"loaded"[..]));
    assert_eq!(get("user00008").as_deref(), Some(&b"loaded"[..]));
    assert_eq!(get("user99999"), None);
    assert_eq!(
        std::fs::read_to_string(dir.join("iodig-marker")).unwrap(),
        "kept"
    );
    // Again: the checkpoint is as it was, though the restored database wrote on.
    put("user00007", b"changed again");
    factory.close().unwrap();
    factory.restore(&kept).unwrap();
    assert_eq!(get("user00007").as_deref(), Some(&b"loaded"[..]));
    assert!(factory.worker().is_ok());
}

#[test]
fn sizes_parse_with_suffixes() {
    assert_eq!(parse_size("k", "8M").unwrap(), 8 << 20);
    assert_eq!(parse_size("k", "64kb").unwrap(), 64 << 10);
    assert_eq!(parse_size("k", "123").unwrap(), 123);
    assert!(parse_size("k", "lots").unwrap_err().0.contains("k=lots"));
}
