//! The pending-pod queue of this first slice.
//!
//! Deliberately small and self-contained so the full upstream queue (being built in
//! scheduler-core) can replace it: the rest of the controller only calls the methods of
//! [`PendingQueue`]. Semantics follow upstream's three sub-queues in simplified form:
//!
//! - *active*: ready to schedule, highest priority first, FIFO within a priority
//!   (upstream's default PrioritySort);
//! - *backoff*: failed with an error, or moved by a cluster event before its backoff expired;
//!   becomes active after `initial * 2^(attempts-1)`, capped at `max`;
//! - *unschedulable*: no node fitted; stays until a cluster event moves it (to backoff if
//!   its backoff has not expired yet, else to active), or after 5 minutes at most;
//! - *gated*: rejected by PreEnqueue (scheduling gates); re-checked on every pod update;
//! - *in flight*: popped and being scheduled or bound; updates and deletes that arrive
//!   meanwhile are remembered and applied when the attempt finishes.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PodCondition;
use scheduler_core::types::{PodInfo, PodKey};

/// Upstream's podMaxInUnschedulablePodsDuration.
pub const MAX_IN_UNSCHEDULABLE: Duration = Duration::from_secs(5 * 60);

/// A pod handed to the scheduling loop.
#[derive(Clone, Debug)]
pub struct QueuedPod {
    pub pod: Arc<PodInfo>,
    /// The pod's current PodScheduled condition, so unchanged failures need no status patch.
    pub scheduled_condition: Option<PodCondition>,
    /// Attempts including the one this pop starts.
    pub attempts: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Active,
    /// Becomes active at this instant.
    Backoff(Instant),
    /// Since this instant.
    Unschedulable(Instant),
    Gated,
    InFlight {
        gone: bool,
        moved: bool,
    },
}

#[derive(Debug)]
struct Entry {
    pod: Arc<PodInfo>,
    condition: Option<PodCondition>,
    attempts: u32,
    last_attempt: Option<Instant>,
    seq: u64,
    place: Place,
}

/// What became of an in-flight pod after [`PendingQueue::done`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Bound: forgotten by the queue.
    Bound,
    /// No fit: wait for a cluster event.
    Unschedulable,
    /// Error: retry after backoff.
    Error,
}

/// Every operation is O(log n) except [`PendingQueue::move_all`], which is linear in the
/// pods it moves.
#[derive(Debug)]
pub struct PendingQueue {
    entries: HashMap<PodKey, Entry>,
    /// (priority desc, arrival) -> pod
    active: BTreeSet<(Reverse<i32>, u64, PodKey)>,
    /// (expiry, seq) -> pod
    backoff: BTreeSet<(Instant, u64, PodKey)>,
    /// (since, seq) -> pod
    unschedulable: BTreeSet<(Instant, u64, PodKey)>,
    in_flight: HashSet<PodKey>,
    initial_backoff: Duration,
    max_backoff: Duration,
    next_seq: u64,
}

impl PendingQueue {
    pub fn new(initial_backoff: Duration, max_backoff: Duration) -> Self {
        PendingQueue {
            entries: HashMap::new(),
            active: BTreeSet::new(),
            backoff: BTreeSet::new(),
            unschedulable: BTreeSet::new(),
            in_flight: HashSet::new(),
            initial_backoff,
            max_backoff: max_backoff.max(initial_backoff),
            next_seq: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn contains(&self, key: &PodKey) -> bool {
        self.entries.contains_key(key)
    }

    /// `initial * 2^(attempts-1)`, capped at `max`.
    pub fn backoff_duration(&self, attempts: u32) -> Duration {
        let mut d = self.initial_backoff;
        for _ in 1..attempts {
            d = d.saturating_mul(2);
            if d >= self.max_backoff {
                return self.max_backoff;
            }
        }
        d.min(self.max_backoff)
    }

    fn backoff_until(&self, e: &Entry) -> Option<Instant> {
        e.last_attempt
            .map(|t| t + self.backoff_duration(e.attempts.max(1)))
    }

    /// Takes the entry out of whichever index its place keeps it in.
    fn detach(&mut self, key: &PodKey) {
        let Some(e) = self.entries.get(key) else {
            return;
        };
        match e.place {
            Place::Active => {
                self.active
                    .remove(&(Reverse(e.pod.priority), e.seq, key.clone()));
            }
            Place::Backoff(t) => {
                self.backoff.remove(&(t, e.seq, key.clone()));
            }
            Place::Unschedulable(t) => {
                self.unschedulable.remove(&(t, e.seq, key.clone()));
            }
            Place::InFlight { .. } => {
                self.in_flight.remove(key);
            }
            Place::Gated => {}
        }
    }

    /// Puts a detached entry at `place`. Entering the active queue takes a new arrival
    /// number unless `keep_seq`.
    fn attach(&mut self, key: &PodKey, place: Place, keep_seq: bool) {
        let seq = if keep_seq {
            None
        } else {
            self.next_seq += 1;
            Some(self.next_seq)
        };
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        if let Some(seq) = seq {
            e.seq = seq;
        }
        e.place = place;
        match place {
            Place::Active => {
                self.active
                    .insert((Reverse(e.pod.priority), e.seq, key.clone()));
            }
            Place::Backoff(t) => {
                self.backoff.insert((t, e.seq, key.clone()));
            }
            Place::Unschedulable(t) => {
                self.unschedulable.insert((t, e.seq, key.clone()));
            }
            Place::InFlight { .. } => {
                self.in_flight.insert(key.clone());
            }
            Place::Gated => {}
        }
    }

    fn relocate(&mut self, key: &PodKey, place: Place) {
        self.detach(key);
        self.attach(key, place, false);
    }

    /// Backoff if the pod's backoff has not expired, else active.
    fn move_to_active_or_backoff(&mut self, key: &PodKey, now: Instant) {
        let until = self.entries.get(key).and_then(|e| self.backoff_until(e));
        match until {
            Some(t) if t > now => self.relocate(key, Place::Backoff(t)),
            _ => self.relocate(key, Place::Active),
        }
    }

    /// An unassigned pod of ours was added or updated. `gated`: PreEnqueue rejected it.
    /// `changed`: the update touched more than status and bookkeeping metadata (upstream's
    /// isPodUpdated); only such updates move a waiting pod. Our own status patches do not.
    pub fn add_or_update(
        &mut self,
        pod: Arc<PodInfo>,
        condition: Option<PodCondition>,
        gated: bool,
        changed: bool,
        now: Instant,
    ) {
        let key = pod.key().clone();
        let Some(place) = self.entries.get(&key).map(|e| e.place) else {
            self.entries.insert(
                key.clone(),
                Entry {
                    pod,
                    condition,
                    attempts: 0,
                    last_attempt: None,
                    seq: 0,
                    place: Place::Gated,
                },
            );
            if !gated {
                self.attach(&key, Place::Active, false);
            }
            return;
        };
        // Detach before replacing the pod: the active index is keyed by its priority.
        self.detach(&key);
        let e = self.entries.get_mut(&key).expect("present");
        e.condition = condition;
        e.pod = pod;
        match place {
            Place::InFlight { gone, moved } => {
                let moved = moved || changed;
                self.attach(&key, Place::InFlight { gone, moved }, true);
            }
            _ if gated => self.attach(&key, Place::Gated, true),
            Place::Active => self.attach(&key, Place::Active, true),
            Place::Gated => self.attach(&key, Place::Active, false),
            // An update may make the pod schedulable (upstream: a real update of a waiting
            // pod moves it, respecting backoff).
            Place::Backoff(_) | Place::Unschedulable(_) if changed => {
                self.move_to_active_or_backoff(&key, now)
            }
            other => self.attach(&key, other, true),
        }
    }

    /// The pod was deleted, bound by someone else, or is no longer ours.
    pub fn remove(&mut self, key: &PodKey) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        if let Place::InFlight { moved, .. } = e.place {
            e.place = Place::InFlight { gone: true, moved };
            return;
        }
        self.detach(key);
        self.entries.remove(key);
    }

    /// Promotes expired backoffs and long-waiting unschedulable pods, then pops the first
    /// active pod and marks it in flight.
    pub fn pop(&mut self, now: Instant) -> Option<QueuedPod> {
        self.flush(now);
        let (_, _, key) = self.active.first().cloned()?;
        self.detach(&key);
        let e = self.entries.get_mut(&key).expect("active entries exist");
        e.attempts += 1;
        e.last_attempt = Some(now);
        let q = QueuedPod {
            pod: Arc::clone(&e.pod),
            scheduled_condition: e.condition.clone(),
            attempts: e.attempts,
        };
        self.attach(
            &key,
            Place::InFlight {
                gone: false,
                moved: false,
            },
            true,
        );
        Some(q)
    }

    fn flush(&mut self, now: Instant) {
        while let Some((t, _, key)) = self.backoff.first().cloned() {
            if t > now {
                break;
            }
            self.relocate(&key, Place::Active);
        }
        while let Some((since, _, key)) = self.unschedulable.first().cloned() {
            if now.duration_since(since) < MAX_IN_UNSCHEDULABLE {
                break;
            }
            self.move_to_active_or_backoff(&key, now);
        }
    }

    /// When the next waiting pod becomes due (the scheduling loop sleeps until then).
    pub fn next_wakeup(&self) -> Option<Instant> {
        let backoff = self.backoff.first().map(|(t, _, _)| *t);
        let unsched = self
            .unschedulable
            .first()
            .map(|(t, _, _)| *t + MAX_IN_UNSCHEDULABLE);
        backoff.into_iter().chain(unsched).min()
    }

    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// Ends an in-flight attempt. `pod` replaces the stored pod (e.g. with the nominated
    /// node set) unless a newer version arrived meanwhile. Returns false when the pod is gone
    /// (deleted or bound elsewhere meanwhile): the caller reports nothing.
    pub fn done(
        &mut self,
        key: &PodKey,
        outcome: Outcome,
        pod: Option<Arc<PodInfo>>,
        now: Instant,
    ) -> bool {
        let Some(e) = self.entries.get_mut(key) else {
            return false;
        };
        let Place::InFlight { gone, moved } = e.place else {
            return true;
        };
        if gone || outcome == Outcome::Bound {
            self.detach(key);
            self.entries.remove(key);
            return !gone;
        }
        if let Some(p) = pod
            && !moved
        {
            e.pod = p;
        }
        let until = self
            .entries
            .get(key)
            .and_then(|e| self.backoff_until(e))
            .unwrap_or(now);
        let place = match outcome {
            // An event arrived during the attempt: it may have changed the answer (upstream:
            // the pod goes to backoff instead of unschedulable).
            Outcome::Unschedulable if !moved => Place::Unschedulable(now),
            _ => Place::Backoff(until),
        };
        self.relocate(key, place);
        true
    }

    /// A cluster event that may make pods schedulable: unschedulable pods move to backoff or
    /// active; in-flight attempts remember it.
    pub fn move_all(&mut self, now: Instant) {
        let waiting: Vec<PodKey> = std::mem::take(&mut self.unschedulable)
            .into_iter()
            .map(|(_, _, k)| k)
            .collect();
        for key in waiting {
            // Already out of the index; mark it detached before placing it again.
            if let Some(e) = self.entries.get_mut(&key) {
                e.place = Place::Gated;
            }
            self.move_to_active_or_backoff(&key, now);
        }
        for key in &self.in_flight {
            if let Some(e) = self.entries.get_mut(key)
                && let Place::InFlight { gone, .. } = e.place
            {
                e.place = Place::InFlight { gone, moved: true };
            }
        }
    }

    /// The stored version of a queued pod (for tests and nomination bookkeeping).
    pub fn get(&self, key: &PodKey) -> Option<&Arc<PodInfo>> {
        self.entries.get(key).map(|e| &e.pod)
    }

    /// Pods per sub-queue (active, backoff, unschedulable, in flight), for logs and tests.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.active.len(),
            self.backoff.len(),
            self.unschedulable.len(),
            self.in_flight.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Pod, PodSpec};
    use kube::api::ObjectMeta;

    fn pod(name: &str, priority: i32) -> Arc<PodInfo> {
        Arc::new(PodInfo::from_pod(&Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("d".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                priority: Some(priority),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    fn q() -> PendingQueue {
        PendingQueue::new(Duration::from_secs(1), Duration::from_secs(10))
    }

    #[test]
    fn priority_first_then_fifo() {
        let now = Instant::now();
        let mut q = q();
        q.add_or_update(pod("a", 0), None, false, true, now);
        q.add_or_update(pod("b", 10), None, false, true, now);
        q.add_or_update(pod("c", 0), None, false, true, now);
        q.add_or_update(pod("gated", 100), None, true, true, now);
        let order: Vec<_> = std::iter::from_fn(|| q.pop(now))
            .map(|p| p.pod.name().to_string())
            .collect();
        assert_eq!(order, ["b", "a", "c"]);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let q = q();
        let secs: Vec<u64> = (1..=6).map(|a| q.backoff_duration(a).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn errors_wait_for_backoff_and_unschedulable_pods_wait_for_events() {
        let t0 = Instant::now();
        let mut q = q();
        q.add_or_update(pod("err", 0), None, false, true, t0);
        q.add_or_update(pod("unsched", 0), None, false, true, t0);
        let a = q.pop(t0).unwrap();
        let b = q.pop(t0).unwrap();
        assert!(q.done(a.pod.key(), Outcome::Error, None, t0));
        assert!(q.done(b.pod.key(), Outcome::Unschedulable, None, t0));
        assert!(q.pop(t0).is_none());
        let t1 = t0 + Duration::from_millis(1100);
        assert_eq!(q.pop(t1).unwrap().pod.name(), "err");
        assert!(q.pop(t1).is_none(), "unschedulable waits for an event");
        // A status-only update (our own PodScheduled patch coming back) does not move it.
        q.add_or_update(pod("unsched", 0), None, false, false, t1);
        assert!(q.pop(t1).is_none());
        q.move_all(t1);
        let again = q.pop(t1).unwrap();
        assert_eq!(again.pod.name(), "unsched");
        assert_eq!(again.attempts, 2);
    }

    #[test]
    fn a_pod_deleted_while_in_flight_is_dropped() {
        let now = Instant::now();
        let mut q = q();
        q.add_or_update(pod("a", 0), None, false, true, now);
        let a = q.pop(now).unwrap();
        q.remove(a.pod.key());
        assert!(!q.done(a.pod.key(), Outcome::Unschedulable, None, now));
        assert!(q.is_empty());
    }

    #[test]
    fn indexes_stay_consistent_through_updates_and_moves() {
        let now = Instant::now();
        let mut q = q();
        for i in 0..50 {
            q.add_or_update(pod(&format!("p{i}"), i % 3), None, false, true, now);
        }
        // Priority changes while active keep the index consistent.
        q.add_or_update(pod("p7", 100), None, false, true, now);
        assert_eq!(q.pop(now).unwrap().pod.name(), "p7");
        let mut n = 1;
        while let Some(p) = q.pop(now) {
            q.done(p.pod.key(), Outcome::Unschedulable, None, now);
            n += 1;
        }
        assert_eq!(n, 50);
        assert_eq!(q.counts(), (0, 0, 49, 1));
        q.move_all(now + Duration::from_secs(5));
        assert_eq!(q.counts(), (49, 0, 0, 1));
        // After MAX_IN_UNSCHEDULABLE even without events.
        let t = now + Duration::from_secs(10);
        while let Some(p) = q.pop(t) {
            q.done(p.pod.key(), Outcome::Unschedulable, None, t);
        }
        assert!(q.pop(t + Duration::from_secs(1)).is_none());
        assert_eq!(q.next_wakeup(), Some(t + MAX_IN_UNSCHEDULABLE));
        assert_eq!(q.pop(t + MAX_IN_UNSCHEDULABLE).map(|p| p.attempts), Some(3));
    }

    #[test]
    fn an_event_during_the_attempt_sends_the_pod_to_backoff() {
        let now = Instant::now();
        let mut q = q();
        q.add_or_update(pod("a", 0), None, false, true, now);
        let a = q.pop(now).unwrap();
        q.move_all(now);
        assert!(q.done(a.pod.key(), Outcome::Unschedulable, None, now));
        assert!(q.pop(now + Duration::from_millis(1001)).is_some());
    }
}
