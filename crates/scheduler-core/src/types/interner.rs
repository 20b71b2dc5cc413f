//! The set behind every interned value ([`super::Sym`], [`super::Taints`]): one shared copy
//! per distinct value, handed out by lookup. Values no one else holds any more (a deleted
//! node's label values, say) are swept when the set has doubled since the last sweep, so
//! the set follows the cluster without a sweep per insert.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;

pub(crate) struct Interner<E> {
    set: HashSet<E, rustc_hash::FxBuildHasher>,
    /// Size after the last sweep; the next one runs when the set has doubled.
    swept_at: usize,
}

impl<E: Hash + Eq> Default for Interner<E> {
    fn default() -> Self {
        Interner {
            set: HashSet::default(),
            swept_at: 64,
        }
    }
}

impl<E: Hash + Eq + Clone> Interner<E> {
    /// The stored copy equal to `key`, or `make()` stored first. A sweep before the insert
    /// drops the entries `unused` says only the set holds.
    pub(crate) fn intern<Q>(
        &mut self,
        key: &Q,
        make: impl FnOnce() -> E,
        unused: fn(&E) -> bool,
    ) -> E
    where
        E: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(e) = self.set.get(key) {
            return e.clone();
        }
        if self.set.len() >= 2 * self.swept_at {
            self.set.retain(|e| !unused(e));
            self.swept_at = self.set.len().max(64);
        }
        let e = make();
        self.set.insert(e.clone());
        e
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }
}
