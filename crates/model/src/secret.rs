//! Secrets (passwords, tokens, private keys) never leave the process: this is the one rule that
//! decides what is a secret and replaces it with [`REDACTED`] wherever iodig records or prints
//! a property or a command line (run.json, reports, error messages).
//!
//! The rule goes by the property's name, not by a list of known properties, so a property a
//! binding adds later (`…keystore.password`, `…api_token`) is covered without anyone
//! remembering to list it; a value that is PEM private-key material is redacted whatever its
//! name says.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// What stands in for a secret value.
pub const REDACTED: &str = "***";

/// Words that mark a secret wherever they appear in a name part (`PGPASSWORD`, `dbpasswd`):
/// long enough never to be part of an innocent word.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "apikey",
    "privatekey",
    "accesskey",
];

/// Short words that mark a secret only as a whole part (`auth.token`, not `tokenaware`).
const SECRET_PARTS: &[&str] = &["pwd", "token", "tokens", "pass"];

/// Two adjacent parts that mark a secret when written apart (`private.key`, `api_key`).
const SECRET_PAIRS: &[(&str, &str)] = &[
    ("private", "key"),
    ("api", "key"),
    ("access", "key"),
    ("key", "material"),
];

/// Last parts that name where a secret is kept, not the secret: `cassandra.password.file` is
/// a path worth recording to repeat the run.
const LOCATION_WORDS: &[&str] = &["file", "path", "dir", "env"];

/// The lower-case parts of a name: split at `.`, `_`, `-`, other punctuation and lower→upper
/// case changes (`keyStorePassword` → key, store, password).
fn name_parts(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            parts.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

/// Whether a property (or flag) of this name holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let parts = name_parts(name);
    if parts
        .last()
        .is_some_and(|l| LOCATION_WORDS.contains(&l.as_str()))
    {
        return false;
    }
    parts
        .iter()
        .any(|p| SECRET_PARTS.contains(&p.as_str()) || SECRET_WORDS.iter().any(|w| p.contains(w)))
        || parts
            .windows(2)
            .any(|w| SECRET_PAIRS.contains(&(w[0].as_str(), w[1].as_str())))
}

/// Whether a value is private-key material, whatever the property is called.
pub fn is_secret_value(value: &str) -> bool {
    value.contains("PRIVATE KEY-----") || value.contains("BEGIN ENCRYPTED PRIVATE KEY")
}

/// The value as it may be recorded: [`REDACTED`] for a secret, else unchanged.
pub fn redact_value<'a>(name: &str, value: &'a str) -> Cow<'a, str> {
    if is_secret_name(name) || is_secret_value(value) {
        Cow::Borrowed(REDACTED)
    } else {
        Cow::Borrowed(value)
    }
}

/// Redacts the secret values of a property map in place.
pub fn redact_properties(map: &mut BTreeMap<String, String>) {
    for (k, v) in map.iter_mut() {
        if is_secret_name(k) || is_secret_value(v) {
            *v = REDACTED.to_string();
        }
    }
}

/// One command-line argument as it may be recorded: in `NAME=VALUE` (`-p NAME=VALUE`,
/// `-pNAME=VALUE`, `--flag=NAME=VALUE`) the value of a secret NAME is redacted; an argument
/// holding private-key material is redacted whole.
pub fn redact_arg(arg: &str) -> Cow<'_, str> {
    if is_secret_value(arg) {
        return Cow::Borrowed(REDACTED);
    }
    for (i, _) in arg.match_indices('=') {
        let head = &arg[..i];
        // The name is the last word before this `=`: `--property=NAME=…` names NAME.
        let name = head.rsplit(['=', ' ']).next().unwrap_or(head);
        if is_secret_name(name) {
            return Cow::Owned(format!("{head}={REDACTED}"));
        }
    }
    Cow::Borrowed(arg)
}

/// A command line as it may be recorded (run.json `tool.command_line`, reports).
pub fn redact_args(args: &[String]) -> Vec<String> {
    args.iter().map(|a| redact_arg(a).into_owned()).collect()
}

/// Redacts `NAME=VALUE` and `NAME: VALUE` assignments of secret names in free text, line by
/// line: for messages that quote a file or a command line (a parser's error, a child's output).
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        out.push_str(&redact_line(line));
    }
    out
}

fn redact_line(line: &str) -> Cow<'_, str> {
    if is_secret_value(line) {
        return Cow::Borrowed(REDACTED);
    }
    for (i, sep) in line.match_indices(['=', ':']) {
        let head = line[..i].trim_end();
        let name = head
            .rsplit(|c: char| c.is_whitespace() || c == '=' || c == '"' || c == '\'')
            .next()
            .unwrap_or(head);
        if !name.is_empty() && is_secret_name(name) {
            return Cow::Owned(format!("{}{sep} {REDACTED}", &line[..i]));
        }
    }
    Cow::Borrowed(line)
}

/// A secret held in memory: its `Debug` and `Display` print [`REDACTED`], so a config struct
/// that holds one can be logged or put in an error without leaking it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value so that printing it shows [`REDACTED`].
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, for the one place that must hand it over (a login).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_found_by_their_parts() {
        for name in [
            "cassandra.password",
            "password",
            "cassandra.keystore.password",
            "keyStorePassword",
            "ssl.key.passphrase",
            "aws.secret_access_key",
            "api_token",
            "auth.token",
            "client.private.key",
            "tls.privateKey",
            "service.apikey",
            "db.credentials",
            "PGPASSWORD",
            "-pcassandra.password",
        ] {
            assert!(is_secret_name(name), "{name} is a secret");
        }
        for name in [
            "cassandra.username",
            "cassandra.keyspace",
            "cassandra.truststore",
            "cassandra.password.file",
            "tls.private.key.file",
            "recordcount",
            "keyprefix",
            "insertorder",
            "hosts",
            "fieldnameprefix",
            "requestdistribution",
            "tokenaware",
            "",
        ] {
            assert!(!is_secret_name(name), "{name} is not a secret");
        }
    }

    #[test]
    fn property_maps_keep_names_and_lose_secret_values() {
        let mut m = BTreeMap::new();
        m.insert("cassandra.password".to_string(), "S3cr3t".to_string());
        m.insert("cassandra.username".to_string(), "bob".to_string());
        m.insert(
            "tls.client".to_string(),
            "-----BEGIN PRIVATE KEY-----\nMII…".to_string(),
        );
        redact_properties(&mut m);
        assert_eq!(m["cassandra.password"], REDACTED);
        assert_eq!(m["cassandra.username"], "bob");
        assert_eq!(m["tls.client"], REDACTED);
        assert_eq!(redact_value("cassandra.password", "x"), REDACTED);
        assert_eq!(redact_value("recordcount", "5"), "5");
    }

    #[test]
    fn command_lines_keep_flags_and_lose_secret_values() {
        let args: Vec<String> = [
            "iodig",
            "run",
            "-p",
            "cassandra.password=S3cr3t=x",
            "-pcassandra.password=S3cr3t",
            "--property=api_token=abc",
            "-p",
            "recordcount=10",
            "-p",
            "cassandra.password.file=/run/pw",
            "-----BEGIN RSA PRIVATE KEY-----abc",
        ]
        .map(String::from)
        .to_vec();
        let r = redact_args(&args);
        assert_eq!(
            r,
            vec![
                "iodig",
                "run",
                "-p",
                "cassandra.password=***",
                "-pcassandra.password=***",
                "--property=api_token=***",
                "-p",
                "recordcount=10",
                "-p",
                "cassandra.password.file=/run/pw",
                "***",
            ]
        );
        assert!(!r.join(" ").contains("S3cr3t"));
    }

    #[test]
    fn free_text_loses_secret_assignments() {
        let t = "line 3: cassandra.password = \"S3cr3t\"\nrecordcount=5\npassword: hunter2";
        let r = redact_text(t);
        assert!(!r.contains("S3cr3t") && !r.contains("hunter2"), "{r}");
        assert!(r.contains("recordcount=5"), "{r}");
        assert!(r.contains("cassandra.password"), "{r}");
    }

    #[test]
    fn a_secret_prints_as_the_marker() {
        let s = Secret::new("S3cr3t");
        assert_eq!(format!("{s} {s:?}"), "*** ***");
        assert_eq!(s.expose(), "S3cr3t");
    }
}
