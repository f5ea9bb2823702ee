//! The ledger on disk: a snapshot of every key, then batches of the keys changed since, each
//! appended by one save. Every block carries its checksum and the run's read counts, so a
//! reader keeps every whole block and drops a batch cut short by a kill; a snapshot is only
//! ever written whole (beside the file, then renamed over it) and must read back whole. Files
//! of the first format (`iodig-ledger 1`, one record per key) are still read.
//!
//! A file: the line `iodig-ledger 2`, then blocks. A block, little-endian: the magic `LDGR`,
//! its kind (u8: 1 part of the snapshot, 2 end of the snapshot, 3 changes), its payload's length
//! (u32) and payload, the read counts (4 × u64: checked, stale, corrupt, missing), and a
//! checksum (u64) of all of it after the magic. A payload is records: 1, a run of plain keys
//! (first keynum u64, count u32, then count versions u64: each key's last write of every field,
//! acknowledged with no write overlapping it), or 2, one key in full (keynum u64, the newest
//! unacknowledged version u64, the number of entries u16, and per entry its field u16, 65535
//! for every field, its last acknowledged version u64 and that write's floor u64). A record
//! replaces what earlier blocks said of its keys.

use super::ledger::{KeyState, Saved};
use super::{FieldState, Ledger, ReadTally};
use std::io::{self, BufRead, Read, Write};

/// The first line of a ledger file names its format.
const FORMAT: &str = "iodig-ledger 2";
/// The format before batches: one record per key, rewritten whole at each save.
const FORMAT_1: &str = "iodig-ledger 1";
const MAGIC: [u8; 4] = *b"LDGR";
const SNAPSHOT_PART: u8 = 1;
const SNAPSHOT_END: u8 = 2;
const CHANGES: u8 = 3;
const PLAIN_RUN: u8 = 1;
const FULL_KEY: u8 = 2;
/// A block's payload is cut here, so a reader holds at most this much of a block at once.
const BLOCK_PAYLOAD: usize = 1 << 20;
/// The longest payload a reader accepts: a length beyond it is damage, not a block.
const BLOCK_PAYLOAD_MAX: usize = 2 * BLOCK_PAYLOAD;

/// A ledger read back, and how much of its file's end was a save cut short.
pub struct Loaded {
    /// The ledger as of its last whole save.
    pub ledger: Ledger,
    /// Bytes at the end of the file that were not a whole block (a save killed midway, or
    /// damage): the keys they held read back as they were before that save.
    pub ignored_bytes: u64,
}

/// Writes blocks of one kind, cutting the payload into blocks as it grows.
struct BlockWriter<'a, W: Write + ?Sized> {
    out: &'a mut W,
    kind: u8,
    reads: ReadTally,
    payload: Vec<u8>,
    /// The open run of plain keys: its next keynum and where its count is in the payload.
    run: Option<(u64, usize)>,
    blocks: u64,
}

impl<'a, W: Write + ?Sized> BlockWriter<'a, W> {
    fn new(out: &'a mut W, kind: u8, reads: ReadTally) -> Self {
        Self {
            out,
            kind,
            reads,
            payload: Vec::with_capacity(BLOCK_PAYLOAD + 64),
            run: None,
            blocks: 0,
        }
    }

    fn add(&mut self, keynum: u64, saved: &Saved) -> io::Result<()> {
        if self.payload.len() >= BLOCK_PAYLOAD {
            self.flush()?;
        }
        match saved {
            Saved::Plain(version) => {
                match self.run {
                    Some((next, at)) if next == keynum => {
                        let count =
                            u32::from_le_bytes(self.payload[at..at + 4].try_into().unwrap());
                        if count == u32::MAX {
                            self.start_run(keynum);
                        } else {
                            self.payload[at..at + 4].copy_from_slice(&(count + 1).to_le_bytes());
                        }
                    }
                    _ => self.start_run(keynum),
                }
                self.payload.extend_from_slice(&version.to_le_bytes());
                if let Some((next, _)) = &mut self.run {
                    *next = keynum + 1;
                }
            }
            Saved::Full(state) => {
                self.run = None;
                encode_full(&mut self.payload, keynum, state);
            }
        }
        Ok(())
    }

    /// Adds one record [`encode_full`] wrote.
    fn add_encoded(&mut self, record: &[u8]) -> io::Result<()> {
        if self.payload.len() >= BLOCK_PAYLOAD {
            self.flush()?;
        }
        self.run = None;
        self.payload.extend_from_slice(record);
        Ok(())
    }

    fn start_run(&mut self, keynum: u64) {
        self.payload.push(PLAIN_RUN);
        self.payload.extend_from_slice(&keynum.to_le_bytes());
        let at = self.payload.len();
        self.payload.extend_from_slice(&1u32.to_le_bytes());
        self.run = Some((keynum + 1, at));
    }

    /// Writes the payload so far as one block (also when empty: it carries the read counts).
    fn flush(&mut self) -> io::Result<()> {
        write_block(self.out, self.kind, &self.payload, self.reads)?;
        self.payload.clear();
        self.run = None;
        self.blocks += 1;
        Ok(())
    }

    /// Writes what is left; at least one block is written in all.
    fn finish(mut self) -> io::Result<()> {
        if !self.payload.is_empty() || self.blocks == 0 {
            self.flush()?;
        }
        Ok(())
    }
}

/// Appends the record of one key in full to `out`.
pub(super) fn encode_full(out: &mut Vec<u8>, keynum: u64, state: &KeyState) {
    out.push(FULL_KEY);
    out.extend_from_slice(&keynum.to_le_bytes());
    out.extend_from_slice(&state.unacked_max.to_le_bytes());
    out.extend_from_slice(&(state.entries().count() as u16).to_le_bytes());
    for e in state.entries() {
        out.extend_from_slice(&e.field.to_le_bytes());
        out.extend_from_slice(&e.acked.to_le_bytes());
        out.extend_from_slice(&e.floor.to_le_bytes());
    }
}

fn write_block(
    out: &mut (impl Write + ?Sized),
    kind: u8,
    payload: &[u8],
    reads: ReadTally,
) -> io::Result<()> {
    let mut head = [0u8; 9];
    head[..4].copy_from_slice(&MAGIC);
    head[4] = kind;
    head[5..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    let counts = counts_bytes(reads);
    let sum = checksum(&[&head[4..], payload, &counts]);
    out.write_all(&head)?;
    out.write_all(payload)?;
    out.write_all(&counts)?;
    out.write_all(&sum.to_le_bytes())
}

fn counts_bytes(r: ReadTally) -> [u8; 32] {
    let mut b = [0u8; 32];
    for (i, v) in [r.checked, r.stale, r.corrupt, r.missing]
        .into_iter()
        .enumerate()
    {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

/// FNV-1a over the bytes: a cut or garbled block does not check.
fn checksum(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
    h
}

impl Ledger {
    /// Writes the whole ledger: the format's line, then a snapshot of every key and the run's
    /// read counts. Writes in flight are not saved: they have no outcome yet. Workers go on
    /// meanwhile; a key changed during the snapshot is listed for the next
    /// [`save_changes`](Self::save_changes) as well.
    pub fn save(&self, out: &mut (impl Write + ?Sized)) -> io::Result<()> {
        writeln!(out, "{FORMAT}")?;
        let reads = self.read_counts();
        let mut blocks = BlockWriter::new(out, SNAPSHOT_PART, reads);
        self.for_each_saved(|keynum, saved| blocks.add(keynum, &saved))?;
        if !blocks.payload.is_empty() {
            blocks.flush()?;
        }
        write_block(blocks.out, SNAPSHOT_END, &[], reads)
    }

    /// Starts a new snapshot: the changes listed so far are forgotten, since the
    /// [`save`](Self::save) that follows holds them.
    pub fn save_from_scratch(&self, out: &mut (impl Write + ?Sized)) -> io::Result<()> {
        self.forget_changes();
        self.save(out)
    }

    /// Writes the keys changed since the last call (or since [`save_from_scratch`]
    /// (Self::save_from_scratch)) as blocks to append to a saved ledger, and the read counts;
    /// returns how many keys. A save that fails leaves the file needing a new snapshot: the
    /// changes it took are not listed again.
    pub fn save_changes(&self, out: &mut (impl Write + ?Sized)) -> io::Result<u64> {
        let reads = self.read_counts();
        let changes = self.take_changes();
        let mut blocks = BlockWriter::new(out, CHANGES, reads);
        for &(keynum, version) in &changes.plain {
            blocks.add(keynum, &Saved::Plain(version))?;
        }
        let mut start = 0;
        for &end in &changes.full_ends {
            blocks.add_encoded(&changes.full[start..end])?;
            start = end;
        }
        blocks.finish()?;
        Ok((changes.plain.len() + changes.full_ends.len()) as u64)
    }

    /// Reads a ledger [`Ledger::save`] wrote, with the batches appended since, or one of the
    /// first format.
    pub fn load(input: &mut impl BufRead) -> io::Result<Ledger> {
        Self::load_noting_tail(input).map(|l| l.ledger)
    }

    /// [`Ledger::load`], saying how many bytes at the end were a batch cut short.
    pub fn load_noting_tail(input: &mut impl BufRead) -> io::Result<Loaded> {
        let mut line = String::new();
        input.read_line(&mut line)?;
        let line = line.trim_end();
        if line == FORMAT {
            return read_blocks(input);
        }
        let Some(rest) = line.strip_prefix(FORMAT_1) else {
            return Err(bad(
                "not an iodig ledger (its first line does not name the format)",
            ));
        };
        read_format_1(rest, input).map(|ledger| Loaded {
            ledger,
            ignored_bytes: 0,
        })
    }
}

fn bad(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// Reads what fills `buf` and says how many bytes there were (fewer at the end of the file).
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn read_blocks(input: &mut impl BufRead) -> io::Result<Loaded> {
    let ledger = Ledger::new();
    let mut in_snapshot = true;
    let mut payload = Vec::new();
    let mut tail = [0u8; 40];
    loop {
        let mut head = [0u8; 9];
        let got = read_full(input, &mut head)?;
        if got == 0 && !in_snapshot {
            return Ok(Loaded {
                ledger,
                ignored_bytes: 0,
            });
        }
        // Whatever does not make a whole, checked block of the kind due ends what is read.
        let mut consumed = got;
        let mut whole = got == head.len() && head[..4] == MAGIC;
        let len = u32::from_le_bytes(head[5..9].try_into().unwrap()) as usize;
        if whole && len <= BLOCK_PAYLOAD_MAX {
            payload.resize(len, 0);
            let read = read_full(input, &mut payload)?;
            consumed += read;
            if read == len {
                let read = read_full(input, &mut tail)?;
                consumed += read;
                whole = read == tail.len()
                    && u64::from_le_bytes(tail[32..].try_into().unwrap())
                        == checksum(&[&head[4..], &payload, &tail[..32]]);
            } else {
                whole = false;
            }
        } else {
            whole = false;
        }
        let kind = head[4];
        let due = if in_snapshot {
            kind == SNAPSHOT_PART || kind == SNAPSHOT_END
        } else {
            kind == CHANGES
        };
        if !whole || !due {
            if in_snapshot {
                return Err(bad(
                    "the ledger is cut short or damaged inside its snapshot (which is only ever written whole)",
                ));
            }
            let after = io::copy(input, &mut io::sink())?;
            return Ok(Loaded {
                ledger,
                ignored_bytes: consumed as u64 + after,
            });
        }
        apply(&ledger, &payload)?;
        let n = |i: usize| u64::from_le_bytes(tail[i * 8..i * 8 + 8].try_into().unwrap());
        ledger.set_read_counts(ReadTally {
            checked: n(0),
            stale: n(1),
            corrupt: n(2),
            missing: n(3),
        });
        if kind == SNAPSHOT_END {
            in_snapshot = false;
        }
    }
}

/// Applies the records of one checked block.
fn apply(ledger: &Ledger, mut p: &[u8]) -> io::Result<()> {
    let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
    while let Some((&tag, rest)) = p.split_first() {
        p = rest;
        match tag {
            PLAIN_RUN => {
                let start = u64_of(take(&mut p, 8)?);
                let count = u32::from_le_bytes(take(&mut p, 4)?.try_into().unwrap());
                let versions = take(&mut p, count as usize * 8)?;
                for (i, v) in versions.chunks_exact(8).enumerate() {
                    ledger.restore(start + i as u64, &KeyState::plain(u64_of(v)));
                }
            }
            FULL_KEY => {
                let keynum = u64_of(take(&mut p, 8)?);
                let unacked_max = u64_of(take(&mut p, 8)?);
                let n = u16::from_le_bytes(take(&mut p, 2)?.try_into().unwrap());
                let mut state = KeyState::empty();
                state.unacked_max = unacked_max;
                for _ in 0..n {
                    let field = u16::from_le_bytes(take(&mut p, 2)?.try_into().unwrap());
                    let acked = u64_of(take(&mut p, 8)?);
                    let floor = u64_of(take(&mut p, 8)?);
                    *state.entry_mut(field) = FieldState {
                        field,
                        acked,
                        floor,
                    };
                }
                ledger.restore(keynum, &state);
            }
            _ => return Err(damaged()),
        }
    }
    Ok(())
}

fn damaged() -> io::Error {
    bad("a ledger block checks but its records do not parse")
}

/// The next `n` bytes of `p`, which moves past them.
fn take<'a>(p: &mut &'a [u8], n: usize) -> io::Result<&'a [u8]> {
    if p.len() < n {
        return Err(damaged());
    }
    let (a, b) = p.split_at(n);
    *p = b;
    Ok(a)
}

/// Reads the first format: its line's read counts (`rest`), then one record per key.
fn read_format_1(rest: &str, input: &mut impl BufRead) -> io::Result<Ledger> {
    let ledger = Ledger::new();
    let mut reads = ReadTally::default();
    for pair in rest.split_whitespace() {
        let (name, value) = pair.split_once('=').ok_or_else(|| bad("bad header"))?;
        let value: u64 = value.parse().map_err(|_| bad("bad header count"))?;
        match name {
            "reads_checked" => reads.checked = value,
            "stale_reads" => reads.stale = value,
            "corrupt_reads" => reads.corrupt = value,
            "missing_reads" => reads.missing = value,
            _ => {}
        }
    }
    ledger.set_read_counts(reads);
    let mut u64_buf = [0u8; 8];
    let mut u16_buf = [0u8; 2];
    loop {
        match input.read_exact(&mut u64_buf) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let keynum = u64::from_le_bytes(u64_buf);
        let truncated = |_| bad("the ledger is cut short");
        input.read_exact(&mut u64_buf).map_err(truncated)?;
        let mut state = KeyState::empty();
        state.unacked_max = u64::from_le_bytes(u64_buf);
        input.read_exact(&mut u16_buf).map_err(truncated)?;
        let n = u16::from_le_bytes(u16_buf);
        for _ in 0..n {
            input.read_exact(&mut u16_buf).map_err(truncated)?;
            let field = u16::from_le_bytes(u16_buf);
            input.read_exact(&mut u64_buf).map_err(truncated)?;
            let acked = u64::from_le_bytes(u64_buf);
            input.read_exact(&mut u64_buf).map_err(truncated)?;
            let floor = u64::from_le_bytes(u64_buf);
            *state.entry_mut(field) = FieldState {
                field,
                acked,
                floor,
            };
        }
        ledger.restore(keynum, &state);
    }
    Ok(ledger)
}
