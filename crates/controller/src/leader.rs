//! Leader election on a coordination.k8s.io/v1 Lease, following client-go's
//! leaderelection: a candidate takes the lease when it is free or when its holder has not
//! renewed it for `leaseDuration` (measured on the local clock from when the candidate last
//! saw the record change, so clock skew between machines does not matter); the leader renews
//! every `retryPeriod` and gives up when it could not renew for `renewDeadline`. On a clean
//! shutdown the lease is released so a standby takes over at once.
//!
//! Every lease request is bounded by the time left before renewDeadline (a hung API server
//! must not keep a stale leader scheduling: kube's own read timeout is minutes), and the
//! renew deadline is counted from when the last successful request was *sent*, so the
//! leader stops before any other replica can see the lease as expired.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use scheduler_core::config::LeaderElectionConfiguration;
use tokio::time::Instant;

/// client-go's JitterFactor for the acquire loop.
const JITTER: f64 = 1.2;

/// How long past leaseDuration a leader may go unrenewed before /healthz fails (the
/// tolerance kube-scheduler gives client-go's leader-election health check).
pub(crate) const HEALTHZ_TOLERANCE: Duration = Duration::from_secs(20);

/// What /healthz needs to know about leadership: set while this process leads.
#[derive(Default)]
pub(crate) struct Health {
    /// Lease name, leaseDuration and when the last successful renew was sent.
    leading: Mutex<Option<(String, Duration, Instant)>>,
}

impl Health {
    fn renewed(&self, name: &str, lease_duration: Duration, at: Instant) {
        *self.leading.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((name.to_string(), lease_duration, at));
    }

    /// `Err` (the message for /healthz) when this process leads but has not renewed its
    /// lease for leaseDuration + [`HEALTHZ_TOLERANCE`]; a standby is healthy.
    pub(crate) fn check(&self, now: Instant) -> Result<(), String> {
        match &*self.leading.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((name, duration, at))
                if now.saturating_duration_since(*at) > *duration + HEALTHZ_TOLERANCE =>
            {
                Err(format!(
                    "failed election to renew leadership on lease {name}: last renewed {:.1}s ago",
                    now.saturating_duration_since(*at).as_secs_f64()
                ))
            }
            _ => Ok(()),
        }
    }
}

pub(crate) struct Elector {
    api: Api<Lease>,
    name: String,
    /// `namespace/name`, for /healthz.
    described: String,
    identity: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    /// The last record seen and when it was first seen (local clock).
    observed: Option<(LeaseSpec, Instant)>,
}

impl Elector {
    /// `instance_id` is the hostname; a random suffix keeps two processes on one host apart
    /// (upstream: `hostname_uuid`).
    pub(crate) fn new(
        client: Client,
        cfg: &LeaderElectionConfiguration,
        instance_id: &str,
    ) -> Self {
        Elector {
            api: Api::namespaced(client, &cfg.resource_namespace),
            name: cfg.resource_name.clone(),
            described: format!("{}/{}", cfg.resource_namespace, cfg.resource_name),
            identity: format!("{instance_id}_{:016x}", fastrand::u64(..)),
            lease_duration: cfg.lease_duration,
            renew_deadline: cfg.renew_deadline,
            retry_period: cfg.retry_period,
            observed: None,
        }
    }

    fn observe(&mut self, spec: &LeaseSpec) -> Instant {
        match &self.observed {
            Some((s, at)) if s == spec => *at,
            _ => {
                let now = Instant::now();
                self.observed = Some((spec.clone(), now));
                now
            }
        }
    }

    fn record(&self, old: Option<&LeaseSpec>) -> LeaseSpec {
        let now = Some(MicroTime(Timestamp::now()));
        let secs = i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let ours = old.and_then(|o| o.holder_identity.as_deref()) == Some(self.identity.as_str());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(secs),
            acquire_time: if ours {
                old.and_then(|o| o.acquire_time.clone())
            } else {
                now.clone()
            },
            renew_time: now,
            lease_transitions: Some(match old {
                None => 0,
                Some(o) if ours => o.lease_transitions.unwrap_or(0),
                Some(o) => o.lease_transitions.unwrap_or(0) + 1,
            }),
            ..Default::default()
        }
    }

    /// One round of client-go's tryAcquireOrRenew.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> bool {
        let lease = match self.api.get_opt(&self.name).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(lease = %self.name, error = %e, "cannot read the leader lease");
                return false;
            }
        };
        let Some(mut lease) = lease else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(self.record(None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created.spec.unwrap_or_default());
                    true
                }
                Err(e) => {
                    tracing::debug!(error = %e, "creating the leader lease failed");
                    false
                }
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let observed_at = self.observe(&spec);
        let holder = spec.holder_identity.as_deref().unwrap_or_default();
        let duration = spec
            .lease_duration_seconds
            .map_or(
                self.lease_duration,
                |s| Duration::from_secs(s.max(0) as u64),
            );
        if !holder.is_empty() && holder != self.identity && observed_at + duration > Instant::now()
        {
            return false;
        }
        lease.spec = Some(self.record(Some(&spec)));
        // The resourceVersion in `lease` makes this a compare-and-swap (409 if it moved).
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(&updated.spec.unwrap_or_default());
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "updating the leader lease failed");
                false
            }
        }
    }

    fn jittered(&self) -> Duration {
        let r = f64::from(fastrand::u32(..1000)) / 1000.0;
        self.retry_period.mul_f64(1.0 + r * JITTER)
    }

    /// One round bounded by `budget`: a request that does not answer in time counts as a
    /// failed round (the lease may or may not have been written; we cannot know).
    async fn bounded_round(&mut self, budget: Duration) -> bool {
        match tokio::time::timeout(budget, self.try_acquire_or_renew()).await {
            Ok(ok) => ok,
            Err(_) => {
                tracing::warn!(
                    lease = %self.name,
                    timeout = ?budget,
                    "leader lease request timed out"
                );
                false
            }
        }
    }

    /// Waits until this process holds the lease; returns when the successful request was
    /// sent (the renew deadline counts from there).
    pub(crate) async fn acquire(&mut self, health: &Health) -> Instant {
        tracing::info!(lease = %self.name, identity = %self.identity, "waiting to become leader");
        loop {
            let sent = Instant::now();
            // A late answer would leave us leading on an already old lease: bound it too.
            if self.bounded_round(self.renew_deadline).await {
                health.renewed(&self.described, self.lease_duration, sent);
                tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
                return sent;
            }
            tokio::time::sleep(self.jittered()).await;
        }
    }

    /// Renews the lease every retryPeriod; returns as soon as renewDeadline has passed
    /// since the last successful renew was sent (leadership lost). No request outlives that
    /// deadline.
    pub(crate) async fn hold(&mut self, mut last_renewed: Instant, health: &Health) {
        loop {
            let deadline = last_renewed + self.renew_deadline;
            tokio::time::sleep_until((Instant::now() + self.retry_period).min(deadline)).await;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::error!(
                    lease = %self.name,
                    renew_deadline = ?self.renew_deadline,
                    "leader lease lost: could not renew within renewDeadline; stopping"
                );
                return;
            }
            let sent = Instant::now();
            if self.bounded_round(left).await {
                last_renewed = sent;
                health.renewed(&self.described, self.lease_duration, sent);
            }
        }
    }

    /// Gives the lease up (client-go's ReleaseOnCancel): empty holder, 1 s duration. Bounded
    /// by renewDeadline so a hung server cannot hold up shutdown.
    pub(crate) async fn release(&mut self) {
        let budget = self.renew_deadline;
        if tokio::time::timeout(budget, self.release_unbounded())
            .await
            .is_err()
        {
            tracing::warn!(lease = %self.name, "releasing the leader lease timed out");
        }
    }

    async fn release_unbounded(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        let now = Some(MicroTime(Timestamp::now()));
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time.clone_from(&now);
        spec.renew_time = now;
        lease.spec = Some(spec);
        if let Err(e) = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "could not release the leader lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_fails_only_for_a_leader_unrenewed_past_lease_duration_plus_tolerance() {
        let h = Health::default();
        let t0 = Instant::now();
        assert_eq!(h.check(t0 + Duration::from_secs(3600)), Ok(()), "standby");
        h.renewed("kube-system/ferrosched", Duration::from_secs(15), t0);
        assert_eq!(h.check(t0 + Duration::from_secs(35)), Ok(()));
        let err = h.check(t0 + Duration::from_secs(36)).unwrap_err();
        assert!(
            err.starts_with("failed election to renew leadership on lease kube-system/ferrosched"),
            "{err}"
        );
        h.renewed(
            "kube-system/ferrosched",
            Duration::from_secs(15),
            t0 + Duration::from_secs(30),
        );
        assert_eq!(h.check(t0 + Duration::from_secs(36)), Ok(()));
    }
}
