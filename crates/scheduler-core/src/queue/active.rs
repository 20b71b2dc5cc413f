//! activeQ (upstream `active_queue.go`): pods ready to be tried, in QueueSort order, and
//! the pods popped from it that are in flight until their attempt is done.

use super::backoff::backoff_less;
use super::{Entry, InFlight, QueueKind, QueueProfiles, SchedulingQueue};
use crate::framework::QueuedPodInfo;
use crate::types::{PodInfo, PodKey};

pub(super) fn active_less(p: &dyn QueueProfiles) -> impl Fn(&Entry, &Entry) -> bool + '_ {
    move |a, b| p.less(&a.info, &b.info) || (!p.less(&b.info, &a.info) && a.seq < b.seq)
}

impl SchedulingQueue {
    /// Whether the pod was popped and its attempt is not done yet.
    pub fn is_in_flight(&self, key: &PodKey) -> bool {
        self.in_flight_by_key.contains_key(key)
    }

    pub(super) fn in_flight_of(&mut self, key: &PodKey) -> Option<&mut InFlight> {
        let uid = self.in_flight_by_key.get(key)?;
        self.in_flight.get_mut(&(key.clone(), uid.clone()))
    }

    /// Takes the next pod to schedule: activeQ's head, else the head of the backoffQ of
    /// rejected pods (if enabled; never the error backoffQ). The pod is in flight until
    /// [`done`](Self::done).
    pub fn pop(&mut self) -> Option<QueuedPodInfo> {
        let profiles = &*self.profiles;
        let entry = match self.active.pop(&active_less(profiles)) {
            Some(e) => e,
            None if self.config.pop_from_backoff => {
                self.backoff.pop(&backoff_less(&self.config, profiles))?
            }
            None => return None,
        };
        let mut info = entry.info;
        self.counters.rejectors(&info, -1);
        self.scheduling_cycle += 1;
        self.start_attempt(&mut info);
        Some(info)
    }

    /// Counts an attempt of `info` and marks it in flight in the current cycle.
    fn start_attempt(&mut self, info: &mut QueuedPodInfo) {
        info.attempts += 1;
        let (key, uid) = (info.pod.key().clone(), info.pod.uid.clone());
        self.in_flight_by_key.insert(key.clone(), uid.clone());
        self.in_flight.insert(
            (key, uid),
            InFlight {
                cycle: self.scheduling_cycle,
                latest: None,
                deleted: false,
            },
        );
    }

    /// Takes the other waiting, ungated pods of a pod group that [`pop`](Self::pop) just
    /// started (the group is scheduled in one cycle): each leaves its sub-queue and is in
    /// flight in the popped pod's cycle, until [`done`](Self::done) or a requeue.
    pub fn pop_group_members<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k PodKey>,
    ) -> Vec<QueuedPodInfo> {
        let mut taken = Vec::new();
        for key in keys {
            if self.is_in_flight(key) || self.unschedulable.get(key).is_some_and(|i| i.gated()) {
                continue;
            }
            let Some(mut info) = self.remove_waiting(key) else {
                continue;
            };
            self.start_attempt(&mut info);
            taken.push(info);
        }
        taken
    }

    /// The attempt for `pod` (as popped) is over: bound, or given up. Requeueing through
    /// [`add_unschedulable_if_not_present`](Self::add_unschedulable_if_not_present) calls it.
    pub fn done(&mut self, pod: &PodInfo) {
        let id = (pod.key().clone(), pod.uid.clone());
        if self.in_flight.remove(&id).is_none() {
            return;
        }
        if self.in_flight_by_key.get(&id.0) == Some(&id.1) {
            self.in_flight_by_key.remove(&id.0);
        }
        match self.in_flight.values().map(|f| f.cycle).min() {
            None => self.in_flight_events.clear(),
            Some(oldest) => self.in_flight_events.retain(|e| e.cycle >= oldest),
        }
    }

    pub(super) fn move_to_active(
        &mut self,
        mut info: QueuedPodInfo,
        run_pre_enqueue: bool,
    ) -> QueueKind {
        if run_pre_enqueue && !self.pass_pre_enqueue(&mut info) {
            self.insert_unschedulable(info);
            return QueueKind::Gated;
        }
        if info.initial_attempt_timestamp.is_none() {
            info.initial_attempt_timestamp = Some(self.now());
        }
        self.counters.rejectors(&info, 1);
        let seq = self.next_seq();
        self.active.push(
            info.pod.key().clone(),
            Entry { info, seq },
            &active_less(&*self.profiles),
        );
        QueueKind::Active
    }
}
