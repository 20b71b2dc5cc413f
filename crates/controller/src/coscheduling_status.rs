//! The status of scheduler-plugins' PodGroups (`scheduling.x-k8s.io/v1alpha1`), kept as its
//! PodGroup controller keeps it, so a cluster that drops scheduler-plugins' images (scheduler
//! and controller) for ferrosched still sees `phase`, `running`, `succeeded`, `failed` and
//! `occupiedBy` move. Runs while this replica leads and a profile enables Coscheduling.
//!
//! The PodGroup informer and the pod informer note each group that changed or saw one of its
//! pods change (`PodGroups::take_status_dirty`); once a second the noted groups are
//! reconciled: their pods listed (every phase: the pod informer does not keep finished
//! pods), the new status computed from the status the informer last saw
//! (`plugins::coscheduling::status::settle`, pure), and only what changed written as a
//! merge patch of `podgroups/status`. A failed write is retried at the next tick.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use scheduler_core::plugins::coscheduling::status::{self, Group, Member};
use scheduler_core::types::pod_group::{COSCHEDULING_POD_GROUP_LABEL, PodGroupKey};

use crate::client::retry::{ApiClient, status_code};
use crate::informers::pod_groups::CoschedulingV1alpha1;
use crate::state::Shared;

/// How often the noted groups are reconciled (their changes are coalesced meanwhile).
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// Reconciles noted groups every [`PERIOD`] until aborted.
pub(crate) async fn run(shared: Arc<Shared>, client: ApiClient) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut timed_out = HashSet::new();
    loop {
        tick.tick().await;
        let keys = shared.lock().groups.write().take_status_dirty();
        for key in keys {
            if let Err(e) = reconcile(&shared, &client, &key, &mut timed_out).await {
                tracing::warn!(group = %key, error = %e, "could not update the PodGroup's status; retrying");
                shared.lock().groups.write().mark_status_dirty(&key);
            }
        }
    }
}

/// One group: its pods listed, its status settled, what changed patched.
async fn reconcile(
    shared: &Shared,
    client: &ApiClient,
    key: &PodGroupKey,
    timed_out: &mut HashSet<PodGroupKey>,
) -> Result<(), kube::Error> {
    let Some(group) = shared.lock().groups.read().get(key).cloned() else {
        return Ok(()); // deleted
    };
    let pods: Api<Pod> = Api::namespaced(client.client.clone(), &key.namespace);
    let selector = format!("{COSCHEDULING_POD_GROUP_LABEL}={}", key.name);
    let lp = ListParams::default().labels(&selector);
    let list = client.call("list podgroup pods", || pods.list(&lp)).await?;
    let mut members: Vec<Member> = list.items.iter().map(member).collect();
    members.sort_by(|a, b| a.name.cmp(&b.name));
    let old = &group.coscheduling_status;
    let g = Group {
        namespace: &key.namespace,
        min_member: i32::try_from(group.min_count_as_set()).unwrap_or(i32::MAX),
        created: group.creation_timestamp,
        pods: &members,
    };
    let Some(new) = status::settle(old, g) else {
        if matches!(status::step(old, g), status::Step::TimedOut) && timed_out.insert(key.clone()) {
            tracing::warn!(group = %key, "PodGroup not reconciled: schedule time longer than 48 hours");
        }
        return Ok(());
    };
    let Some(patch) = status::merge_patch(old, &new) else {
        return Ok(());
    };
    let api: Api<CoschedulingV1alpha1> = Api::namespaced(client.client.clone(), &key.namespace);
    let pp = PatchParams::default();
    let patch = Patch::Merge(&patch);
    match client
        .call("patch podgroup status", || {
            api.patch_status(&key.name, &pp, &patch)
        })
        .await
    {
        Ok(_) => {
            tracing::debug!(group = %key, phase = %new.phase, "PodGroup status");
            Ok(())
        }
        Err(e) if status_code(&e) == Some(404) => Ok(()),
        Err(e) => Err(e),
    }
}

fn member(p: &Pod) -> Member {
    Member {
        name: p.metadata.name.clone().unwrap_or_default(),
        phase: p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        owners: p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.name.clone())
            .collect(),
    }
}
