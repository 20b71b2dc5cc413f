//! A binary heap addressable by pod key, so entries can be updated or removed in
//! O(log n) (upstream: `internal/heap`). The order is passed to each call, because the
//! queue's order comes from the QueueSort plugin and the backoff clock.

use crate::types::PodKey;

/// `less(a, b)`: `a` comes out before `b`.
pub(crate) type Less<'a, T> = &'a dyn Fn(&T, &T) -> bool;

#[derive(Debug)]
pub(crate) struct KeyedHeap<T> {
    items: Vec<(PodKey, T)>,
    index: foldhash::HashMap<PodKey, usize>,
}

impl<T> Default for KeyedHeap<T> {
    fn default() -> Self {
        KeyedHeap {
            items: Vec::new(),
            index: Default::default(),
        }
    }
}

impl<T> KeyedHeap<T> {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn contains(&self, key: &PodKey) -> bool {
        self.index.contains_key(key)
    }

    pub fn get(&self, key: &PodKey) -> Option<&T> {
        self.index.get(key).map(|&i| &self.items[i].1)
    }

    pub fn peek(&self) -> Option<&T> {
        self.items.first().map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter().map(|(_, v)| v)
    }

    /// Inserts `value`, or replaces the entry with the same key and restores the order.
    pub fn push(&mut self, key: PodKey, value: T, less: Less<'_, T>) {
        if let Some(&i) = self.index.get(&key) {
            self.items[i].1 = value;
            self.fix(i, less);
            return;
        }
        let i = self.items.len();
        self.index.insert(key.clone(), i);
        self.items.push((key, value));
        self.up(i, less);
    }

    pub fn pop(&mut self, less: Less<'_, T>) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        Some(self.remove_at(0, less))
    }

    pub fn remove(&mut self, key: &PodKey, less: Less<'_, T>) -> Option<T> {
        let i = *self.index.get(key)?;
        Some(self.remove_at(i, less))
    }

    /// Changes an entry in place and restores the order.
    pub fn update(&mut self, key: &PodKey, less: Less<'_, T>, f: impl FnOnce(&mut T)) -> bool {
        let Some(&i) = self.index.get(key) else {
            return false;
        };
        f(&mut self.items[i].1);
        self.fix(i, less);
        true
    }

    fn remove_at(&mut self, i: usize, less: Less<'_, T>) -> T {
        let last = self.items.len() - 1;
        self.swap(i, last);
        let (key, value) = self.items.pop().expect("non-empty");
        self.index.remove(&key);
        if i < self.items.len() {
            self.fix(i, less);
        }
        value
    }

    fn fix(&mut self, i: usize, less: Less<'_, T>) {
        if !self.down(i, less) {
            self.up(i, less);
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        if a == b {
            return;
        }
        self.items.swap(a, b);
        self.index.insert(self.items[a].0.clone(), a);
        self.index.insert(self.items[b].0.clone(), b);
    }

    fn up(&mut self, mut i: usize, less: Less<'_, T>) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if !less(&self.items[i].1, &self.items[parent].1) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    /// Sifts down; true if the entry moved.
    fn down(&mut self, start: usize, less: Less<'_, T>) -> bool {
        let n = self.items.len();
        let mut i = start;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let mut child = l;
            if l + 1 < n && less(&self.items[l + 1].1, &self.items[l].1) {
                child = l + 1;
            }
            if !less(&self.items[child].1, &self.items[i].1) {
                break;
            }
            self.swap(i, child);
            i = child;
        }
        i > start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn key(i: u32) -> PodKey {
        PodKey::new("ns", &format!("p{i}"))
    }

    #[test]
    fn pops_in_order_after_updates_and_removals() {
        let less: Less<'_, i64> = &|a, b| a < b;
        let mut h = KeyedHeap::default();
        let mut rng = fastrand::Rng::with_seed(12345);
        let mut model: HashMap<PodKey, i64> = HashMap::new();
        for step in 0..2000u32 {
            let r = rng.u32(..);
            let k = key(r % 50);
            match step % 4 {
                0 | 1 => {
                    let v = i64::from(r % 1000);
                    h.push(k.clone(), v, less);
                    model.insert(k, v);
                }
                2 => {
                    assert_eq!(h.remove(&k, less), model.remove(&k));
                }
                _ => {
                    let got = h.pop(less);
                    let min = model.values().min().copied();
                    assert_eq!(got, min);
                    if let Some(m) = min {
                        let k = model.iter().find(|(_, v)| **v == m).map(|(k, _)| k.clone());
                        // Equal values may belong to different keys: drop whichever the heap
                        // gave up by checking which key vanished.
                        let gone = model
                            .keys()
                            .find(|k| !h.contains(k) && model[*k] == m)
                            .cloned()
                            .or(k);
                        model.remove(&gone.unwrap());
                    }
                }
            }
            assert_eq!(h.len(), model.len());
            for (k, v) in &model {
                assert_eq!(h.get(k), Some(v));
            }
        }
    }
}
