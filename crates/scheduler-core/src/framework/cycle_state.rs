//! Per-attempt scratch space that plugins share between extension points.

use std::any::{Any, TypeId};
use std::sync::Arc;
use std::time::Instant;

use super::{Code, ExtensionPoint, PluginTimer};

/// Anything a plugin stores in the cycle state. Clone is required because preemption
/// evaluates candidate nodes on copies of the state.
pub trait StateData: Any + Send + Sync {
    fn clone_box(&self) -> Box<dyn StateData>;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + Clone + Send + Sync> StateData for T {
    fn clone_box(&self) -> Box<dyn StateData> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Keyed by the stored type, so each plugin uses its own private struct as the key and
/// no string constants can collide. A short vector beats a hash map here: a cycle holds a
/// dozen entries and filters read them once per node.
#[derive(Default)]
pub struct CycleState {
    data: Vec<(TypeId, Box<dyn StateData>)>,
    /// Bit i: the i-th PreFilter plugin returned Skip (its Filter and AddPod/RemovePod don't run).
    skip_pre_filter: u64,
    /// Bit i: the i-th Filter plugin does not run this cycle.
    skip_filter: u64,
    /// Bit i: the i-th Score plugin does not run this cycle.
    skip_score: u64,
    /// Set on cycles whose plugin durations are sampled for metrics.
    plugin_timer: Option<Arc<PluginTimer>>,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            data: self
                .data
                .iter()
                .map(|(k, v)| (*k, (**v).clone_box()))
                .collect(),
            skip_pre_filter: self.skip_pre_filter,
            skip_filter: self.skip_filter,
            skip_score: self.skip_score,
            plugin_timer: self.plugin_timer.clone(),
        }
    }
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field("entries", &self.data.len())
            .field("skip_filter", &self.skip_filter)
            .field("skip_score", &self.skip_score)
            .finish()
    }
}

impl CycleState {
    pub fn new() -> Self {
        Self::default()
    }

    /// Times every plugin call of this cycle into `timer` (a sampled cycle).
    pub fn set_plugin_timer(&mut self, timer: Option<Arc<PluginTimer>>) {
        self.plugin_timer = timer;
    }

    /// The start of a plugin call, when this cycle is sampled.
    #[inline]
    pub(crate) fn plugin_start(&self) -> Option<Instant> {
        self.plugin_timer.as_ref().map(|_| Instant::now())
    }

    /// Records a plugin call of a once-per-cycle point started at `start`.
    #[inline]
    pub(crate) fn plugin_done(
        &self,
        plugin: &'static str,
        point: ExtensionPoint,
        code: Code,
        start: Option<Instant>,
    ) {
        if let (Some(t), Some(start)) = (&self.plugin_timer, start) {
            t.record(plugin, point, code, start);
        }
    }

    /// The start of a Filter or Score plugin call on one node, when this cycle times those.
    #[inline]
    /// Whether this cycle times each per-node Filter and Score call.
    pub(crate) fn times_node_plugins(&self) -> bool {
        self.plugin_timer.as_ref().is_some_and(|t| t.node_loops())
    }

    pub(crate) fn node_plugin_start(&self) -> Option<Instant> {
        match &self.plugin_timer {
            Some(t) if t.node_loops() => Some(Instant::now()),
            _ => None,
        }
    }

    /// Records the `i`-th Filter plugin's call on one node.
    #[inline]
    pub(crate) fn filter_done(&self, i: usize, code: Code, start: Option<Instant>) {
        if let (Some(t), Some(start)) = (&self.plugin_timer, start) {
            t.filter(i, code, start);
        }
    }

    /// Records the `i`-th Score plugin's call on one node.
    #[inline]
    pub(crate) fn score_done(&self, i: usize, code: Code, start: Option<Instant>) {
        if let (Some(t), Some(start)) = (&self.plugin_timer, start) {
            t.score(i, code, start);
        }
    }

    pub fn write<T: StateData>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        match self.data.iter_mut().find(|(k, _)| *k == id) {
            Some((_, v)) => *v = Box::new(value),
            None => self.data.push((id, Box::new(value))),
        }
    }

    pub fn read<T: StateData>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.data
            .iter()
            .find(|(k, _)| *k == id)
            .and_then(|(_, b)| (**b).as_any().downcast_ref::<T>())
    }

    pub fn read_mut<T: StateData>(&mut self) -> Option<&mut T> {
        let id = TypeId::of::<T>();
        self.data
            .iter_mut()
            .find(|(k, _)| *k == id)
            .and_then(|(_, b)| (**b).as_any_mut().downcast_mut::<T>())
    }

    pub fn remove<T: StateData>(&mut self) {
        let id = TypeId::of::<T>();
        self.data.retain(|(k, _)| *k != id);
    }

    /// The `i`-th PreFilter plugin returned Skip.
    pub(crate) fn skip_pre_filter_plugin(&mut self, i: usize) {
        self.skip_pre_filter |= 1 << i;
    }

    pub(crate) fn pre_filter_skipped(&self, i: usize) -> bool {
        self.skip_pre_filter & (1 << i) != 0
    }

    /// The `i`-th Filter plugin does not run this cycle.
    pub(crate) fn skip_filter_plugin(&mut self, i: usize) {
        self.skip_filter |= 1 << i;
    }

    /// The indices, in order, of the first `n` Filter plugins that run this cycle (one
    /// step per plugin that runs, none for those skipped: this is walked for every node).
    pub(crate) fn filters_to_run(&self, n: usize) -> impl Iterator<Item = usize> + use<> {
        let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut left = all & !self.skip_filter;
        std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let i = left.trailing_zeros() as usize;
            left &= left - 1;
            Some(i)
        })
    }

    /// The `i`-th Score plugin does not run this cycle (its PreScore returned Skip).
    pub(crate) fn skip_score_plugin(&mut self, i: usize) {
        self.skip_score |= 1 << i;
    }

    pub(crate) fn score_skipped(&self, i: usize) -> bool {
        self.skip_score & (1 << i) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Counts(Vec<u32>);
    #[derive(Clone, Debug, PartialEq)]
    struct Other(u8);

    #[test]
    fn values_are_keyed_by_type_and_clones_are_deep() {
        let mut s = CycleState::new();
        s.write(Counts(vec![1]));
        s.write(Other(7));
        assert_eq!(s.read::<Counts>(), Some(&Counts(vec![1])));
        let copy = s.clone();
        s.read_mut::<Counts>().unwrap().0.push(2);
        assert_eq!(copy.read::<Counts>(), Some(&Counts(vec![1])));
        assert_eq!(s.read::<Counts>(), Some(&Counts(vec![1, 2])));
        s.remove::<Other>();
        assert!(s.read::<Other>().is_none());
        assert_eq!(copy.read::<Other>(), Some(&Other(7)));
    }
}
