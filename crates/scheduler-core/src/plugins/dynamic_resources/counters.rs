//! Partitionable devices (`ResourceSlice.spec.sharedCounters`, device `consumesCounters`;
//! upstream's `checkAvailableCounters`): a device is allocatable only while what it
//! consumes, added to what allocated and in-flight devices of its pool consume and to what
//! this allocation picked so far, stays within each of the pool's counter sets.
//!
//! [`PoolCounters`] is built once per slice change, in the shared device index (the counter
//! sets of a pool's newest generation and the devices consuming from them); [`Tracker`]
//! lives for one allocation on one node:
//! it works out what is left per pool the first time a device of that pool is tried, then
//! adds and takes back the consumption of the devices the search picks and drops.
//!
//! Compatibility groups (`consumesCounters[].compatibilityGroups`): devices consuming from
//! the same counter set are allocated together only when the groups of all of them (held
//! ones and picks) have one in common; a device without groups goes only with others
//! without groups. Devices on different counter sets are never compared. The groups of held
//! devices are read from their slices: the 1.37 API records no snapshot of them in the
//! claim. With the DRADeviceCompatibilityGroups gate off (upstream's default), devices
//! declaring groups are never allocated, nor devices joining a counter set on which a held
//! device declares them.

use std::collections::{BTreeMap, HashMap};

use crate::types::dra::{CounterConsumption, DeviceId, ResourceSliceInfo};

use super::Run;

/// Counter set name -> counter name -> amount (nano-units).
type Sets = BTreeMap<String, BTreeMap<String, i128>>;

/// One pool's shared counters and the devices consuming them.
#[derive(Debug, Clone, Default)]
pub(crate) struct PoolCounters {
    sets: Sets,
    consumers: Vec<(DeviceId, Vec<CounterConsumption>)>,
}

impl PoolCounters {
    /// From the slices of one pool's newest generation; None when no device consumes
    /// counters (nothing to track).
    pub(crate) fn of<'a>(
        slices: impl IntoIterator<Item = &'a ResourceSliceInfo>,
    ) -> Option<PoolCounters> {
        let mut p = PoolCounters::default();
        for s in slices {
            for (set, counters) in &s.shared_counters {
                let e = p.sets.entry(set.clone()).or_default();
                for (name, amount) in counters {
                    e.insert(name.clone(), *amount);
                }
            }
            for d in s.devices.iter().filter(|d| !d.consumes.is_empty()) {
                let id = DeviceId {
                    driver: s.driver.clone(),
                    pool: s.pool.clone(),
                    device: d.name.clone(),
                };
                p.consumers.push((id, d.consumes.clone()));
            }
        }
        (!p.consumers.is_empty()).then_some(p)
    }
}

fn add(to: &mut Sets, c: &[CounterConsumption], sign: i128) {
    for k in c {
        let set = to.entry(k.counter_set.clone()).or_default();
        for (name, amount) in &k.counters {
            *set.entry(name.clone()).or_default() += sign * amount;
        }
    }
}

/// Counter set name -> the compatibility groups of each device consuming from it.
type Groups = HashMap<String, Vec<Vec<String>>>;

/// Whether a device with `groups` may join the devices with `others` on one counter set.
fn compatible<'a>(groups: &[String], mut others: impl Iterator<Item = &'a Vec<String>>) -> bool {
    if groups.is_empty() {
        return others.all(Vec::is_empty);
    }
    let mut common: Vec<&String> = groups.iter().collect();
    for o in others {
        common.retain(|g| o.contains(g));
        if common.is_empty() {
            return false;
        }
    }
    true
}

/// Counters during one allocation attempt on one node.
#[derive(Default)]
pub(crate) struct Tracker {
    /// Per pool index: what the counter sets hold minus what allocated devices consume.
    available: HashMap<usize, Sets>,
    /// Per pool index: what the devices picked in this attempt consume.
    consumed: HashMap<usize, Sets>,
    /// Per pool index: the groups of the devices holding counters, and of the picks.
    held_groups: HashMap<usize, Groups>,
    picked_groups: HashMap<usize, Groups>,
}

impl Tracker {
    /// Adds the device's consumption if every counter of the pool still covers what is
    /// consumed; otherwise leaves everything as it was and says no. `in_use` tells which
    /// devices hold their counters already (allocated or in flight, not freed).
    pub(crate) fn take(
        &mut self,
        pool: usize,
        counters: &PoolCounters,
        consumes: &[CounterConsumption],
        in_use: impl Fn(&DeviceId) -> bool,
        enforce_groups: bool,
    ) -> bool {
        let held = self.held_groups.entry(pool).or_insert_with(|| {
            let mut g = Groups::new();
            for (id, c) in &counters.consumers {
                if in_use(id) {
                    for k in c {
                        g.entry(k.counter_set.clone())
                            .or_default()
                            .push(k.groups.clone());
                    }
                }
            }
            g
        });
        let picked = self.picked_groups.entry(pool).or_default();
        let groups_ok = consumes.iter().all(|k| {
            let mut others = held
                .get(&k.counter_set)
                .into_iter()
                .chain(picked.get(&k.counter_set))
                .flatten();
            if enforce_groups {
                compatible(&k.groups, others)
            } else {
                // Gate off (upstream's skew rule): the device itself declares none (the
                // candidate list left those out); it may not join a set whose groups this
                // scheduler is not allowed to enforce.
                others.all(Vec::is_empty)
            }
        });
        if !groups_ok {
            return false;
        }
        let available = self.available.entry(pool).or_insert_with(|| {
            let mut a = counters.sets.clone();
            for (id, c) in &counters.consumers {
                if in_use(id) {
                    // Only counters the sets define are limited (API validation makes a
                    // device name existing ones); left negative means none are left.
                    for k in c {
                        if let Some(set) = a.get_mut(&k.counter_set) {
                            for (name, amount) in &k.counters {
                                if let Some(v) = set.get_mut(name) {
                                    *v -= amount;
                                }
                            }
                        }
                    }
                }
            }
            a
        });
        let consumed = self.consumed.entry(pool).or_default();
        add(consumed, consumes, 1);
        let fits = available.iter().all(|(set, counters)| {
            counters.iter().all(|(name, left)| {
                let used = consumed
                    .get(set)
                    .and_then(|s| s.get(name))
                    .copied()
                    .unwrap_or(0);
                *left >= used
            })
        });
        if !fits {
            add(consumed, consumes, -1);
        } else {
            let picked = self.picked_groups.entry(pool).or_default();
            for k in consumes {
                picked
                    .entry(k.counter_set.clone())
                    .or_default()
                    .push(k.groups.clone());
            }
        }
        fits
    }

    /// Takes back a device's consumption (the search dropped it).
    pub(crate) fn give_back(&mut self, pool: usize, consumes: &[CounterConsumption]) {
        if let Some(c) = self.consumed.get_mut(&pool) {
            add(c, consumes, -1);
        }
        if let Some(p) = self.picked_groups.get_mut(&pool) {
            for k in consumes {
                if let Some(v) = p.get_mut(&k.counter_set)
                    && let Some(i) = v.iter().rposition(|g| *g == k.groups)
                {
                    v.remove(i);
                }
            }
        }
    }
}

impl Run<'_> {
    /// Counters for the candidate: true when it consumes none or they are left.
    pub(super) fn take_counters(&mut self, cand: usize) -> bool {
        let al = self.al;
        let c = &self.cands[cand];
        match al.index.counters.get(&c.pool) {
            Some(pc) if !c.dev.consumes.is_empty() => self.counters.take(
                c.pool,
                pc,
                &c.dev.consumes,
                |id| al.holds_counters(id),
                al.compatibility_groups,
            ),
            _ => true,
        }
    }

    pub(super) fn give_back_counters(&mut self, cand: usize) {
        let c = &self.cands[cand];
        if !c.dev.consumes.is_empty() {
            self.counters.give_back(c.pool, &c.dev.consumes);
        }
    }
}

#[cfg(test)]
#[path = "counters_tests.rs"]
mod tests;
