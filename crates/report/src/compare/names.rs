//! How the comparison names its runs: `LABEL=RUN_DIR` on the command line, else the label the
//! run recorded (`iodig run --label`), else its directory's name; and the names refused, each
//! error naming the argument it came from (exit 2).

use crate::data::{load_run_streaming, RunData};
use crate::error::ReportError;
use std::path::{Path, PathBuf};

/// One run argument of `iodig compare`, split into the label it gives and the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RunArg {
    /// The argument as given, for error messages.
    pub arg: String,
    /// `LABEL` of `LABEL=RUN_DIR`; none for a bare directory.
    pub label: Option<String>,
    /// The run directory.
    pub dir: PathBuf,
}

/// Splits `LABEL=RUN_DIR`. An argument that is a path as it stands is a directory (a run
/// directory may hold `=` in its name); otherwise the first `=` whose right side exists splits
/// it (a label may hold `=` too), else the first `=` (the directory is then reported missing).
pub(super) fn split_run_arg(arg: &Path, exists: impl Fn(&Path) -> bool) -> RunArg {
    let text = arg.to_string_lossy().into_owned();
    let bare = || RunArg {
        arg: text.clone(),
        label: None,
        dir: arg.to_path_buf(),
    };
    if exists(arg) {
        return bare();
    }
    let splits: Vec<(String, PathBuf)> = text
        .match_indices('=')
        .map(|(i, _)| (text[..i].to_string(), PathBuf::from(&text[i + 1..])))
        .collect();
    match splits
        .iter()
        .find(|(_, dir)| exists(dir))
        .or_else(|| splits.first())
    {
        Some((label, dir)) => RunArg {
            arg: text.clone(),
            label: Some(label.clone()),
            dir: dir.clone(),
        },
        None => bare(),
    }
}

/// Reads the runs the arguments name, each under the name it is compared by: a label given on
/// the command line replaces the one the run recorded. Refused (exit 2, naming the argument):
/// a label that is empty or holds control characters, a `LABEL=DIR` whose DIR is not a run, and
/// two runs under one name when a label made it so.
pub(super) fn load_named(args: &[PathBuf]) -> Result<Vec<RunData>, ReportError> {
    let args: Vec<RunArg> = args
        .iter()
        .map(|a| split_run_arg(a, Path::exists))
        .collect();
    for a in &args {
        if let Some(label) = &a.label {
            iodig_model::check_label(label)
                .map_err(|e| ReportError::Label(format!("{}: {e}", a.arg)))?;
        }
    }
    let mut runs = Vec::with_capacity(args.len());
    for a in &args {
        // Step by step, as the report reads a run: each step's views are made while its series
        // are in memory, then the series go, so several long runs fit side by side.
        let mut views = Vec::new();
        let loaded = load_run_streaming(
            &a.dir,
            |run, step| {
                // Compare reads each figure's peak of a step (storage_io), not its seconds.
                let mut v = crate::analysis::step_view_of(run, step);
                v.keep_peaks();
                views.push(v);
            },
            true,
        );
        let mut run = loaded.map_err(|e| match &a.label {
            Some(_) => ReportError::RunDir(e.context(format!("{}: not a run", a.arg))),
            None => ReportError::RunDir(e),
        })?;
        match &a.label {
            Some(label) => run.doc.config.label = Some(label.clone()),
            None => {
                if let Some(label) = &run.doc.config.label {
                    iodig_model::check_label(label).map_err(|e| {
                        ReportError::Label(format!(
                            "{}: its run.json's label {label:?}: {e}; name it here with LABEL={}",
                            a.arg, a.arg
                        ))
                    })?;
                }
            }
        }
        run.step_views = views;
        runs.push(run);
    }
    let names: Vec<(String, bool)> = runs
        .iter()
        .map(|r| (r.name(), r.doc.config.label.is_some()))
        .collect();
    if let Some((i, j)) = same_label(&names) {
        return Err(ReportError::Label(format!(
            "{} and {}: both runs are named {:?}, so their columns and legends could not be told apart; give each its own name with LABEL=RUN_DIR",
            args[i].arg, args[j].arg, names[i].0
        )));
    }
    Ok(runs)
}

/// The first two runs compared under one name where a label gave it (two unlabelled
/// directories of the same name elsewhere keep today's names).
pub(super) fn same_label(names: &[(String, bool)]) -> Option<(usize, usize)> {
    for (j, (name, labelled)) in names.iter().enumerate() {
        if let Some(i) = names[..j]
            .iter()
            .position(|(n, l)| n == name && (*l || *labelled))
        {
            return Some((i, j));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(arg: &str, existing: &[&str]) -> (Option<String>, String) {
        let a = split_run_arg(Path::new(arg), |p| {
            existing.iter().any(|e| Path::new(e) == p)
        });
        assert_eq!(a.arg, arg);
        (a.label, a.dir.to_string_lossy().into_owned())
    }

    #[test]
    fn label_and_directory_split_where_the_directory_exists() {
        assert_eq!(split("runs/a", &["runs/a"]), (None, "runs/a".into()));
        assert_eq!(
            split("Micron 9300=runs/a", &["runs/a"]),
            (Some("Micron 9300".into()), "runs/a".into())
        );
        // A directory whose name holds "=" is a directory, not a label.
        assert_eq!(
            split("runs/rf=3", &["runs/rf=3"]),
            (None, "runs/rf=3".into())
        );
        // A label holding "=": the split that names an existing directory wins.
        assert_eq!(
            split("rf=3=runs/x", &["runs/x"]),
            (Some("rf=3".into()), "runs/x".into())
        );
        assert_eq!(
            split("fast=runs/rf=3", &["runs/rf=3"]),
            (Some("fast".into()), "runs/rf=3".into())
        );
        // Nothing exists: the first "=" splits, and loading then names the missing directory.
        assert_eq!(
            split("fast=nowhere", &[]),
            (Some("fast".into()), "nowhere".into())
        );
        assert_eq!(split("nowhere", &[]), (None, "nowhere".into()));
    }

    #[test]
    fn a_label_shared_by_two_runs_is_found() {
        let n = |v: &[(&str, bool)]| -> Vec<(String, bool)> {
            v.iter().map(|(s, l)| (s.to_string(), *l)).collect()
        };
        assert_eq!(same_label(&n(&[("a", true), ("b", true)])), None);
        assert_eq!(
            same_label(&n(&[("a", true), ("b", false), ("a", true)])),
            Some((0, 2))
        );
        // A label that is another run's directory name is as ambiguous.
        assert_eq!(
            same_label(&n(&[("run-1", false), ("run-1", true)])),
            Some((0, 1))
        );
        // Two unlabelled directories of one name (in other folders) keep today's names.
        assert_eq!(same_label(&n(&[("run-1", false), ("run-1", false)])), None);
    }
}
