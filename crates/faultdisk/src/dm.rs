//! The device-mapper way to the same faults, where the kernel has device-mapper: two mapped
//! devices on a loop device over the image, the upper one `linear` or `delay` (slow), the
//! lower one `linear`, `flakey` or `error` (failing), so a slow direction and a failing one
//! hold at once. A fault swaps a table (suspend without freezing the file system, load,
//! resume); no process of iodig sits in the IO path.

use crate::Direction;
use std::path::Path;
use std::time::Duration;

/// Names the mapped devices start with, so a killed run's leftovers are recognisable.
pub const NAME_PREFIX: &str = "iodig-faultdisk-";

/// Whether this kernel can map devices with the targets the faults use: the control node, and
/// `delay`, `flakey` and `error` among the targets (`dmsetup targets` loads nothing).
pub fn available() -> Result<(), String> {
    if !Path::new("/dev/mapper/control").exists() {
        return Err("this kernel has no device-mapper (/dev/mapper/control is missing)".into());
    }
    let targets = dmsetup(&["targets"]).map_err(|e| {
        format!(
            "device-mapper is there but `dmsetup targets` failed: {e} (apt-get install dmsetup)"
        )
    })?;
    let missing: Vec<&str> = ["delay", "flakey", "error", "linear"]
        .into_iter()
        .filter(|t| {
            !targets
                .lines()
                .any(|l| l.split_whitespace().next() == Some(*t))
        })
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "device-mapper lacks the {} target(s) (modprobe dm-delay dm-flakey)",
            missing.join(", ")
        ))
    }
}

/// What the faults hold at the moment; the two tables are made from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// Added to every read.
    pub read_delay: Duration,
    /// Added to every write.
    pub write_delay: Duration,
    /// Every read fails.
    pub fail_reads: bool,
    /// Every write fails.
    pub fail_writes: bool,
}

/// The upper device's table over the lower device `below` of `sectors` sectors: `delay` with
/// each direction's delay (a direction without one passes straight), else `linear`.
pub fn upper_table(sectors: u64, below: &str, s: &State) -> String {
    if s.read_delay.is_zero() && s.write_delay.is_zero() {
        return format!("0 {sectors} linear {below} 0");
    }
    // delay <dev> <offset> <read ms> <write dev> <write offset> <write ms>
    format!(
        "0 {sectors} delay {below} 0 {} {below} 0 {}",
        s.read_delay.as_millis(),
        s.write_delay.as_millis()
    )
}

/// The lower device's table over the loop device: `error` when both directions fail, `flakey`
/// always down (up 0 s, down 1 s) with `error_reads` or `error_writes` for one, else `linear`.
pub fn lower_table(sectors: u64, loop_dev: &str, s: &State) -> String {
    match (s.fail_reads, s.fail_writes) {
        (true, true) => format!("0 {sectors} error"),
        (true, false) => format!("0 {sectors} flakey {loop_dev} 0 0 1 1 error_reads"),
        (false, true) => format!("0 {sectors} flakey {loop_dev} 0 0 1 1 error_writes"),
        (false, false) => format!("0 {sectors} linear {loop_dev} 0"),
    }
}

/// The state after a `slow` fault.
pub fn slowed(mut s: State, delay: Duration, which: Direction) -> State {
    if which.reads() {
        s.read_delay = delay;
    }
    if which.writes() {
        s.write_delay = delay;
    }
    s
}

/// The state after a `fail` fault.
pub fn failed(mut s: State, which: Direction) -> State {
    s.fail_reads |= which.reads();
    s.fail_writes |= which.writes();
    s
}

/// The two mapped devices of one faulty disk.
pub struct Pair {
    /// The lower device's name under /dev/mapper.
    pub lower: String,
    /// The upper device's name, which the file system is made on.
    pub upper: String,
    sectors: u64,
    loop_dev: String,
    state: State,
}

impl Pair {
    /// Maps `loop_dev` (`sectors` long) as two linear devices named after `tag`.
    pub fn create(loop_dev: &str, sectors: u64, tag: &str) -> Result<Pair, String> {
        let mut pair = Pair {
            lower: format!("{NAME_PREFIX}{tag}-lower"),
            upper: format!("{NAME_PREFIX}{tag}-upper"),
            sectors,
            loop_dev: loop_dev.to_string(),
            state: State::default(),
        };
        let lower_table = lower_table(sectors, loop_dev, &pair.state);
        dmsetup(&["create", &pair.lower, "--table", &lower_table])?;
        let upper_table = upper_table(sectors, &pair.lower_path(), &pair.state);
        if let Err(e) = dmsetup(&["create", &pair.upper, "--table", &upper_table]) {
            let _ = dmsetup(&["remove", &pair.lower]);
            pair.lower.clear();
            return Err(e);
        }
        Ok(pair)
    }

    /// `/dev/mapper/<upper>`, the device the file system is on.
    pub fn device(&self) -> String {
        format!("/dev/mapper/{}", self.upper)
    }

    /// The kernel's name of the upper device (`dm-3`), which the tracer and caps see.
    pub fn kernel_name(&self) -> String {
        std::fs::canonicalize(self.device())
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| self.upper.clone())
    }

    fn lower_path(&self) -> String {
        format!("/dev/mapper/{}", self.lower)
    }

    /// Moves to `next`, swapping only the tables that change.
    pub fn set(&mut self, next: State) -> Result<(), String> {
        let lower = lower_table(self.sectors, &self.loop_dev, &next);
        if lower != lower_table(self.sectors, &self.loop_dev, &self.state) {
            swap(&self.lower, &lower)?;
        }
        let upper = upper_table(self.sectors, &self.lower_path(), &next);
        if upper != upper_table(self.sectors, &self.lower_path(), &self.state) {
            swap(&self.upper, &upper)?;
        }
        self.state = next;
        Ok(())
    }

    /// What the faults hold now.
    pub fn state(&self) -> State {
        self.state
    }

    /// Removes both devices, upper first (the file system must be unmounted).
    pub fn remove(&mut self) {
        for name in [
            std::mem::take(&mut self.upper),
            std::mem::take(&mut self.lower),
        ] {
            if !name.is_empty() {
                remove(&name);
            }
        }
    }
}

/// Loads `table` into `name` and makes it live. The file system on top is not frozen: a
/// freeze writes, which a failing table would refuse, and the swap needs no consistent image.
fn swap(name: &str, table: &str) -> Result<(), String> {
    dmsetup(&["suspend", "--nolockfs", name])?;
    let loaded = dmsetup(&["reload", name, "--table", table]);
    // Resumed whether the load worked or not, so a bad table never leaves the device stuck.
    let resumed = dmsetup(&["resume", name]);
    loaded.and(resumed).map(|_| ())
}

/// Removes a mapped device, retrying while something still holds it briefly.
pub fn remove(name: &str) {
    for _ in 0..20 {
        if dmsetup(&["remove", name]).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = dmsetup(&["remove", "--force", name]);
}

/// Mapped devices a faulty disk tagged `tag` made, by their names.
pub fn leftovers(tag: &str) -> Vec<String> {
    let Ok(list) = dmsetup(&["ls"]) else {
        return Vec::new();
    };
    let mine = format!("{NAME_PREFIX}{tag}-");
    let mut names: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&mine))
        .map(str::to_string)
        .collect();
    // Upper before lower: the upper one holds the lower open.
    names.sort_by(|a, b| b.cmp(a));
    names
}

fn dmsetup(args: &[&str]) -> Result<String, String> {
    crate::stack::run("dmsetup", args)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_healthy_disk_is_linear_twice() {
        let s = State::default();
        assert_eq!(
            upper_table(2048, "/dev/mapper/l", &s),
            "0 2048 linear /dev/mapper/l 0"
        );
        assert_eq!(
            lower_table(2048, "/dev/loop7", &s),
            "0 2048 linear /dev/loop7 0"
        );
    }

    #[test]
    fn slow_directions_become_one_delay_table() {
        let s = slowed(State::default(), MS(50), Direction::Reads);
        assert_eq!(
            upper_table(2048, "/dev/mapper/l", &s),
            "0 2048 delay /dev/mapper/l 0 50 /dev/mapper/l 0 0"
        );
        let s = slowed(s, MS(20), Direction::Writes);
        assert_eq!(
            upper_table(2048, "/dev/mapper/l", &s),
            "0 2048 delay /dev/mapper/l 0 50 /dev/mapper/l 0 20"
        );
        let healed = slowed(s, Duration::ZERO, Direction::Both);
        assert!(upper_table(2048, "/dev/mapper/l", &healed).contains("linear"));
    }

    #[test]
    fn failing_directions_pick_flakey_or_error_and_keep_the_delay() {
        let slow = slowed(State::default(), MS(10), Direction::Both);
        let s = failed(slow, Direction::Writes);
        assert_eq!(
            lower_table(2048, "/dev/loop7", &s),
            "0 2048 flakey /dev/loop7 0 0 1 1 error_writes"
        );
        assert!(upper_table(2048, "/dev/mapper/l", &s).contains("delay"));
        let s = failed(State::default(), Direction::Reads);
        assert!(lower_table(2048, "/dev/loop7", &s).ends_with("error_reads"));
        let s = failed(s, Direction::Writes);
        assert_eq!(lower_table(2048, "/dev/loop7", &s), "0 2048 error");
    }
}
