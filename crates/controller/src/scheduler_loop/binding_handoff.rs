//! The hand-off to binding, for a pod its own cycle placed and for each member a group cycle
//! placed alike: the pod leaves the nominator and the kept explanations, is assumed in the
//! cache (a group cycle assumed its members already, as it placed them) and its binding
//! cycle goes to the executor (upstream's `bindingCycle`, run asynchronously: PreBind
//! writes, the Binding, PostBind; on failure the assumption is forgotten and the pod goes
//! to the failure handler, [`handle_binding_failure`](super::failure::handle_binding_failure)).

use std::sync::Arc;

use scheduler_core::framework::{Framework, QueuedPodInfo};
use scheduler_core::outcome::{Failure, Placement};
use scheduler_core::schedule_one::assume_decision;

use super::Attempt;
use super::failure::{Handled, handle_failure};
use crate::binding::executor::Action;
use crate::binding::podref::PodRef;
use crate::state::State;

/// Whether the hand-off assumes the pod.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assume {
    /// Its own cycle placed it: assume it now.
    Now,
    /// A group cycle placed and assumed it.
    Done,
}

/// What the hand-off did with a pod.
pub(crate) enum HandOff {
    /// Its binding cycle, for the executor.
    Bind(Action),
    /// It could not be assumed: the failure handler took it.
    Failed(Handled),
}

/// Hands `queued`, placed as `placement`, to its binding cycle (under the state lock).
/// A pod that cannot be assumed is unreserved and goes to the failure handler instead,
/// with a scheduler error, as upstream's.
pub(crate) fn hand_off_to_binding(
    st: &mut State,
    fw: &Framework,
    queued: QueuedPodInfo,
    placement: Placement,
    attempt: &Attempt,
    assume: Assume,
) -> HandOff {
    let key = queued.pod.key().clone();
    st.queue.delete_nominated_if_exists(&key);
    st.explain.remove(&key);
    let mut p = placement;
    if assume == Assume::Now
        && let Err(e) = assume_decision(&mut st.cache, Arc::clone(&p.pod), &p.node, &p.state)
    {
        tracing::warn!(pod = %key, error = %e, "assume failed");
        let handled = handle_failure(st, queued, Failure::error(e.to_string()), attempt);
        fw.run_unreserve(&mut p.state, &p.pod, &p.node);
        return HandOff::Failed(handled);
    }
    tracing::debug!(pod = %key, node = %p.node, "scheduled; binding");
    HandOff::Bind(Action::Bind {
        pod: PodRef::of(&queued.pod),
        volumes: p.volumes(),
        node: p.node,
        scheduler_name: attempt.scheduler_name.clone(),
        info: p.pod,
        state: p.state,
        queued,
        cycle: attempt.cycle,
        started: attempt.started,
    })
}
