//! DeviceTaintRules (`resource.k8s.io`, GA in 1.37 as `v1`; `v1beta2` in 1.36, `v1alpha3`
//! in 1.35): one taint added to every device the rule's selector picks, with the same
//! effect as if the driver had published it in the ResourceSlice (upstream's
//! `resourceslice/tracker`).
//!
//! [`DraObjects`] keeps the slices as published beside the slices with the rules applied,
//! which is what every reader (the device index, the allocator) sees. A rule change
//! re-applies the rules to the slices it can touch and replaces only those whose taints
//! changed, so the device index is rebuilt only then, and reports whether any did (the
//! controller then fires a ResourceSlice update, as upstream's tracker sends one).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{DeviceTaintView, DraObjects, ResourceSliceInfo};

/// Scheduling view of one DeviceTaintRule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTaintRuleInfo {
    pub name: String,
    /// `spec.deviceSelector`: each criterion set must match; none set matches every device.
    /// Upstream's tracker also applies a rule without a selector to every device.
    pub driver: Option<String>,
    pub pool: Option<String>,
    pub device: Option<String>,
    /// The taint, when its effect matters for allocation (NoSchedule, NoExecute); None
    /// (effect `None` or one this version does not know) changes nothing, as upstream.
    pub taint: Option<DeviceTaintView>,
}

/// Builds the view from any served version: v1, v1beta2 and v1alpha3 have the same shape.
macro_rules! from_version {
    ($fn:ident, $v:ident) => {
        pub fn $fn(r: &k8s_openapi::api::resource::$v::DeviceTaintRule) -> Self {
            let sel = r.spec.device_selector.as_ref();
            let t = &r.spec.taint;
            Self::new(
                r.metadata.name.clone().unwrap_or_default(),
                sel.and_then(|s| s.driver.clone()),
                sel.and_then(|s| s.pool.clone()),
                sel.and_then(|s| s.device.clone()),
                (&t.key, t.value.as_deref(), &t.effect),
            )
        }
    };
}

impl DeviceTaintRuleInfo {
    pub fn new(
        name: String,
        driver: Option<String>,
        pool: Option<String>,
        device: Option<String>,
        (key, value, effect): (&str, Option<&str>, &str),
    ) -> Self {
        let taint = matches!(effect, "NoSchedule" | "NoExecute").then(|| DeviceTaintView {
            key: key.to_string(),
            value: value.unwrap_or_default().to_string(),
            effect: effect.to_string(),
        });
        DeviceTaintRuleInfo {
            name,
            driver,
            pool,
            device,
            taint,
        }
    }

    from_version!(from_v1, v1);
    from_version!(from_v1beta2, v1beta2);
    from_version!(from_v1alpha3, v1alpha3);

    /// Whether the rule may select devices of this slice (driver and pool).
    fn selects_slice(&self, s: &ResourceSliceInfo) -> bool {
        self.driver.as_ref().is_none_or(|d| *d == s.driver)
            && self.pool.as_ref().is_none_or(|p| *p == s.pool)
    }

    fn selects_device(&self, name: &str) -> bool {
        self.device.as_ref().is_none_or(|d| d == name)
    }
}

/// The slice with the taints of the rules that select its devices appended to each
/// device's own (in rule name order); the published slice itself when no rule adds one.
pub(crate) fn apply_rules(
    raw: &Arc<ResourceSliceInfo>,
    rules: &BTreeMap<String, Arc<DeviceTaintRuleInfo>>,
) -> Arc<ResourceSliceInfo> {
    let relevant: Vec<(&DeviceTaintRuleInfo, &DeviceTaintView)> = rules
        .values()
        .filter(|r| r.selects_slice(raw))
        .filter_map(|r| r.taint.as_ref().map(|t| (&**r, t)))
        .collect();
    let touches = |d: &str| relevant.iter().any(|(r, _)| r.selects_device(d));
    if !raw.devices.iter().any(|d| touches(&d.name)) {
        return raw.clone();
    }
    let mut patched = (**raw).clone();
    for d in &mut patched.devices {
        for (r, t) in &relevant {
            if r.selects_device(&d.name) {
                d.taints.push((*t).clone());
            }
        }
    }
    Arc::new(patched)
}

impl DraObjects {
    /// The DeviceTaintRules, by name.
    pub fn taint_rules(&self) -> impl Iterator<Item = &Arc<DeviceTaintRuleInfo>> {
        self.taint_rules.values()
    }

    /// An informer add/update of a ResourceSlice: kept as published, seen with the rules.
    pub(crate) fn put_slice(&mut self, v: ResourceSliceInfo) {
        let raw = Arc::new(v);
        let patched = apply_rules(&raw, &self.taint_rules);
        Arc::make_mut(&mut self.slices).insert(raw.name.clone(), patched);
        Arc::make_mut(&mut self.raw_slices).insert(raw.name.clone(), raw);
    }

    pub(crate) fn drop_slice(&mut self, name: &str) -> bool {
        if self.raw_slices.contains_key(name) {
            Arc::make_mut(&mut self.raw_slices).remove(name);
        }
        self.slices.contains_key(name) && Arc::make_mut(&mut self.slices).remove(name).is_some()
    }

    /// A DeviceTaintRule added or changed. True when some device's taints changed (pods
    /// waiting on devices may fit, or no longer fit).
    pub fn update_taint_rule(&mut self, rule: DeviceTaintRuleInfo) -> bool {
        let rule = Arc::new(rule);
        let old = Arc::make_mut(&mut self.taint_rules).insert(rule.name.clone(), rule.clone());
        if old.as_deref() == Some(&*rule) {
            return false;
        }
        self.reapply(old.as_deref(), Some(&rule))
    }

    /// A DeviceTaintRule deleted; true when some device's taints changed.
    pub fn remove_taint_rule(&mut self, name: &str) -> bool {
        if !self.taint_rules.contains_key(name) {
            return false;
        }
        let old = Arc::make_mut(&mut self.taint_rules).remove(name);
        self.reapply(old.as_deref(), None)
    }

    /// Re-applies the rules to the slices the old or new rule can touch; replaces those
    /// whose devices' taints differ.
    fn reapply(
        &mut self,
        old: Option<&DeviceTaintRuleInfo>,
        new: Option<&DeviceTaintRuleInfo>,
    ) -> bool {
        let touched = |s: &ResourceSliceInfo| {
            [old, new]
                .into_iter()
                .flatten()
                .any(|r| r.taint.is_some() && r.selects_slice(s))
        };
        let mut changed = Vec::new();
        for (name, raw) in self.raw_slices.iter() {
            if !touched(raw) {
                continue;
            }
            let patched = apply_rules(raw, &self.taint_rules);
            let same = self.slices.get(name).is_some_and(|cur| {
                Arc::ptr_eq(cur, &patched)
                    || cur
                        .devices
                        .iter()
                        .zip(&patched.devices)
                        .all(|(a, b)| a.taints == b.taints)
            });
            if !same {
                changed.push((name.clone(), patched));
            }
        }
        if changed.is_empty() {
            return false;
        }
        let slices = Arc::make_mut(&mut self.slices);
        for (name, patched) in changed {
            slices.insert(name, patched);
        }
        true
    }
}

#[cfg(test)]
#[path = "taint_rules_tests.rs"]
mod tests;
