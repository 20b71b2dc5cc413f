//! Cycles that wait for extenders, off the scheduling loop. A pod whose cycle calls an
//! extender's filter or prioritize is cut in two (scheduler-core's `schedule_extenders`):
//! the loop runs PreFilter and Filter, hands the calls to tokio's blocking pool (each call
//! bounded by its `httpTimeout`) and goes on with other pods; the answer comes back through
//! a channel and the loop resumes the cycle against the then-current snapshot.
//!
//! While a profile's pod waits, that profile's other pods are held here in the order they
//! were popped (upstream calls extenders one pod at a time), and resumed once the answer
//! is in; other profiles' pods keep flowing.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use scheduler_core::cache::Snapshot;
use scheduler_core::explain::Record;
use scheduler_core::framework::{Framework, QueuedPodInfo};
use scheduler_core::schedule_extenders::{self, ExtenderAnswer, ExtenderCalls, Step};

use super::cycle::CycleResult;
use super::{Attempt, Popped, SchedulingLoop};

/// A pod's extender calls, answered.
pub(crate) struct Answered {
    q: QueuedPodInfo,
    attempt: Attempt,
    answer: ExtenderAnswer,
    /// The attempt's record, when `run --explain` records its profile.
    record: Option<Box<Record>>,
}

/// The cycles waiting for their extenders and the pods held behind them.
pub(crate) struct Waiting {
    /// Where the calls run; `None`: on the loop's own thread (tests without a runtime).
    runtime: Option<tokio::runtime::Handle>,
    answers_tx: Sender<Box<Answered>>,
    answers: Receiver<Box<Answered>>,
    /// Profiles with a pod waiting for its extenders.
    busy: HashSet<String>,
    /// Pods popped while their profile was busy, in pop order.
    held: VecDeque<Popped>,
}

impl Waiting {
    pub(crate) fn new(runtime: Option<tokio::runtime::Handle>) -> Self {
        let (answers_tx, answers) = channel();
        Waiting {
            runtime,
            answers_tx,
            answers,
            busy: HashSet::new(),
            held: VecDeque::new(),
        }
    }

    /// An answer that came in. Check under the state lock: answers are sent under it.
    pub(super) fn answered(&self) -> Option<Box<Answered>> {
        self.answers.try_recv().ok()
    }

    /// Holds `popped` if its profile waits for an extender; gives it back otherwise.
    pub(super) fn hold_if_busy(&mut self, popped: Popped, profile: &str) -> Option<Popped> {
        if self.busy.contains(profile) {
            self.held.push_back(popped);
            None
        } else {
            Some(popped)
        }
    }

    /// The first held pod whose profile no longer waits.
    pub(super) fn take_held(&mut self, profile_of: impl Fn(&Popped) -> String) -> Option<Popped> {
        let i = self
            .held
            .iter()
            .position(|p| !self.busy.contains(&profile_of(p)))?;
        self.held.remove(i)
    }
}

impl SchedulingLoop {
    /// Starts `calls` off the loop; the answer wakes the loop (see [`Self::resume`]).
    pub(super) fn call_extenders(
        &mut self,
        q: QueuedPodInfo,
        calls: ExtenderCalls,
        attempt: Attempt,
        record: Option<Box<Record>>,
    ) {
        self.waiting.busy.insert(attempt.scheduler_name.clone());
        let tx = self.waiting.answers_tx.clone();
        let shared = Arc::clone(&self.shared);
        let work = move || {
            let answer = calls.call();
            // Sent under the lock: the loop looks for answers under it before it waits.
            let st = shared.lock();
            let _ = tx.send(Box::new(Answered {
                q,
                attempt,
                answer,
                record,
            }));
            drop(st);
            shared.notify();
        };
        match &self.waiting.runtime {
            Some(rt) => drop(rt.spawn_blocking(work)),
            None => work(),
        }
    }

    /// Goes on with the cycle whose extenders answered, on a refreshed snapshot; its
    /// profile's held pods may go next.
    pub(super) fn resume(&mut self, answered: Answered, snapshot: &mut Snapshot) {
        let Answered {
            q,
            attempt,
            answer,
            mut record,
        } = answered;
        self.waiting.busy.remove(&attempt.scheduler_name);
        let profiles = Arc::clone(&self.shared.profiles);
        let Some(fw) = profiles.for_scheduler_name(&q.pod.scheduler_name) else {
            self.shared.lock().queue.done(&q.pod);
            return;
        };
        let nominated = {
            let st = self.shared.lock();
            st.cache.update_snapshot(snapshot);
            st.queue.nominated_pods().clone()
        };
        let step = schedule_extenders::resume(
            fw,
            &mut self.alg,
            answer,
            snapshot,
            &nominated,
            record.as_deref_mut(),
        );
        let result = self.stepped(fw, q, step, &attempt, snapshot, record);
        self.carry_out(fw, result, attempt, snapshot);
    }

    /// The cycle's result for a step of a cut cycle; a decided one recorded in `record`
    /// is explained as the loop's own recorded attempts are.
    pub(super) fn stepped(
        &mut self,
        fw: &Framework,
        q: QueuedPodInfo,
        step: Step,
        attempt: &Attempt,
        snapshot: &Snapshot,
        record: Option<Box<Record>>,
    ) -> CycleResult {
        let name = &attempt.scheduler_name;
        self.shared
            .metrics
            .cycle(name, &self.alg.take_cycle_timings());
        match step {
            Step::Call(calls) => CycleResult::Extenders(q, calls, record),
            Step::Decided(decision) => {
                if let Some(r) = &record {
                    self.explain_attempt(fw, &q.pod, snapshot, &decision, name, r);
                }
                self.decided(q, decision)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use scheduler_core::types::PodInfo;

    use super::*;

    fn popped(name: &str, profile: &str) -> Popped {
        let pod = PodInfo::test("default", name)
            .scheduler_name(profile)
            .build();
        Popped {
            info: QueuedPodInfo::new(Arc::new(pod), 0),
            cycle: 0,
            started: Instant::now(),
        }
    }

    fn profile_of(p: &Popped) -> String {
        p.info.pod.scheduler_name.clone()
    }

    #[test]
    fn a_busy_profiles_pods_wait_in_pop_order_and_others_pass() {
        let mut w = Waiting::new(None);
        w.busy.insert("slow".into());
        assert!(w.hold_if_busy(popped("s1", "slow"), "slow").is_none());
        let passed = w.hold_if_busy(popped("o1", "other"), "other");
        assert_eq!(
            passed.map(|p| p.info.pod.name().to_string()).as_deref(),
            Some("o1")
        );
        assert!(w.hold_if_busy(popped("s2", "slow"), "slow").is_none());
        assert!(
            w.take_held(profile_of).is_none(),
            "held while the profile waits"
        );
        w.busy.remove("slow");
        let order: Vec<String> = std::iter::from_fn(|| w.take_held(profile_of))
            .map(|p| p.info.pod.name().to_string())
            .collect();
        assert_eq!(order, ["s1", "s2"]);
    }
}
