//! YCSB-style properties: `-P` files (later ones win) and `-p key=value` overrides, with typed
//! getters whose errors name the property and the fix.

use crate::secret::redact_value;
use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

/// The properties that make two loads the same dataset: another value loads other data (the
/// runner's dataset marker, `compare`'s caveats).
pub const DATASET_PROPERTIES: [&str; 12] = [
    "recordcount",
    "insertstart",
    "insertcount",
    "fieldcount",
    "fieldlength",
    "minfieldlength",
    "fieldlengthdistribution",
    "fieldnameprefix",
    "insertorder",
    "zeropadding",
    "dataintegrity",
    "table",
];

/// A property whose value cannot be used; the message names it and says what would fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PropertyError(pub String);

/// The effective properties of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Properties {
    map: BTreeMap<String, String>,
    /// Where each property came from (file path or `-p`), for error messages.
    origin: BTreeMap<String, String>,
}

impl Properties {
    /// No properties yet: add files with [`Properties::load_file`], then overrides with
    /// [`Properties::apply_override`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a Java-style properties file: `key=value` or `key: value`, `#`/`!` comments,
    /// trailing `\` continues a line.
    pub fn load_file(&mut self, path: &Path) -> Result<(), PropertyError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            PropertyError(format!(
                "-P {}: cannot read the workload file ({e}); give the path of a YCSB property file such as workloads/workloada",
                path.display()
            ))
        })?;
        self.load_str(&text, &path.display().to_string());
        Ok(())
    }

    /// Reads properties-file text; `origin` names it in later error messages.
    pub fn load_str(&mut self, text: &str, origin: &str) {
        let mut pending = String::new();
        for raw in text.lines() {
            let line = raw.trim_start();
            if pending.is_empty()
                && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
            {
                continue;
            }
            if let Some(stripped) = line.strip_suffix('\\') {
                pending.push_str(stripped);
                continue;
            }
            pending.push_str(line);
            let entry = std::mem::take(&mut pending);
            let (key, value) = split_entry(&entry);
            if !key.is_empty() {
                self.set_from(key, value, origin);
            }
        }
    }

    /// Applies one `-p key=value` override.
    pub fn apply_override(&mut self, arg: &str) -> Result<(), PropertyError> {
        match arg.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                self.set_from(k.trim(), v.trim(), "-p");
                Ok(())
            }
            _ => Err(PropertyError(format!(
                "-p {arg}: malformed property; write it as -p name=value (for example -p recordcount=100000)"
            ))),
        }
    }

    /// Sets a property as iodig's own choice (its origin reads `iodig`), replacing any value.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.set_from(key, &value.into(), "iodig");
    }

    /// Sets a value only when the property is not already given.
    pub fn set_default(&mut self, key: &str, value: impl Into<String>) {
        if !self.map.contains_key(key) {
            self.set(key, value);
        }
    }

    fn set_from(&mut self, key: &str, value: &str, origin: &str) {
        self.map.insert(key.to_string(), value.to_string());
        self.origin.insert(key.to_string(), origin.to_string());
    }

    /// The value; none when the property is not set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.map.get(key).map(String::as_str)
    }

    /// Whether the property is set, to any value.
    pub fn contains(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// Unsets a property, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.origin.remove(key);
        self.map.remove(key)
    }

    /// The value, or `default` when the property is not set.
    pub fn get_str<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.get(key).unwrap_or(default)
    }

    /// Where a property was set (`-p`, a file path, or `iodig` for a default).
    pub fn origin(&self, key: &str) -> Option<&str> {
        self.origin.get(key).map(String::as_str)
    }

    /// Parses a property, naming it and its origin on failure.
    pub fn parse<T: FromStr>(
        &self,
        key: &str,
        default: T,
        expected: &str,
    ) -> Result<T, PropertyError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.trim().parse::<T>().map_err(|_| {
                PropertyError(format!(
                    "property {key}={} (from {}): expected {expected}",
                    redact_value(key, v),
                    self.origin(key).unwrap_or("?")
                ))
            }),
        }
    }

    /// A whole number ≥ 0, or `default` when the property is not set.
    pub fn get_u64(&self, key: &str, default: u64) -> Result<u64, PropertyError> {
        self.parse(key, default, "a whole number ≥ 0")
    }

    /// A time in whole seconds written as any duration (`600`, `10m`, `1h`; see
    /// [`crate::duration::parse_duration`]), or `default` when the property is not set.
    pub fn get_secs(&self, key: &str, default: u64) -> Result<u64, PropertyError> {
        let Some(v) = self.get(key) else {
            return Ok(default);
        };
        let d = crate::duration::parse_duration(v)
            .ok()
            .filter(|d| d.subsec_nanos() == 0);
        d.map(|d| d.as_secs()).ok_or_else(|| {
            PropertyError(format!(
                "property {key}={} (from {}): expected a whole number of seconds, or a duration in whole seconds (10m, 1h)",
                redact_value(key, v),
                self.origin(key).unwrap_or("?")
            ))
        })
    }

    /// A finite number, or `default` when the property is not set.
    pub fn get_f64(&self, key: &str, default: f64) -> Result<f64, PropertyError> {
        let v: f64 = self.parse(key, default, "a number")?;
        if v.is_finite() {
            Ok(v)
        } else {
            Err(PropertyError(format!(
                "property {key}: expected a finite number"
            )))
        }
    }

    /// `true` or `false` (any case), or `default` when the property is not set.
    pub fn get_bool(&self, key: &str, default: bool) -> Result<bool, PropertyError> {
        match self.get(key).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v == "true" => Ok(true),
            Some(v) if v == "false" => Ok(false),
            Some(v) => Err(PropertyError(format!(
                "property {key}={}: expected true or false",
                redact_value(key, &v)
            ))),
        }
    }

    /// Errors for a value outside `choices`.
    pub fn get_choice<'a>(
        &'a self,
        key: &str,
        default: &'a str,
        choices: &[&str],
    ) -> Result<&'a str, PropertyError> {
        let v = self.get_str(key, default);
        if choices.contains(&v) {
            Ok(v)
        } else {
            Err(PropertyError(format!(
                "property {key}={}: unknown value; use one of {}",
                redact_value(key, v),
                choices.join(", ")
            )))
        }
    }

    /// Every property and its value in name order, secret values included; for anything
    /// recorded or shown use [`Properties::to_redacted_map`].
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// A copy of every property, secret values included; for anything recorded or shown use
    /// [`Properties::to_redacted_map`].
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.map.clone()
    }

    /// The properties as they may be recorded (run.json, reports): secret values replaced by
    /// [`crate::secret::REDACTED`].
    pub fn to_redacted_map(&self) -> BTreeMap<String, String> {
        let mut m = self.map.clone();
        crate::secret::redact_properties(&mut m);
        m
    }
}

/// Splits a properties-file entry at the first unescaped `=`, `:` or whitespace, as Java does.
fn split_entry(entry: &str) -> (&str, &str) {
    let idx = entry.find(['=', ':', ' ', '\t']);
    match idx {
        None => (entry.trim(), ""),
        Some(i) => {
            let key = entry[..i].trim();
            let rest = entry[i..].trim_start();
            let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
            (key, rest.trim())
        }
    }
}

/// The known name closest to `name` (edit distance), to suggest in "unknown property" errors.
pub fn nearest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (levenshtein(name, k), *k))
        .min()
        .filter(|(d, k)| *d <= (k.len().max(name.len()) / 2).max(2))
        .map(|(_, k)| k)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_entries_and_overrides() {
        let dir = std::env::temp_dir().join(format!("iodig-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("w");
        std::fs::write(
            &f,
            "# c\nrecordcount=1000\nreadproportion : 0.5\nlong=a\\\n  b\n! bang\n",
        )
        .unwrap();
        let mut p = Properties::new();
        p.load_file(&f).unwrap();
        p.apply_override("recordcount=5").unwrap();
        assert_eq!(p.get("recordcount"), Some("5"));
        assert_eq!(p.get("readproportion"), Some("0.5"));
        assert_eq!(p.get("long"), Some("ab"));
        assert!(p
            .apply_override("noequals")
            .unwrap_err()
            .0
            .contains("-p noequals"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn time_properties_take_any_duration_in_whole_seconds() {
        let mut p = Properties::new();
        for (v, secs) in [("600", 600), ("10m", 600), ("1h", 3600), ("1500ms", 0)] {
            p.apply_override(&format!("maxexecutiontime={v}")).unwrap();
            match p.get_secs("maxexecutiontime", 0) {
                Ok(s) => assert_eq!(s, secs, "{v}"),
                Err(e) => assert!(v == "1500ms" && e.0.contains("whole seconds"), "{v}: {e}"),
            }
        }
        assert_eq!(p.get_secs("unset", 7), Ok(7));
        p.apply_override("maxexecutiontime=soon").unwrap();
        assert!(p.get_secs("maxexecutiontime", 0).is_err());
    }

    #[test]
    fn errors_about_a_secret_property_do_not_show_its_value() {
        let mut p = Properties::new();
        p.apply_override("db.password=S3cr3t").unwrap();
        for e in [
            p.get_u64("db.password", 0).unwrap_err().0,
            p.get_bool("db.password", false).unwrap_err().0,
            p.get_choice("db.password", "a", &["a"]).unwrap_err().0,
        ] {
            assert!(
                e.contains("db.password=***") && !e.contains("S3cr3t"),
                "{e}"
            );
        }
        assert_eq!(p.to_redacted_map()["db.password"], "***");
        assert_eq!(p.get("db.password"), Some("S3cr3t"));
    }

    #[test]
    fn nearest_suggests_typo_fix() {
        assert_eq!(
            nearest("recordcont", &["recordcount", "operationcount"]),
            Some("recordcount")
        );
        assert_eq!(nearest("zzzzzzzzzzzzzz", &["recordcount"]), None);
    }
}
