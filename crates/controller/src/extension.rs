//! The hook for scheduler plugins whose inputs come from the cluster through another crate
//! (today SchedulingPolicy: the `scheduling-policy` crate depends on this one, never the
//! reverse). The binary passes [`Extension`]s in [`crate::RunOptions`]; [`crate::run`]
//! registers their plugins, starts their tasks and hands them two narrow handles:
//! [`QueueEvents`] to let the queue retry the pods their plugin held back, and
//! [`FailureReporter`] to report pods as unschedulable while this instance leads.
//! Extensions never see the cache, the queue or the action channel themselves.

use std::sync::Arc;

use kube::Client;
use scheduler_core::framework::{ActionType, EventResource, Registry};
use scheduler_core::types::PodKey;
use tokio::sync::mpsc::Sender;
use tokio::task::JoinHandle;

use crate::binding::executor::Action;
use crate::binding::pod_status::{self, Nomination};
use crate::binding::podref::PodRef;
use crate::state::Shared;

/// A plugin fed from the cluster by code outside this crate. Each method is called once,
/// in this order; the tasks they return are aborted at shutdown.
pub trait Extension: Send {
    /// Adds its plugin factories to the registry the profiles are built from.
    fn register(&self, registry: &mut Registry);
    /// Starts the tasks that keep the plugin's inputs current. Called before leader
    /// election, so a new leader starts warm; they must not write to the API server.
    fn start(&mut self, client: &Client, events: QueueEvents) -> Vec<JoinHandle<()>>;
    /// Starts the tasks that write, once this instance leads. They are aborted after the
    /// scheduling loop stopped, before in-flight API calls are drained.
    fn lead(&mut self, reporter: FailureReporter) -> Vec<JoinHandle<()>>;
}

/// Fires cluster events at the scheduling queue.
#[derive(Clone)]
pub struct QueueEvents {
    shared: Arc<Shared>,
}

impl QueueEvents {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        QueueEvents {
            shared: Arc::clone(shared),
        }
    }

    /// Moves the held-back pods whose rejecting plugins registered for this event, and
    /// wakes the scheduling thread.
    pub fn fire(&self, resource: EventResource, action: ActionType) {
        self.shared.lock().fire(resource, action);
        self.shared.notify();
    }
}

/// Reports pods as unschedulable through the binding executor, as a failed attempt is.
#[derive(Clone)]
pub struct FailureReporter {
    shared: Arc<Shared>,
    actions: Sender<Action>,
}

impl FailureReporter {
    pub(crate) fn new(shared: &Arc<Shared>, actions: Sender<Action>) -> Self {
        FailureReporter {
            shared: Arc::clone(shared),
            actions,
        }
    }

    /// A FailedScheduling event with `message` and PodScheduled=False (reason
    /// Unschedulable; the nomination is kept). False once the executor has stopped.
    pub async fn unschedulable(
        &self,
        pod: PodRef,
        key: &PodKey,
        scheduler_name: String,
        message: String,
    ) -> bool {
        let condition = self.shared.lock().conditions.get(key).cloned();
        let failure = Action::Failure {
            pod,
            scheduler_name,
            reason: pod_status::REASON_UNSCHEDULABLE,
            message,
            condition,
            nomination: Nomination::Keep,
        };
        self.actions.send(failure).await.is_ok()
    }
}
