//! Device binding conditions (upstream DRADeviceBindingConditions, beta and on by default
//! since 1.36): a device may name conditions that must be True in the claim's
//! `status.devices[].conditions` before a pod using it is bound, and failure conditions that
//! end the wait. This module reads what one claim's status says about them; the plugin
//! (`dynamic_resources/binding_conditions.rs`) and the controller's binding cycle act on it.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::resource::v1 as dra;

/// Upstream's error when the wait for binding conditions ran past `bindingTimeout`.
pub const DEVICE_BINDING_TIMEOUT: &str = "device binding timeout";

/// Upstream's error for a claim whose allocated device reports a failure condition.
pub fn claim_binding_failed(claim: &str, reason: &str, message: &str) -> String {
    format!(
        "claim {claim} binding failed: reason={reason}, message={}",
        go_quote(message)
    )
}

/// Upstream's error for a claim allocated longer than `bindingTimeout` ago whose binding
/// conditions still do not all hold.
pub fn claim_binding_timeout(claim: &str) -> String {
    format!("claim {claim} binding timeout")
}

/// Go's `%q` for the messages drivers write (quotes, backslashes and control characters
/// escaped).
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Where an allocated claim's binding conditions stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingReadiness {
    /// Every binding condition of every allocated device is True.
    Ready,
    /// Some condition is not True yet (or the driver wrote no status for the device).
    Pending,
    /// A binding failure condition is True: upstream's error message.
    Failed(String),
}

/// The binding-condition part of an allocated claim; only for allocations with at least one
/// device that has binding conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimBinding {
    /// `status.allocation.allocationTimestamp` (milliseconds since the epoch), the start of
    /// `bindingTimeout`; None when the allocation has none.
    pub allocated_at: Option<i64>,
    pub readiness: BindingReadiness,
}

impl ClaimBinding {
    /// None when the claim is not allocated or no allocated device has binding conditions.
    /// As upstream, a device's status entry is found by driver, pool and device (a share
    /// id is not compared), failure conditions are checked before the binding conditions,
    /// and a device without a status entry is pending.
    pub fn of(claim: &dra::ResourceClaim) -> Option<ClaimBinding> {
        let status = claim.status.as_ref()?;
        let allocation = status.allocation.as_ref()?;
        let results = allocation.devices.as_ref()?.results.as_ref()?;
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let mut any = false;
        let mut readiness = BindingReadiness::Ready;
        for r in results {
            let wanted = r.binding_conditions.as_deref().unwrap_or_default();
            if wanted.is_empty() {
                continue;
            }
            any = true;
            if readiness != BindingReadiness::Ready {
                continue;
            }
            let Some(device) = status
                .devices
                .iter()
                .flatten()
                .find(|d| d.driver == r.driver && d.pool == r.pool && d.device == r.device)
            else {
                readiness = BindingReadiness::Pending;
                continue;
            };
            let conditions = device.conditions.as_deref().unwrap_or_default();
            let find = |t: &str| conditions.iter().find(|c| c.type_ == t);
            if let Some(failed) = r
                .binding_failure_conditions
                .iter()
                .flatten()
                .filter_map(|t| find(t))
                .find(|c| c.status == "True")
            {
                readiness = BindingReadiness::Failed(claim_binding_failed(
                    name,
                    &failed.reason,
                    &failed.message,
                ));
                continue;
            }
            if !wanted
                .iter()
                .all(|t| find(t).is_some_and(|c| c.status == "True"))
            {
                readiness = BindingReadiness::Pending;
            }
        }
        any.then(|| ClaimBinding {
            allocated_at: allocation
                .allocation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond()),
            readiness,
        })
    }

    /// A fresh allocation nobody reported on yet: pending if it has binding conditions.
    pub fn pending(a: &dra::AllocationResult) -> Option<ClaimBinding> {
        has_binding_conditions(a).then(|| ClaimBinding {
            allocated_at: a
                .allocation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond()),
            readiness: BindingReadiness::Pending,
        })
    }

    /// Upstream `isClaimTimeout`: allocated more than `timeout` before `now` (never without
    /// an allocation timestamp).
    pub fn timed_out(&self, timeout: Duration, now: SystemTime) -> bool {
        let Some(at) = self.allocated_at else {
            return false;
        };
        let now = match now.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(_) => return false,
        };
        let timeout = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        at.saturating_add(timeout) < now
    }
}

/// Whether an allocation result hands out a device with binding conditions.
pub fn has_binding_conditions(a: &dra::AllocationResult) -> bool {
    a.devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .any(|r| r.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()))
}
