//! Leader election on a coordination.k8s.io/v1 Lease, following client-go's
//! leaderelection: a candidate takes the lease when it is free or when its holder has not
//! renewed it for `leaseDuration` (measured on the local clock from when the candidate last
//! saw the record change, so clock skew between machines does not matter); the leader renews
//! every `retryPeriod` and gives up when it could not renew for `renewDeadline`. On a clean
//! shutdown the lease is released so a standby takes over at once.

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

pub(crate) struct Elector {
    api: Api<Lease>,
    name: String,
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

    /// Waits until this process holds the lease.
    pub(crate) async fn acquire(&mut self) {
        tracing::info!(lease = %self.name, identity = %self.identity, "waiting to become leader");
        while !self.try_acquire_or_renew().await {
            tokio::time::sleep(self.jittered()).await;
        }
        tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
    }

    /// Renews the lease every retryPeriod; returns when it could not be renewed for
    /// renewDeadline (leadership lost).
    pub(crate) async fn hold(&mut self) {
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.retry_period).await;
            if self.try_acquire_or_renew().await {
                last_renewed = Instant::now();
            } else if last_renewed.elapsed() >= self.renew_deadline {
                tracing::error!(lease = %self.name, "leader lease lost");
                return;
            }
        }
    }

    /// Gives the lease up (client-go's ReleaseOnCancel): empty holder, 1 s duration.
    pub(crate) async fn release(&mut self) {
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
