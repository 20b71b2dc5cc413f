//! Per-attempt scratch space that plugins share between extension points.

use std::any::{Any, TypeId};
use std::collections::HashMap;

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
/// no string constants can collide.
#[derive(Default)]
pub struct CycleState {
    data: HashMap<TypeId, Box<dyn StateData>>,
    skip_filter: Vec<&'static str>,
    skip_score: Vec<&'static str>,
}

impl Clone for CycleState {
    fn clone(&self) -> Self {
        CycleState {
            data: self
                .data
                .iter()
                .map(|(k, v)| (*k, (**v).clone_box()))
                .collect(),
            skip_filter: self.skip_filter.clone(),
            skip_score: self.skip_score.clone(),
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

    pub fn write<T: StateData>(&mut self, value: T) {
        self.data.insert(TypeId::of::<T>(), Box::new(value));
    }

    pub fn read<T: StateData>(&self) -> Option<&T> {
        self.data
            .get(&TypeId::of::<T>())
            .and_then(|b| (**b).as_any().downcast_ref::<T>())
    }

    pub fn read_mut<T: StateData>(&mut self) -> Option<&mut T> {
        self.data
            .get_mut(&TypeId::of::<T>())
            .and_then(|b| (**b).as_any_mut().downcast_mut::<T>())
    }

    pub fn remove<T: StateData>(&mut self) {
        self.data.remove(&TypeId::of::<T>());
    }

    /// PreFilter returned Skip: the plugin's Filter is not run this cycle.
    pub(crate) fn skip_filter_plugin(&mut self, name: &'static str) {
        self.skip_filter.push(name);
    }

    pub(crate) fn filter_skipped(&self, name: &'static str) -> bool {
        self.skip_filter.contains(&name)
    }

    /// PreScore returned Skip: the plugin's Score is not run this cycle.
    pub(crate) fn skip_score_plugin(&mut self, name: &'static str) {
        self.skip_score.push(name);
    }

    pub(crate) fn score_skipped(&self, name: &'static str) -> bool {
        self.skip_score.contains(&name)
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
