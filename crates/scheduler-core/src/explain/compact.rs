//! What a cycle keeps for its explanation while it decides: the statuses, node handles and
//! integer score tables it computed anyway, moved or shallow-copied (no names, no strings).
//! [`Record::render`] turns them into an [`Explanation`] only when one is wanted, against
//! the snapshot the cycle ran on. `run` records every attempt this way and renders only the
//! attempts it keeps (pending pods; placed ones when annotations are on).

use std::sync::Arc;

use super::{Explanation, FilterScope, Preemption};
use crate::cache::Snapshot;
use crate::framework::{Diagnosis, Framework, ScoreDetail, ScoreTable};
use crate::schedule_one::Decision;
use crate::types::{NodeInfo, PodInfo};

/// One attempt, recorded compactly. Reuse one across cycles: each cycle resets it.
#[derive(Debug, Default)]
pub struct Record {
    pub(crate) scope: FilterScope,
    /// The filter statuses (moved from the cycle when it placed the pod; a copy otherwise,
    /// since the decision hands the original to the caller).
    pub(crate) diagnosis: Diagnosis,
    pub(crate) feasible: Vec<Arc<NodeInfo>>,
    pub(crate) filtered: bool,
    pub(crate) table: ScoreTable,
    pub(crate) detail: ScoreDetail,
    /// Index into `feasible` of the node picked by score; `None` when scoring did not run.
    pub(crate) chosen: Option<usize>,
    pub(crate) preemption: Option<Preemption>,
}

impl Record {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn reset(&mut self) {
        self.scope = FilterScope::default();
        self.diagnosis = Diagnosis::default();
        self.feasible.clear();
        self.filtered = false;
        self.table = ScoreTable::default();
        self.detail.raw.clear();
        self.detail.normalized.clear();
        self.detail.weights.clear();
        self.chosen = None;
        self.preemption = None;
    }

    /// The explanation of the attempt that returned `decision`, named and worded. `snapshot`
    /// must be the one the cycle ran on (node order and skipped nodes come from it).
    pub fn render(
        &self,
        fw: &Framework,
        pod: &PodInfo,
        snapshot: &Snapshot,
        decision: &Decision,
    ) -> Explanation {
        let mut e = Explanation::new(&pod.key().to_string(), fw.profile_name());
        e.num_all_nodes = snapshot.num_nodes();
        e.filter_plugins = fw.filter_plugin_names();
        if self.filtered {
            e.record_filter(snapshot, &self.feasible, &self.diagnosis, &self.scope);
            match self.chosen {
                Some(c) => {
                    e.record_scores(&self.feasible, &self.table, &self.detail);
                    e.record_selection(&self.feasible, &self.table.totals, c);
                }
                None if self.feasible.len() == 1 => e.record_only_feasible(&self.feasible[0].name),
                None => {}
            }
        }
        e.preemption.clone_from(&self.preemption);
        // Hints judge the pod the plugins saw (RuntimeClass overhead and tolerations included).
        let resolved = fw
            .resolves_runtime_class()
            .then(|| crate::plugins::runtime_class::resolve(pod, snapshot))
            .flatten();
        e.finish(decision, resolved.as_ref().unwrap_or(pod), snapshot);
        e
    }
}
