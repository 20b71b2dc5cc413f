//! Consumable capacity (KEP-5075): devices with `allowMultipleAllocations` hand out shares,
//! each consuming part of the device's `capacity`. What one share consumes per capacity
//! follows the capacity's `requestPolicy`; the sum over all shares (allocated, in flight,
//! picked by this search) must stay within the capacity's value.
//!
//! Amounts are kept in nano-units next to the quantity as written, so the allocation result
//! repeats the user's (or the driver's) spelling whenever the amount was not rounded.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::super::quantity::parse_quantity;

/// An amount of one capacity, exact and as spelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amount {
    pub nanos: i128,
    pub text: String,
}

impl Amount {
    pub fn parse(q: &K8sQuantity) -> Option<Amount> {
        parse_quantity(&q.0).ok().map(|v| Amount {
            nanos: v.nanos(),
            text: q.0.clone(),
        })
    }

    /// An amount the scheduler computed (step rounding): written in a canonical form.
    pub fn computed(nanos: i128) -> Amount {
        Amount {
            nanos,
            text: canonical(nanos),
        }
    }

    pub fn to_k8s(&self) -> K8sQuantity {
        K8sQuantity(self.text.clone())
    }
}

/// As a binary-SI quantity prints: whole numbers with the largest binary suffix dividing
/// them, otherwise the largest decimal one (`15G`), fractions in milli, micro or nano
/// units (`500m`).
fn canonical(nanos: i128) -> String {
    const UNIT: i128 = 1_000_000_000;
    if nanos % UNIT != 0 {
        return if nanos % 1_000_000 == 0 {
            format!("{}m", nanos / 1_000_000)
        } else if nanos % 1_000 == 0 {
            format!("{}u", nanos / 1_000)
        } else {
            format!("{nanos}n")
        };
    }
    let mut v = nanos / UNIT;
    if v == 0 {
        return "0".into();
    }
    let (base, suffixes) = if v.abs() >= 1024 && v % 1024 == 0 {
        (1024, ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
    } else {
        (1000, ["k", "M", "G", "T", "P", "E"])
    };
    let mut suffix = "";
    for s in suffixes {
        if v % base != 0 {
            break;
        }
        v /= base;
        suffix = s;
    }
    format!("{v}{suffix}")
}

/// `requestPolicy.validRange`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRange {
    pub min: Amount,
    pub max: Option<Amount>,
    pub step: Option<Amount>,
}

/// `requestPolicy` of one capacity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestPolicy {
    pub default: Option<Amount>,
    pub range: Option<PolicyRange>,
    /// Ascending (API validation).
    pub valid_values: Vec<Amount>,
}

/// One entry of a device's `capacity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityView {
    pub value: Amount,
    pub policy: Option<RequestPolicy>,
}

/// The device's capacities; None when a quantity does not parse.
pub fn capacity_views(
    c: Option<&BTreeMap<String, dra::DeviceCapacity>>,
) -> Option<BTreeMap<String, CapacityView>> {
    c.into_iter()
        .flatten()
        .map(|(name, cap)| {
            let value = Amount::parse(&cap.value)?;
            let policy = match &cap.request_policy {
                None => None,
                Some(p) => Some(RequestPolicy {
                    default: match &p.default {
                        Some(d) => Some(Amount::parse(d)?),
                        None => None,
                    },
                    range: match &p.valid_range {
                        None => None,
                        Some(r) => Some(PolicyRange {
                            min: Amount::parse(&r.min)?,
                            max: match &r.max {
                                Some(m) => Some(Amount::parse(m)?),
                                None => None,
                            },
                            step: match &r.step {
                                Some(s) => Some(Amount::parse(s)?),
                                None => None,
                            },
                        }),
                    },
                    valid_values: p
                        .valid_values
                        .iter()
                        .flatten()
                        .map(Amount::parse)
                        .collect::<Option<Vec<_>>>()?,
                }),
            };
            Some((name.clone(), CapacityView { value, policy }))
        })
        .collect()
}

/// What one share consumes of a capacity, given what the request asks for (None: the
/// request names no amount for it). Below the range's minimum becomes the minimum; with a
/// step, rounded up to the next `min + n * step`; with valid values, the first one at least
/// the request (or the request itself when it is above them all, which then violates the
/// policy). No policy: the request as is, or the whole capacity when it asks for none.
pub fn consumed(requested: Option<&Amount>, cap: &CapacityView) -> Amount {
    let Some(req) = requested else {
        return cap
            .policy
            .as_ref()
            .and_then(|p| p.default.clone())
            .unwrap_or_else(|| cap.value.clone());
    };
    let Some(p) = &cap.policy else {
        return req.clone();
    };
    if let Some(r) = &p.range {
        if req.nanos < r.min.nanos {
            return r.min.clone();
        }
        return match &r.step {
            Some(step) if step.nanos > 0 => {
                let above = req.nanos - r.min.nanos;
                let n = above / step.nanos + i128::from(above % step.nanos != 0);
                let v = r.min.nanos + n * step.nanos;
                if v == req.nanos {
                    req.clone()
                } else {
                    Amount::computed(v)
                }
            }
            _ => req.clone(),
        };
    }
    if !p.valid_values.is_empty() {
        return p
            .valid_values
            .iter()
            .find(|v| req.nanos <= v.nanos)
            .cloned()
            .unwrap_or_else(|| req.clone());
    }
    req.clone()
}

/// Whether a (rounded) amount breaks the policy: above the range's maximum or off its step,
/// or not one of the valid values. The policy's default never does.
pub fn violates(amount: &Amount, policy: Option<&RequestPolicy>) -> bool {
    let Some(p) = policy else {
        return false;
    };
    if p.default.as_ref().is_some_and(|d| d.nanos == amount.nanos) {
        return false;
    }
    if let Some(r) = &p.range {
        if r.max.as_ref().is_some_and(|m| amount.nanos > m.nanos) {
            return true;
        }
        if let Some(step) = r.step.as_ref().filter(|s| s.nanos > 0) {
            return (amount.nanos - r.min.nanos) % step.nanos != 0;
        }
        return false;
    }
    if !p.valid_values.is_empty() {
        return !p.valid_values.iter().any(|v| v.nanos == amount.nanos);
    }
    false
}

/// What one share of the device consumes for the request, per capacity; None when the
/// request names a capacity the device does not have, or an amount the policy refuses.
pub fn share_of(
    requests: Option<&BTreeMap<String, Amount>>,
    capacity: &BTreeMap<String, CapacityView>,
) -> Option<BTreeMap<String, Amount>> {
    if requests.is_some_and(|r| r.keys().any(|k| !capacity.contains_key(k))) {
        return None;
    }
    capacity
        .iter()
        .map(|(name, cap)| {
            let a = consumed(requests.and_then(|r| r.get(name)), cap);
            (!violates(&a, cap.policy.as_ref())).then(|| (name.clone(), a))
        })
        .collect()
}

/// Whether a share fits next to what the device's other shares consume.
pub fn fits(
    share: &BTreeMap<String, Amount>,
    capacity: &BTreeMap<String, CapacityView>,
    used: impl Fn(&str) -> i128,
) -> bool {
    share.iter().all(|(name, a)| {
        capacity
            .get(name)
            .is_some_and(|c| used(name).saturating_add(a.nanos) <= c.value.nanos)
    })
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
