//! A real screenshot of a page by headless Chromium, read back as pixels (a small PNG reader:
//! 8-bit RGB or RGBA, not interlaced, as Chromium writes them).

use std::io::Read;
use std::path::Path;

/// A screenshot's pixels, row by row, RGB.
pub struct Shot {
    pub width: usize,
    pub height: usize,
    pub rgb: Vec<[u8; 3]>,
}

impl Shot {
    /// Pixels within `tolerance` of `colour` in each channel.
    pub fn count(&self, colour: [u8; 3], tolerance: u8) -> usize {
        self.rgb
            .iter()
            .filter(|p| (0..3).all(|i| p[i].abs_diff(colour[i]) <= tolerance))
            .count()
    }
}

/// `page` as headless Chromium shows it in a `width` × `height` window.
pub fn screenshot(page: &Path, width: u32, height: u32) -> Shot {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("shot.png");
    let out = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs (scripts/test.sh installs it: apt-get install chromium)");
    assert!(
        png.is_file(),
        "chromium wrote no screenshot: {out:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    read_png(&std::fs::read(&png).unwrap())
}

/// The pixels of an 8-bit, non-interlaced RGB or RGBA PNG.
pub fn read_png(bytes: &[u8]) -> Shot {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let (mut width, mut height, mut channels) = (0usize, 0usize, 0usize);
    let mut idat = Vec::new();
    let mut at = 8;
    while at + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let kind = &bytes[at + 4..at + 8];
        let data = &bytes[at + 8..at + 8 + len];
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes(data[0..4].try_into().unwrap()) as usize;
                height = u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize;
                assert_eq!((data[8], data[12]), (8, 0), "8-bit, not interlaced");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    t => panic!("PNG colour type {t}"),
                };
            }
            b"IDAT" => idat.extend_from_slice(data),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = width * channels;
    let mut prev = vec![0u8; stride];
    let mut rgb = Vec::with_capacity(width * height);
    for row in raw.chunks(stride + 1).take(height) {
        let (filter, line) = (row[0], &row[1..]);
        let mut cur = vec![0u8; stride];
        for i in 0..stride {
            let a = if i >= channels { cur[i - channels] } else { 0 };
            let b = prev[i];
            let c = if i >= channels { prev[i - channels] } else { 0 };
            let predicted = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => paeth(a, b, c),
                f => panic!("PNG filter {f}"),
            };
            cur[i] = line[i].wrapping_add(predicted);
        }
        rgb.extend(cur.chunks(channels).map(|p| [p[0], p[1], p[2]]));
        prev = cur;
    }
    Shot { width, height, rgb }
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = (
        (p - i16::from(a)).abs(),
        (p - i16::from(b)).abs(),
        (p - i16::from(c)).abs(),
    );
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}
