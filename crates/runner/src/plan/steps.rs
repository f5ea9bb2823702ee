//! The names of a plan's steps: what each step's directory is called, and the steps a run of
//! the plan takes in order, which a resumed run's finished steps are checked against.

use super::{Plan, ResolvedWorkload};
use crate::step_plan::Phase;
use crate::stop_rule::SweepStops;
use iodig_model::StepSummary;

impl Plan {
    /// The name of a run step (`workloada-t4`, `workloada-t4-r2` with repetitions), which
    /// names its directory.
    pub fn run_step_name(&self, w: &ResolvedWorkload, threads: u64, rep: u32) -> String {
        if self.req.repetitions > 1 {
            format!("{}-t{threads}-r{}", w.label, rep + 1)
        } else {
            format!("{}-t{threads}", w.label)
        }
    }

    /// The names of the steps a run of this plan takes, in order, as far as they are known before
    /// they run: the load when the first of `recorded` is one, then every run step, without the
    /// thread counts that the stop rule met by a `recorded` step took out of a sweep (a step still
    /// to run may take out more). What a resumed run's finished steps are checked against.
    pub fn planned_steps(&self, recorded: &[StepSummary]) -> Vec<String> {
        let plan = self;
        let mut names = Vec::new();
        if recorded
            .first()
            .is_some_and(|s| s.phase == Phase::Load.name())
        {
            names.push("load".to_string());
        }
        let mut stops = SweepStops::new(plan.req.stop_when.clone());
        for rep in 0..plan.req.repetitions.max(1) {
            for w in &plan.workloads {
                for &t in &plan.sweep(w) {
                    if stops.skips(&w.label, t) {
                        continue;
                    }
                    if let Some(stop) = recorded
                        .get(names.len())
                        .and_then(|s| s.sweep_stop.as_ref())
                    {
                        stops.replay(&w.label, &stop.skipped);
                    }
                    names.push(plan.run_step_name(w, t, rep));
                }
            }
        }
        names
    }
}
