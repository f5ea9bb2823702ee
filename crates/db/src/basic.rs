//! `basic`: YCSB's BasicDB, a binding that stores nothing. It exercises the whole pipeline
//! without a database and, with `basicdb.verbose=true`, prints every operation exactly as
//! YCSB's BasicDB does, so key sequences can be diffed against YCSB's own output.

use crate::{Db, DbError, DbFactory, Execution, Fields, Properties, Record, Status};
use std::io::Write;
use std::time::Duration;

pub(crate) const PROPERTIES: &[&str] = &[
    "basicdb.verbose",
    "basicdb.simulatedelay",
    "basicdb.randomizedelay",
];

/// Shared settings of the `basic` binding.
pub struct BasicFactory {
    verbose: bool,
    /// Maximum simulated delay per operation, in milliseconds (YCSB's `basicdb.simulatedelay`).
    delay_ms: u64,
    randomize_delay: bool,
}

impl BasicFactory {
    /// Reads `basicdb.*`. Unlike YCSB, `verbose` defaults to false: printing every operation is
    /// for checking key sequences, not for benchmarking the harness.
    pub fn open(props: &Properties) -> Result<Self, DbError> {
        let cfg = |e: crate::PropertyError| DbError::Config(e.0);
        Ok(Self {
            verbose: props.get_bool("basicdb.verbose", false).map_err(cfg)?,
            delay_ms: props.get_u64("basicdb.simulatedelay", 0).map_err(cfg)?,
            randomize_delay: props
                .get_bool("basicdb.randomizedelay", true)
                .map_err(cfg)?,
        })
    }
}

impl DbFactory for BasicFactory {
    type Db = BasicDb;
    const NAME: &'static str = "basic";
    const EXECUTION: Execution = Execution::Threads;

    fn worker(&self) -> Result<BasicDb, DbError> {
        Ok(BasicDb {
            verbose: self.verbose,
            delay_ms: self.delay_ms,
            randomize_delay: self.randomize_delay,
            line: String::new(),
            rng: u64::from(std::process::id()) ^ 0x9E37_79B9_7F4A_7C15,
        })
    }
}

/// One worker of the `basic` binding.
pub struct BasicDb {
    verbose: bool,
    delay_ms: u64,
    randomize_delay: bool,
    line: String,
    rng: u64,
}

impl BasicDb {
    fn delay(&mut self) {
        if self.delay_ms == 0 {
            return;
        }
        let ms = if self.randomize_delay {
            // xorshift: any cheap uniform draw will do for a simulated delay.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            self.rng % self.delay_ms
        } else {
            self.delay_ms
        };
        std::thread::sleep(Duration::from_millis(ms));
    }

    fn emit(&mut self) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(self.line.as_bytes());
        let _ = out.write_all(b"\n");
    }

    fn start_line(&mut self, op: &str, table: &str, key: &str) {
        self.line.clear();
        self.line.push_str(op);
        self.line.push(' ');
        self.line.push_str(table);
        self.line.push(' ');
        self.line.push_str(key);
    }

    fn push_fields(&mut self, fields: Fields<'_>) {
        self.line.push_str(" [ ");
        match fields {
            Some(names) => {
                for n in names {
                    self.line.push_str(n);
                    self.line.push(' ');
                }
            }
            None => self.line.push_str("<all fields>"),
        }
        self.line.push(']');
    }

    fn push_values(&mut self, values: &Record) {
        self.line.push_str(" [ ");
        for (name, value) in values.iter() {
            self.line.push_str(name);
            self.line.push('=');
            self.line.push_str(&String::from_utf8_lossy(value));
            self.line.push(' ');
        }
        self.line.push(']');
    }

    fn write_op(&mut self, op: &str, table: &str, key: &str, values: &Record) -> Status {
        self.delay();
        if self.verbose {
            self.start_line(op, table, key);
            self.push_values(values);
            self.emit();
        }
        Status::Ok
    }
}

impl Db for BasicDb {
    async fn read(
        &mut self,
        table: &str,
        key: &str,
        fields: Fields<'_>,
        out: &mut Record,
    ) -> Status {
        self.delay();
        out.clear();
        if self.verbose {
            self.start_line("READ", table, key);
            self.push_fields(fields);
            self.emit();
        }
        Status::Ok
    }

    async fn scan(
        &mut self,
        table: &str,
        start_key: &str,
        count: usize,
        fields: Fields<'_>,
        out: &mut Vec<Record>,
    ) -> Status {
        self.delay();
        out.clear();
        if self.verbose {
            self.start_line("SCAN", table, start_key);
            self.line.push(' ');
            self.line.push_str(&count.to_string());
            self.push_fields(fields);
            self.emit();
        }
        Status::Ok
    }

    async fn update(&mut self, table: &str, key: &str, values: &Record) -> Status {
        self.write_op("UPDATE", table, key, values)
    }

    async fn insert(&mut self, table: &str, key: &str, values: &Record) -> Status {
        self.write_op("INSERT", table, key, values)
    }

    fn reads_values(&self) -> bool {
        // Only to print them, as YCSB's BasicDB reads them only then.
        self.verbose
    }

    async fn delete(&mut self, table: &str, key: &str) -> Status {
        self.delay();
        if self.verbose {
            self.start_line("DELETE", table, key);
            self.emit();
        }
        Status::Ok
    }
}
