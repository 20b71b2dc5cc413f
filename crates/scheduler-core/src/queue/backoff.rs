//! backoffQ (upstream `backoff_queue.go`): pods that failed recently and wait out
//! `initial * 2^(attempts-1)`, in two heaps: pods plugins rejected, and pods whose attempt
//! ended in an error (never popped before their backoff expires).

use super::active::active_less;
use super::clock::nanos;
use super::{Entry, IncomingEvent, QueueConfig, QueueKind, QueueProfiles, SchedulingQueue};
use crate::framework::QueuedPodInfo;
use crate::types::PodKey;

pub(super) fn backoff_expiry(cfg: &QueueConfig, info: &QueuedPodInfo) -> u64 {
    info.timestamp
        .saturating_add(nanos(cfg.backoff_duration(info.attempts)))
}

pub(super) fn backoff_less<'a>(
    cfg: &'a QueueConfig,
    p: &'a dyn QueueProfiles,
) -> impl Fn(&Entry, &Entry) -> bool + 'a {
    move |a, b| {
        let (ea, eb) = (backoff_expiry(cfg, &a.info), backoff_expiry(cfg, &b.info));
        ea < eb || (ea == eb && active_less(p)(a, b))
    }
}

impl SchedulingQueue {
    /// Whether the pod waits in the error backoffQ (its last attempt failed with an error,
    /// not a rejection): it leaves only when its backoff expires.
    pub fn in_error_backoff(&self, key: &PodKey) -> bool {
        self.error_backoff.contains(key)
    }

    /// Moves pods whose backoff has expired from backoffQ to activeQ (upstream runs this
    /// every second). Returns how many moved.
    pub fn flush_backoff_completed(&mut self) -> usize {
        self.flush_backoff_heap(false) + self.flush_backoff_heap(true)
    }

    fn flush_backoff_heap(&mut self, errors: bool) -> usize {
        let now = self.now();
        let mut moved = 0;
        loop {
            let heap = if errors {
                &mut self.error_backoff
            } else {
                &mut self.backoff
            };
            match heap.peek() {
                Some(e) if backoff_expiry(&self.config, &e.info) <= now => {}
                _ => break,
            }
            let entry = heap
                .pop(&backoff_less(&self.config, &*self.profiles))
                .expect("peeked");
            self.counters.rejectors(&entry.info, -1);
            // PreEnqueue already ran when the pod entered backoffQ.
            let rerun = !self.config.pop_from_backoff;
            let kind = self.move_to_active(entry.info, rerun);
            self.counters.incoming(kind, IncomingEvent::BackoffComplete);
            if kind == QueueKind::Active {
                moved += 1;
            }
        }
        moved
    }

    pub(super) fn is_backing_off(&self, info: &QueuedPodInfo) -> bool {
        backoff_expiry(&self.config, info) > self.now()
    }

    pub(super) fn move_to_backoff(&mut self, mut info: QueuedPodInfo) -> QueueKind {
        if self.config.pop_from_backoff && !self.pass_pre_enqueue(&mut info) {
            self.insert_unschedulable(info);
            return QueueKind::Gated;
        }
        self.counters.rejectors(&info, 1);
        let seq = self.next_seq();
        let key = info.pod.key().clone();
        // Upstream: no unschedulable and no pending plugin means the attempt hit an error.
        let heap = if info.unschedulable_plugins.is_empty() && info.pending_plugins.is_empty() {
            &mut self.error_backoff
        } else {
            &mut self.backoff
        };
        heap.push(
            key,
            Entry { info, seq },
            &backoff_less(&self.config, &*self.profiles),
        );
        QueueKind::Backoff
    }
}
