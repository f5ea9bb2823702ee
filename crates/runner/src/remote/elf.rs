//! What a binary needs, read from its own ELF file: the glibc symbol versions it was linked
//! against (its version needs, `.gnu.version_r`, and the dynamic symbols that use them), the
//! oldest glibc that has them all (its floor), and the CPU architecture it is built for. A
//! build made on another machine, or the agent build, states its own needs instead of a figure
//! written in the docs.

use crate::le::{u16_at, u32_at, u64_at};
use std::fmt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::OnceLock;

/// A dotted version such as glibc's `2.28` or the `2.2.5` of `GLIBC_2.2.5`, compared number by
/// number (`2.2.5 < 2.28`, which a string comparison gets wrong).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub Vec<u32>);

impl Version {
    /// `2.28`, `2.2.5`; None for anything else (`2.36-9+deb12u14` is not one: callers pick the
    /// token that is).
    pub fn parse(s: &str) -> Option<Version> {
        let parts: Option<Vec<u32>> = s.split('.').map(|p| p.parse().ok()).collect();
        parts.filter(|p| p.len() >= 2).map(Version)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u32::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

/// One version the binary asks of a shared library, and its dynamic symbols bound to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionNeed {
    /// The library's file name (`libc.so.6`).
    pub file: String,
    /// The version's name (`GLIBC_2.34`).
    pub name: String,
    /// The undefined symbols bound to that version (`__libc_start_main`), sorted.
    pub symbols: Vec<String>,
}

/// The oldest glibc a binary runs on, and the symbols that make it so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlibcFloor {
    /// The highest `GLIBC_x.y` the binary asks for.
    pub version: Version,
    /// The symbols that need exactly that version (of libc, libm, …), sorted.
    pub symbols: Vec<String>,
}

/// Every version need of an ELF file (its `.gnu.version_r`), in the file's order, each with the
/// dynamic symbols bound to it (from `.gnu.version` and `.dynsym`). A file without version
/// needs (static, or not dynamic) has none.
pub fn version_needs(path: &Path) -> Result<Vec<VersionNeed>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Only the headers and a few small sections are read, not the whole (25 MB) binary.
    let read = |offset: u64, len: usize| -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, offset)
            .map_err(|e| format!("{}: {len} bytes at {offset}: {e}", path.display()))?;
        Ok(buf)
    };
    parse_version_needs(&read).map_err(|e| format!("{}: {e}", path.display()))
}

/// The highest `GLIBC_x.y` among the needs, and the symbols bound to it.
pub fn glibc_floor(needs: &[VersionNeed]) -> Option<GlibcFloor> {
    let mut floor: Option<GlibcFloor> = None;
    for n in needs {
        let Some(v) = n.name.strip_prefix("GLIBC_").and_then(Version::parse) else {
            continue;
        };
        match &mut floor {
            Some(f) if f.version == v => f.symbols.extend(n.symbols.iter().cloned()),
            Some(f) if f.version > v => {}
            _ => {
                floor = Some(GlibcFloor {
                    version: v,
                    symbols: n.symbols.clone(),
                });
            }
        }
    }
    if let Some(f) = &mut floor {
        f.symbols.sort();
        f.symbols.dedup();
    }
    floor
}

/// This very binary's glibc floor (`/proc/self/exe`), read once. None when it needs no
/// versioned glibc symbol (a static build) or cannot be read, with why.
pub fn own_glibc_floor() -> &'static Result<Option<GlibcFloor>, String> {
    static FLOOR: OnceLock<Result<Option<GlibcFloor>, String>> = OnceLock::new();
    FLOOR.get_or_init(|| version_needs(Path::new("/proc/self/exe")).map(|n| glibc_floor(&n)))
}

/// What a binary is built for, read from the file itself: the CPU architecture (its ELF
/// `e_machine`, named as `uname -m` names it) and its glibc floor (None: it needs no versioned
/// glibc symbol, as a static build).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryFacts {
    /// `x86_64`, `aarch64`, …
    pub arch: String,
    /// The oldest glibc it runs on.
    pub floor: Option<GlibcFloor>,
}

/// Reads [`BinaryFacts`] of the ELF file at `path`; the error names the file and why.
pub fn binary_facts(path: &Path) -> Result<BinaryFacts, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header = [0u8; 20];
    f.read_exact_at(&mut header, 0)
        .map_err(|e| format!("{}: not an ELF file ({e})", path.display()))?;
    if &header[..4] != b"\x7fELF" {
        return Err(format!("{}: not an ELF file", path.display()));
    }
    Ok(BinaryFacts {
        arch: elf_arch(u16_at(&header, 0x12)),
        floor: glibc_floor(&version_needs(path)?),
    })
}

/// An ELF `e_machine` as `uname -m` names the machine.
fn elf_arch(machine: u16) -> String {
    match machine {
        3 => "i686".into(),
        21 => "ppc64le".into(),
        22 => "s390x".into(),
        40 => "armv7l".into(),
        62 => "x86_64".into(),
        183 => "aarch64".into(),
        243 => "riscv64".into(),
        n => format!("ELF machine {n}"),
    }
}

/// The ELF parts read: 64-bit little-endian only, the layout of every host iodig builds for
/// (x86_64, aarch64).
const SHT_DYNSYM: u32 = 11;

const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;

const SHT_GNU_VERSYM: u32 = 0x6fff_ffff;

struct Section {
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
}

/// Reads the version needs through `read(offset, len)`.
fn parse_version_needs(
    read: &dyn Fn(u64, usize) -> Result<Vec<u8>, String>,
) -> Result<Vec<VersionNeed>, String> {
    if read(0, 4).ok().as_deref() != Some(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    let h = read(0, 64)?;
    if h[4] != 2 || h[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let shoff = u64_at(&h, 0x28);
    let shentsize = usize::from(u16_at(&h, 0x3a));
    let shnum = usize::from(u16_at(&h, 0x3c));
    if shentsize < 64 || shnum == 0 {
        return Err("no section headers".into());
    }
    let table = read(shoff, shentsize * shnum)?;
    let sections: Vec<Section> = table
        .chunks_exact(shentsize)
        .map(|s| Section {
            kind: u32_at(s, 4),
            offset: u64_at(s, 24),
            size: u64_at(s, 32),
            link: u32_at(s, 40),
            info: u32_at(s, 44),
        })
        .collect();
    let body = |s: &Section| -> Result<Vec<u8>, String> {
        // A section larger than any binary iodig makes is a damaged file, not a reason to
        // allocate gigabytes.
        if s.size > 64 << 20 {
            return Err(format!("a section of {} bytes", s.size));
        }
        read(s.offset, s.size as usize)
    };
    let Some(verneed) = sections.iter().find(|s| s.kind == SHT_GNU_VERNEED) else {
        return Ok(Vec::new());
    };
    let strings = body(
        sections
            .get(verneed.link as usize)
            .ok_or("version needs without a string table")?,
    )?;
    let needs = body(verneed)?;
    // (version index, file, name), walked as the dynamic loader does: vn_next and vna_next
    // are offsets from the entry, so entries need not be packed.
    let mut versions: Vec<(u16, String, String)> = Vec::new();
    let mut at = 0usize;
    for _ in 0..verneed.info {
        let entry = needs.get(at..at + 16).ok_or("version needs cut short")?;
        let file = string_at(&strings, u32_at(entry, 4))?;
        let (count, mut aux) = (u16_at(entry, 2), at + u32_at(entry, 8) as usize);
        for _ in 0..count {
            let a = needs.get(aux..aux + 16).ok_or("version needs cut short")?;
            versions.push((
                u16_at(a, 6),
                file.clone(),
                string_at(&strings, u32_at(a, 8))?,
            ));
            let next = u32_at(a, 12) as usize;
            if next == 0 {
                break;
            }
            aux += next;
        }
        let next = u32_at(entry, 12) as usize;
        if next == 0 {
            break;
        }
        at += next;
    }
    let mut out: Vec<VersionNeed> = versions
        .iter()
        .map(|(_, file, name)| VersionNeed {
            file: file.clone(),
            name: name.clone(),
            symbols: Vec::new(),
        })
        .collect();
    // Which undefined symbol needs which version: `.gnu.version` has one index per `.dynsym`
    // entry (the top bit marks a hidden one).
    let dynsym = sections.iter().find(|s| s.kind == SHT_DYNSYM);
    let versym = sections.iter().find(|s| s.kind == SHT_GNU_VERSYM);
    if let (Some(dynsym), Some(versym)) = (dynsym, versym) {
        let names = body(
            sections
                .get(dynsym.link as usize)
                .ok_or("symbols without a string table")?,
        )?;
        let syms = body(dynsym)?;
        let indices = body(versym)?;
        for (sym, index) in syms.chunks_exact(24).zip(indices.chunks_exact(2)) {
            let index = u16_at(index, 0) & 0x7fff;
            // st_shndx 0: undefined here, so it comes from the library.
            if u16_at(sym, 6) != 0 {
                continue;
            }
            if let Some(i) = versions.iter().position(|(v, ..)| *v == index) {
                out[i].symbols.push(string_at(&names, u32_at(sym, 0))?);
            }
        }
    }
    for n in &mut out {
        n.symbols.sort();
        n.symbols.dedup();
    }
    Ok(out)
}

/// The NUL-terminated string at `offset` of a string table.
fn string_at(table: &[u8], offset: u32) -> Result<String, String> {
    let rest = table
        .get(offset as usize..)
        .ok_or("a name outside its string table")?;
    let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::process::Command;

    /// The highest GLIBC version and its symbols as binutils' `objdump -T` reports them: the
    /// reference the reader is checked against.
    fn objdump_floor(path: &Path) -> (Version, BTreeSet<String>) {
        let out = Command::new("objdump")
            .arg("-T")
            .arg(path)
            .output()
            .expect("objdump missing: apt-get install binutils");
        assert!(out.status.success(), "objdump -T {}", path.display());
        let mut best: Option<(Version, BTreeSet<String>)> = None;
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            // `0000000000000000      DF *UND*  0000000000000000 (GLIBC_2.34) pthread_create`
            let Some((_, rest)) = l.split_once("(GLIBC_") else {
                continue;
            };
            let Some((v, sym)) = rest.split_once(')') else {
                continue;
            };
            if !l.contains("*UND*") {
                continue;
            }
            let v = Version::parse(v).expect("a GLIBC version");
            let sym = sym
                .split_whitespace()
                .last()
                .unwrap_or_default()
                .to_string();
            match &mut best {
                Some((b, syms)) if *b == v => {
                    syms.insert(sym);
                }
                Some((b, _)) if *b > v => {}
                _ => best = Some((v, BTreeSet::from([sym]))),
            }
        }
        best.expect("objdump -T lists no GLIBC symbol")
    }

    fn check_against_objdump(path: &Path) -> GlibcFloor {
        let needs = version_needs(path).unwrap();
        assert!(
            needs.iter().any(|n| n.file == "libc.so.6"),
            "{}: {needs:?}",
            path.display()
        );
        let floor = glibc_floor(&needs).expect("a GLIBC floor");
        let (version, symbols) = objdump_floor(path);
        assert_eq!(floor.version, version, "{}", path.display());
        assert_eq!(
            floor.symbols.iter().cloned().collect::<BTreeSet<_>>(),
            symbols,
            "{}",
            path.display()
        );
        floor
    }

    #[test]
    fn the_glibc_floor_of_a_real_build_is_what_objdump_reports() {
        // This test's own executable: built by the same toolchain against the same libraries
        // (RocksDB, libbpf, OpenSSL) as iodig, and what /proc/self/exe is at run time.
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        let floor = check_against_objdump(&me);
        assert!(floor.version >= Version(vec![2, 2, 5]), "{floor:?}");
        assert_eq!(own_glibc_floor().as_ref().unwrap().as_ref(), Some(&floor));
        // What the choice of binary reads of a file: the same floor, and its architecture.
        assert_eq!(
            binary_facts(&me).unwrap(),
            BinaryFacts {
                arch: std::env::consts::ARCH.into(),
                floor: Some(floor.clone()),
            }
        );
        // And iodig itself, when it is built beside this test (target/release/iodig).
        let iodig = me.parent().and_then(Path::parent).map(|d| d.join("iodig"));
        if let Some(iodig) = iodig.filter(|p| p.is_file()) {
            let f = check_against_objdump(&iodig);
            eprintln!(
                "{}: needs glibc {} for {}",
                iodig.display(),
                f.version,
                f.symbols.join(", ")
            );
        }
    }

    #[test]
    fn what_is_not_a_dynamic_elf_has_no_needs_or_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("text");
        std::fs::write(
            &text,
            "#!/bin/sh\necho hello, this is not an ELF file at all, really\n",
        )
        .unwrap();
        assert!(version_needs(&text).unwrap_err().contains("not an ELF"));
        assert!(binary_facts(&text).unwrap_err().contains("not an ELF"));
        assert!(binary_facts(&dir.path().join("none")).is_err());
        let short = dir.path().join("short");
        std::fs::write(&short, b"\x7fELF").unwrap();
        assert!(version_needs(&short).is_err());
        // A real ELF cut after its header: its section table is out of reach, an error.
        let me = std::fs::read("/proc/self/exe").unwrap();
        let cut = dir.path().join("cut");
        std::fs::write(&cut, &me[..4096]).unwrap();
        assert!(version_needs(&cut).is_err());
        assert_eq!(glibc_floor(&[]), None);
    }

    #[test]
    fn versions_compare_number_by_number() {
        let v = |s: &str| Version::parse(s).unwrap();
        assert!(v("2.2.5") < v("2.28"));
        assert!(v("2.28") < v("2.34"));
        assert!(v("2.9") < v("2.10"));
        assert_eq!(v("2.28").to_string(), "2.28");
        for bad in ["", "2", "2.x", "2.36-9+deb12u14", "GLIBC_2.28"] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
    }
}
