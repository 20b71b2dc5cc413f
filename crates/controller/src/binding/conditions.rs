//! DynamicResources' PreBind wait for device binding conditions (upstream
//! DRADeviceBindingConditions). After the claims' allocation and reservation are written,
//! the binding cycle waits, in its own task, until every binding condition of every
//! allocated device is True in the claims' `status.devices` (written by the driver, seen
//! through the ResourceClaim informer), then binds. A True failure condition, a claim
//! allocated longer than `bindingTimeout` ago, or `bindingTimeout` passing while waiting
//! ends the wait with upstream's error; the caller then takes the allocation back and the
//! pod is tried again.

use std::time::{Duration, SystemTime};

use scheduler_core::plugins::dynamic_resources::claim_not_found;
use scheduler_core::types::dra::binding::{
    BindingReadiness, DEVICE_BINDING_TIMEOUT, claim_binding_timeout,
};

use crate::binding::claims::{PREBIND_PREFIX, Written, undo_claims};
use crate::binding::event_recorder::{self as events, EventSpec, EventType};
use crate::binding::executor::Executor;
use crate::binding::podref::PodRef;
use crate::state::Shared;
use scheduler_core::plugins::dynamic_resources::binding_conditions::{
    BindingWait, REASON_BINDING_CONDITIONS_PENDING, waiting_for_binding_conditions,
};

/// How often the informer's copies of the claims are read (upstream polls every 5 s; this
/// is a read of the local cache, so it may be shorter).
pub(crate) const POLL_PERIOD: Duration = Duration::from_millis(200);

/// Where the claims stand now: Ok(true) when every binding condition holds, Ok(false) while
/// some are pending, Err(upstream's message) on a failure or a claim's timeout.
fn check(
    shared: &Shared,
    claims: &[(String, String)],
    timeout: Duration,
    now: SystemTime,
) -> Result<bool, String> {
    let st = shared.lock();
    let dra = st.cache.dra();
    for (ns, name) in claims {
        let Some(c) = dra.claim(ns, name) else {
            return Err(claim_not_found(name));
        };
        // Not allocated (any more): not ready, as upstream.
        if c.allocation.is_none() {
            return Ok(false);
        }
        let Some(b) = &c.binding else {
            continue;
        };
        match &b.readiness {
            BindingReadiness::Ready => {}
            BindingReadiness::Failed(m) => return Err(m.clone()),
            BindingReadiness::Pending if b.timed_out(timeout, now) => {
                return Err(claim_binding_timeout(name));
            }
            BindingReadiness::Pending => return Ok(false),
        }
    }
    Ok(true)
}

/// Upstream's error when PreBind's context is cancelled (here: the scheduler shuts down).
pub(crate) const CONTEXT_CANCELED: &str = "context canceled";

/// Waits until the binding conditions of `claims` all hold, or `closing` turns true.
/// `Err` is the error after upstream's PreBind prefix.
pub(crate) async fn wait_until_ready(
    shared: &Shared,
    claims: &[(String, String)],
    timeout: Duration,
    mut closing: tokio::sync::watch::Receiver<bool>,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check(shared, claims, timeout, SystemTime::now())? {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(DEVICE_BINDING_TIMEOUT.to_string());
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL_PERIOD) => {}
            Ok(_) = closing.wait_for(|c| *c) => return Err(CONTEXT_CANCELED.to_string()),
        }
    }
}

impl Executor {
    /// DynamicResources' wait for device binding conditions (after the claims were
    /// written). On failure what this cycle wrote is taken back (allocation, reservation
    /// and the drivers' device status, with the newest resourceVersion the informer saw
    /// when only the device status changed since) and the error is the FailedScheduling
    /// message.
    pub(crate) async fn wait_for_binding_conditions(
        &self,
        pod: &PodRef,
        node: &str,
        scheduler_name: &str,
        wait: &BindingWait,
        written: &mut [Written],
        info: &scheduler_core::types::PodInfo,
    ) -> Result<(), String> {
        // A claim this cycle created is waited for under the name the API server gave it.
        let claims: Vec<(String, String)> = wait
            .claims
            .iter()
            .map(|(ns, name)| {
                let created = written
                    .iter()
                    .find(|w| &w.write.namespace == ns && &w.write.name == name)
                    .and_then(|w| w.created.clone());
                (ns.clone(), created.unwrap_or_else(|| name.clone()))
            })
            .collect();
        let note = waiting_for_binding_conditions(node);
        self.recorder
            .record(EventSpec {
                controller: scheduler_name,
                regarding: pod,
                related: None,
                type_: EventType::Normal,
                reason: REASON_BINDING_CONDITIONS_PENDING,
                action: events::ACTION_SCHEDULING,
                note: &note,
            })
            .await;
        let closing = self.closing.subscribe();
        let Err(e) = wait_until_ready(&self.shared, &claims, wait.timeout, closing).await else {
            return Ok(());
        };
        {
            let st = self.shared.lock();
            for w in written.iter_mut().filter(|w| w.created.is_none()) {
                if let Some(c) = st.cache.dra().claim(&w.write.namespace, &w.write.name) {
                    let newer = |a: &str, b: &str| {
                        a.parse::<u64>().unwrap_or(0) > b.parse::<u64>().unwrap_or(0)
                    };
                    // Only when what changed since the write is the driver's device
                    // status: with another consumer in reservedFor the undo must be
                    // refused (409) rather than drop it; the next attempt's Filter and
                    // PostFilter then handle the claim.
                    if newer(&c.resource_version, &w.resource_version)
                        && c.reserved_for == w.write.reserved_for
                        && c.allocation.is_some()
                    {
                        w.resource_version = c.resource_version.clone();
                    }
                }
            }
        }
        let keep_group = self.other_members_placed(info);
        undo_claims(&self.client, written, keep_group).await;
        Err(format!("{PREBIND_PREFIX}{e}"))
    }
}
