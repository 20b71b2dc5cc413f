//! Turning the search's choice into `AllocationResult`s: devices per request, the configs
//! of the classes and the claim, and the node selector of the allocation.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as dra;

use super::Run;
use crate::types::dra::{DeviceId, DeviceNodes, ResourceClaimInfo};

impl Run<'_> {
    pub(super) fn results(&self) -> Vec<dra::AllocationResult> {
        let al = self.al;
        let _ = (self.node, self.labels);
        al.claims
            .iter()
            .enumerate()
            .map(|(ci, claim)| {
                let results = self.results[ci]
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let (request, admin) = (&p.request, p.admin);
                        let c = &self.cands[p.cand];
                        let binding = c.dev.binding.as_deref().filter(|_| al.binding_conditions);
                        let list = |l: &Vec<String>| Some(l.clone()).filter(|l| !l.is_empty());
                        dra::DeviceRequestAllocationResult {
                            request: request.clone(),
                            driver: c.id.driver.clone(),
                            pool: c.id.pool.clone(),
                            device: c.id.device.clone(),
                            admin_access: admin.then_some(true),
                            tolerations: self.tolerations_of(ci, request),
                            binding_conditions: binding.and_then(|b| list(&b.conditions)),
                            binding_failure_conditions: binding
                                .and_then(|b| list(&b.failure_conditions)),
                            share_id: p.share.as_ref().map(|_| share_id(claim, i, request, c.id)),
                            consumed_capacity: p
                                .share
                                .as_ref()
                                .map(|s| s.iter().map(|(k, a)| (k.clone(), a.to_k8s())).collect()),
                            ..Default::default()
                        }
                    })
                    .collect();
                dra::AllocationResult {
                    devices: Some(dra::DeviceAllocationResult {
                        results: Some(results),
                        config: Some(self.config(ci, claim)).filter(|c| !c.is_empty()),
                    }),
                    node_selector: self.node_selector(ci),
                    allocation_timestamp: None,
                }
            })
            .collect()
    }

    /// The tolerations of the (sub)request a result was allocated for, as upstream copies
    /// them into the result.
    fn tolerations_of(&self, ci: usize, request: &str) -> Option<Vec<dra::DeviceToleration>> {
        self.reqs[ci]
            .iter()
            .flatten()
            .find(|d| d.full_name() == request)
            .map(|d| d.spec.tolerations.clone())
            .filter(|t| !t.is_empty())
    }

    /// Class configs (once per class) then the claim's configs for the chosen requests, as
    /// upstream orders them; a config for every request has its request list dropped.
    fn config(
        &self,
        ci: usize,
        claim: &ResourceClaimInfo,
    ) -> Vec<dra::DeviceAllocationConfiguration> {
        let mut out: Vec<dra::DeviceAllocationConfiguration> = Vec::new();
        let mut class_at: HashMap<&str, (usize, usize)> = HashMap::new();
        for (ri, datas) in self.reqs[ci].iter().enumerate() {
            let sub = self.selected_sub.get(&(ci, ri)).copied().unwrap_or(0);
            let d = &datas[sub];
            let name = d.full_name();
            if let Some((start, end)) = class_at.get(d.class.name.as_str()) {
                for c in &mut out[*start..*end] {
                    c.requests.get_or_insert_default().push(name.clone());
                }
                continue;
            }
            let start = out.len();
            for c in &d.class.config {
                out.push(dra::DeviceAllocationConfiguration {
                    source: "FromClass".into(),
                    requests: Some(vec![name.clone()]),
                    opaque: c.opaque.clone(),
                });
            }
            class_at.insert(&d.class.name, (start, out.len()));
        }
        for c in &claim.config {
            let reqs = c.requests.clone().unwrap_or_default();
            let applies = reqs.is_empty()
                || self.reqs[ci].iter().enumerate().any(|(ri, datas)| {
                    let sub = self.selected_sub.get(&(ci, ri)).copied().unwrap_or(0);
                    let d = &datas[sub];
                    reqs.iter().any(|r| {
                        Some(r.as_str()) == d.parent.or(Some(&d.spec.name)) || *r == d.full_name()
                    })
                });
            if applies {
                out.push(dra::DeviceAllocationConfiguration {
                    source: "FromClaim".into(),
                    requests: c.requests.clone().filter(|r| !r.is_empty()),
                    opaque: c.opaque.clone(),
                });
            }
        }
        let n = claim.requests.len();
        for c in &mut out {
            if c.requests.as_ref().is_some_and(|r| r.len() == n) {
                c.requests = None;
            }
        }
        out
    }

    /// The allocation's node selector: the node itself when a device is node-local or binds
    /// to the node it is allocated for (`bindsToNode`), else the
    /// union of the slices' (or devices') single-term selectors; None when every node can
    /// reach every device.
    fn node_selector(&self, ci: usize) -> Option<k8s::NodeSelector> {
        let mut term = k8s::NodeSelectorTerm::default();
        for p in &self.results[ci] {
            let c = &self.cands[p.cand];
            let nodes = c.dev.nodes.as_ref().unwrap_or(&c.slice.nodes);
            if c.dev.binds_to_node() {
                return Some(only_node(self.node));
            }
            match nodes {
                DeviceNodes::Node(n) => return Some(only_node(n)),
                DeviceNodes::Selector(_, raw) => {
                    if let Some(t) = raw.node_selector_terms.first() {
                        merge_requirements(&t.match_fields, &mut term.match_fields);
                        merge_requirements(&t.match_expressions, &mut term.match_expressions);
                    }
                }
                _ => {}
            }
        }
        let empty = |v: &Option<Vec<_>>| v.as_ref().is_none_or(Vec::is_empty);
        if empty(&term.match_fields) && empty(&term.match_expressions) {
            return None;
        }
        Some(k8s::NodeSelector {
            node_selector_terms: vec![term],
        })
    }
}

/// The `shareID` of one device share: UUID-shaped (as upstream's random ones), derived
/// from the claim (uid, or the owning pod for the in-memory claim of extended resources),
/// the result's position, request and device, so a simulation stays reproducible while two
/// shares of one device never get the same id.
fn share_id(claim: &ResourceClaimInfo, index: usize, request: &str, id: &DeviceId) -> String {
    // FNV-1a, 128 bits.
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    let owner = claim.owner_pod_uid.as_deref().unwrap_or_default();
    let index = index.to_string();
    for part in [
        claim.namespace.as_str(),
        &claim.name,
        &claim.uid,
        owner,
        &index,
        request,
        &id.driver,
        &id.pool,
        &id.device,
    ] {
        for b in part.bytes().chain(std::iter::once(0)) {
            h ^= u128::from(b);
            h = h.wrapping_mul(0x0000000001000000000000000000013B);
        }
    }
    // Version 4, RFC 4122 variant, like a random UUID.
    h = (h & !(0xf << 76)) | (0x4 << 76);
    h = (h & !(0x3 << 62)) | (0x2 << 62);
    let x = format!("{h:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

/// A selector matching exactly the named node (`metadata.name` field).
fn only_node(name: &str) -> k8s::NodeSelector {
    k8s::NodeSelector {
        node_selector_terms: vec![k8s::NodeSelectorTerm {
            match_fields: Some(vec![k8s::NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![name.to_string()]),
            }]),
            ..Default::default()
        }],
    }
}

fn merge_requirements(
    from: &Option<Vec<k8s::NodeSelectorRequirement>>,
    to: &mut Option<Vec<k8s::NodeSelectorRequirement>>,
) {
    for r in from.iter().flatten() {
        let values: HashSet<&String> = r.values.iter().flatten().collect();
        let have = to.iter().flatten().any(|e| {
            e.key == r.key
                && e.operator == r.operator
                && e.values.iter().flatten().collect::<HashSet<_>>() == values
        });
        if !have {
            to.get_or_insert_default().push(r.clone());
        }
    }
}
