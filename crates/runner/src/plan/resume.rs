//! `--resume`: the plan resolved again from the recorded command line must be the run's, its
//! configuration as run.json recorded it and the kept steps the first steps of its sweep.

use super::Plan;
use crate::resume::{refuse, step_name, ResumeFrom};
use anyhow::Result;

impl Plan {
    /// The plan resolved again must be the run's: the configuration run.json recorded, and
    /// the kept steps the first steps of its sweep. Returns the reason (exit 2) when it is not.
    pub fn check_resume(&self, from: &ResumeFrom) -> Result<()> {
        let plan = self;
        if let Some(f) = plan.faults.iter().find(|f| f.action.needs_faulty_disk()) {
            return Err(refuse(
                &from.dir,
                format!(
                    "its fault {} put the database on a disk iodig made for the run, and that disk and its data went with the iodig that made it; start a new run",
                    f.action.name()
                ),
            ));
        }
        let sweep = plan.sweep(&plan.workloads[0]);
        let now = serde_json::to_value(plan.run_config(&sweep))?;
        let then = serde_json::to_value(&from.doc.config)?;
        if now != then {
            let (now, then) = (flatten(&now), flatten(&then));
            let mut differences: Vec<String> = then
                .iter()
                .filter(|(k, v)| now.get(*k) != Some(*v))
                .map(|(k, v)| {
                    format!(
                        "{k} was {v}, is now {}",
                        now.get(k).map_or("unset", String::as_str)
                    )
                })
                .collect();
            differences.extend(
                now.iter()
                    .filter(|(k, _)| !then.contains_key(*k))
                    .map(|(k, v)| format!("{k} was unset, is now {v}")),
            );
            return Err(refuse(
                &from.dir,
                format!(
                    "the configuration no longer resolves to the one the run recorded ({}): a property file, experiment file or default changed since; restore it, or start a new run",
                    differences.join("; ")
                ),
            ));
        }
        let expected = plan.planned_steps(&from.kept);
        for (i, s) in from.kept.iter().enumerate() {
            let name = step_name(&s.dir);
            let ok = match expected.get(i) {
                Some(e) => e == name && s.dir == format!("steps/{i:02}-{e}"),
                None => false,
            };
            if !ok {
                return Err(refuse(
                    &from.dir,
                    format!(
                        "its step {i} ({}) is not step {i} of the plan resolved again ({}): the workloads, thread counts or repetitions changed since; restore the experiment, or start a new run",
                        s.dir,
                        expected.get(i).map_or("none", String::as_str)
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `config.properties.recordcount` → `"1000"`, for naming what changed.
fn flatten(v: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![(String::from("config"), v)];
    while let Some((path, v)) = todo.pop() {
        match v {
            serde_json::Value::Object(m) => {
                todo.extend(m.iter().map(|(k, v)| (format!("{path}.{k}"), v)));
            }
            other => {
                out.insert(path, other.to_string());
            }
        }
    }
    out
}
