//! USDT probes of an ELF file (`.note.stapsdt`): where each probe sits as a file offset, the
//! place a uprobe attaches to. Only what HotSpot's probes need: 64-bit little-endian files.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// One USDT probe of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// `hotspot`.
    pub provider: String,
    /// `safepoint__begin`.
    pub name: String,
    /// Byte offset of the probe's instruction in the file.
    pub file_offset: u64,
    /// Address of its is-enabled counter; 0 when it has none (always on).
    pub semaphore: u64,
    /// The argument specification (`1@%dil`), empty when it takes none.
    pub args: String,
}

fn u16_at(b: &[u8], at: usize) -> Result<u16> {
    let s = b.get(at..at + 2).context("truncated ELF file")?;
    Ok(u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    let s = b.get(at..at + 4).context("truncated ELF file")?;
    Ok(u32::from_le_bytes(s.try_into().expect("4 bytes")))
}

fn u64_at(b: &[u8], at: usize) -> Result<u64> {
    let s = b.get(at..at + 8).context("truncated ELF file")?;
    Ok(u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

fn usize_of(v: u64) -> Result<usize> {
    usize::try_from(v).context("offset out of range")
}

/// A section: (name, address, file offset, size).
struct Section<'a> {
    name: &'a [u8],
    addr: u64,
    offset: u64,
    size: u64,
}

fn sections(b: &[u8]) -> Result<Vec<Section<'_>>> {
    let shoff = usize_of(u64_at(b, 0x28)?)?;
    let shentsize = usize::from(u16_at(b, 0x3a)?);
    let shnum = usize::from(u16_at(b, 0x3c)?);
    let shstrndx = usize::from(u16_at(b, 0x3e)?);
    let header = |i: usize| shoff + i * shentsize;
    let strtab = usize_of(u64_at(b, header(shstrndx) + 24)?)?;
    (0..shnum)
        .map(|i| {
            let h = header(i);
            let name_at = strtab + usize_of(u64::from(u32_at(b, h)?))?;
            let rest = b.get(name_at..).context("section name out of the file")?;
            let end = rest.iter().position(|c| *c == 0).unwrap_or(rest.len());
            Ok(Section {
                name: &rest[..end],
                addr: u64_at(b, h + 16)?,
                offset: u64_at(b, h + 24)?,
                size: u64_at(b, h + 32)?,
            })
        })
        .collect()
}

/// The file offset of virtual address `addr`: inside the loadable segment that maps it.
fn file_offset(b: &[u8], addr: u64) -> Result<u64> {
    let phoff = usize_of(u64_at(b, 0x20)?)?;
    let phentsize = usize::from(u16_at(b, 0x36)?);
    let phnum = usize::from(u16_at(b, 0x38)?);
    for i in 0..phnum {
        let h = phoff + i * phentsize;
        const PT_LOAD: u32 = 1;
        if u32_at(b, h)? != PT_LOAD {
            continue;
        }
        let (offset, vaddr, filesz) = (u64_at(b, h + 8)?, u64_at(b, h + 16)?, u64_at(b, h + 32)?);
        if addr >= vaddr && addr < vaddr + filesz {
            return Ok(addr - vaddr + offset);
        }
    }
    bail!("address {addr:#x} is in no loadable segment")
}

/// Every USDT probe of an ELF file's bytes.
pub fn probes_of(b: &[u8]) -> Result<Vec<Probe>> {
    if b.get(..4) != Some(b"\x7fELF".as_slice()) {
        bail!("not an ELF file");
    }
    if b.get(4..6) != Some([2u8, 1].as_slice()) {
        bail!("not a 64-bit little-endian ELF file");
    }
    let secs = sections(b)?;
    // Prelinking moves the file's addresses; the notes keep the base they were written for.
    let base = secs
        .iter()
        .find(|s| s.name == b".stapsdt.base")
        .map(|s| s.addr);
    let Some(notes) = secs.iter().find(|s| s.name == b".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let (mut at, end) = (
        usize_of(notes.offset)?,
        usize_of(notes.offset + notes.size)?,
    );
    let align4 = |n: usize| (n + 3) & !3;
    let mut out = Vec::new();
    while at + 12 <= end {
        let namesz = u32_at(b, at)? as usize;
        let descsz = u32_at(b, at + 4)? as usize;
        let kind = u32_at(b, at + 8)?;
        let name_at = at + 12;
        let desc_at = name_at + align4(namesz);
        at = desc_at + align4(descsz);
        const NT_STAPSDT: u32 = 3;
        if kind != NT_STAPSDT || b.get(name_at..name_at + namesz) != Some(b"stapsdt\0".as_slice()) {
            continue;
        }
        let desc = b.get(desc_at..desc_at + descsz).context("truncated note")?;
        let mut pc = u64_at(desc, 0)?;
        let note_base = u64_at(desc, 8)?;
        let semaphore = u64_at(desc, 16)?;
        if let Some(actual) = base {
            pc = pc.wrapping_add(actual.wrapping_sub(note_base));
        }
        let mut strings = desc[24..].split(|c| *c == 0);
        let mut next = || String::from_utf8_lossy(strings.next().unwrap_or_default()).into_owned();
        let (provider, name, args) = (next(), next(), next());
        out.push(Probe {
            provider,
            name,
            file_offset: file_offset(b, pc)?,
            semaphore,
            args,
        });
    }
    Ok(out)
}

/// Every USDT probe of the ELF file at `path`.
pub fn probes(path: &Path) -> Result<Vec<Probe>> {
    let b = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    probes_of(&b).with_context(|| format!("{}: reading its USDT notes", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_elf_is_refused() {
        assert!(probes_of(b"#!/bin/sh\n").is_err());
        assert!(probes_of(b"\x7fELF\x01\x01").is_err());
    }
}
