//! What VolumeBinding checks a bound in-tree PersistentVolume's node affinity as, on a node
//! whose CSINode lists the volume's plugin as migrated (`storage.alpha.kubernetes.io/
//! migrated-plugins`): the affinity the CSI driver's volume would have, as upstream's
//! binder translates it with csi-translation-lib before `CheckNodeAffinity`.
//!
//! The zone is rewritten to the driver's own topology key for the plugins whose translation
//! does so: AWS EBS (`topology.ebs.csi.aws.com/zone`), GCE PD (`topology.gke.io/zone`) and
//! Cinder (`topology.cinder.csi.openstack.org/zone`). Azure Disk and Portworx volumes keep
//! their affinity (their translation leaves it alone). The rules, per plugin that rewrites:
//!
//! - The zone key is the GA `topology.kubernetes.io/zone` if the affinity names it, else the
//!   beta `failure-domain.beta.kubernetes.io/zone` if the affinity names that, else whichever
//!   of the two the PV's labels carry (GA first); GA when none does.
//! - Every affinity requirement on that zone key gets the driver's key. With none, a zone
//!   label of that key on the PV (`a__b` for several zones) becomes a requirement
//!   `<driver key> In (zones)` added to every term (one term if there were none).
//! - With the beta zone key, requirements on the beta region key become the GA
//!   `topology.kubernetes.io/region`.
//!
//! An EBS volume ID of the URL form (`aws://<zone>/<id>`) whose id is not `vol-...`, and a
//! regional GCE PD whose zones are not `<locale>-<region>-<zone>` of one region, cannot be
//! translated: the node gets an error, as upstream's.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1 as k8s;

use crate::types::volume::{AWS_EBS_PLUGIN, CINDER_PLUGIN, GCE_PD_PLUGIN};

pub const ZONE_GA: &str = "topology.kubernetes.io/zone";
pub const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub const REGION_GA: &str = "topology.kubernetes.io/region";
pub const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// Several zones in one PV label are joined with this.
const MULTI_ZONE_DELIMITER: &str = "__";

/// The CSI driver's zone key an in-tree plugin's PV topology is rewritten to; `None` for
/// the plugins whose translation keeps the in-tree keys.
pub fn csi_zone_key(plugin: &str) -> Option<&'static str> {
    match plugin {
        AWS_EBS_PLUGIN => Some("topology.ebs.csi.aws.com/zone"),
        GCE_PD_PLUGIN => Some("topology.gke.io/zone"),
        CINDER_PLUGIN => Some("topology.cinder.csi.openstack.org/zone"),
        _ => None,
    }
}

/// The required node affinity of the in-tree PV (`labels`, `required`, and for EBS its
/// volume ID) once translated for `plugin`'s CSI driver; `Err` with upstream's message when
/// the volume cannot be translated.
pub fn translate_required_affinity(
    plugin: &str,
    labels: &BTreeMap<String, String>,
    required: Option<&k8s::NodeSelector>,
    ebs_volume_id: Option<&str>,
) -> Result<Option<k8s::NodeSelector>, String> {
    if let Some(id) = ebs_volume_id {
        check_ebs_volume_id(id).map_err(|e| format!("could not translate pv: {e}"))?;
    }
    if plugin == GCE_PD_PLUGIN {
        check_gce_pd_zones(labels).map_err(|e| format!("could not translate pv: {e}"))?;
    }
    let mut required = required.cloned();
    let Some(key) = csi_zone_key(plugin) else {
        return Ok(required);
    };
    let (zone_key, region_key) = topology_keys(labels, required.as_ref());
    if has_values(required.as_ref(), zone_key) {
        rename_key(required.as_mut(), zone_key, key);
    } else if let Some(label) = labels.get(zone_key) {
        let zones: BTreeSet<&str> = label
            .split(MULTI_ZONE_DELIMITER)
            .map(str::trim)
            .filter(|z| !z.is_empty())
            .collect();
        if !zones.is_empty() {
            let sel = required.get_or_insert_with(Default::default);
            if sel.node_selector_terms.is_empty() {
                sel.node_selector_terms.push(Default::default());
            }
            for term in &mut sel.node_selector_terms {
                term.match_expressions.get_or_insert_with(Vec::new).push(
                    k8s::NodeSelectorRequirement {
                        key: key.to_string(),
                        operator: "In".to_string(),
                        values: Some(zones.iter().map(|z| z.to_string()).collect()),
                    },
                );
            }
        }
    }
    if region_key == REGION_BETA && has_values(required.as_ref(), REGION_BETA) {
        rename_key(required.as_mut(), REGION_BETA, REGION_GA);
    }
    Ok(required)
}

fn expressions(
    sel: Option<&k8s::NodeSelector>,
) -> impl Iterator<Item = &k8s::NodeSelectorRequirement> {
    sel.into_iter()
        .flat_map(|s| &s.node_selector_terms)
        .flat_map(|t| t.match_expressions.iter().flatten())
}

fn names_key(sel: Option<&k8s::NodeSelector>, key: &str) -> bool {
    expressions(sel).any(|r| r.key == key)
}

/// Whether some requirement on `key` lists a value (upstream collects the values first).
fn has_values(sel: Option<&k8s::NodeSelector>, key: &str) -> bool {
    expressions(sel).any(|r| r.key == key && r.values.as_ref().is_some_and(|v| !v.is_empty()))
}

fn rename_key(sel: Option<&mut k8s::NodeSelector>, from: &str, to: &str) {
    let Some(sel) = sel else { return };
    for term in &mut sel.node_selector_terms {
        for r in term.match_expressions.iter_mut().flatten() {
            if r.key == from {
                r.key = to.to_string();
            }
        }
    }
}

/// The zone and region keys the PV uses: its affinity's first, then its labels'.
fn topology_keys(
    labels: &BTreeMap<String, String>,
    required: Option<&k8s::NodeSelector>,
) -> (&'static str, &'static str) {
    if names_key(required, ZONE_GA) {
        (ZONE_GA, REGION_GA)
    } else if names_key(required, ZONE_BETA) {
        (ZONE_BETA, REGION_BETA)
    } else if labels.contains_key(ZONE_GA) {
        (ZONE_GA, REGION_GA)
    } else if labels.contains_key(ZONE_BETA) {
        (ZONE_BETA, REGION_BETA)
    } else {
        (ZONE_GA, REGION_GA)
    }
}

/// A regional PD (several zones in its zone label, the beta label read first) needs zones of
/// the form `<locale>-<region>-<zone>` in one region, to name its volume.
fn check_gce_pd_zones(labels: &BTreeMap<String, String>) -> Result<(), String> {
    let label = labels
        .get(ZONE_BETA)
        .filter(|l| !l.is_empty())
        .or_else(|| labels.get(ZONE_GA))
        .map_or("", String::as_str);
    let zones: Vec<&str> = label.split(MULTI_ZONE_DELIMITER).collect();
    if zones.len() < 2 {
        return Ok(());
    }
    let mut regions = BTreeSet::new();
    for zone in &zones {
        let parts: Vec<&str> = zone.split('-').collect();
        if parts.len() != 3 {
            return Err(format!(
                "failed to get region from zones: zone in unexpected format, expected: \
                 {{locale}}-{{region}}-{{zone}}, got: {zone}"
            ));
        }
        regions.insert(format!("{}-{}", parts[0], parts[1]));
    }
    if regions.len() != 1 {
        return Err(format!(
            "failed to get region from zones: multiple or no regions gotten from zones, got: {regions:?}"
        ));
    }
    Ok(())
}

/// An EBS volume ID of the `aws://` form must end in a `vol-...` id with no `/`.
fn check_ebs_volume_id(id: &str) -> Result<(), String> {
    let Some(rest) = id.strip_prefix("aws://") else {
        return Ok(());
    };
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let vol = path.trim_matches('/');
    if vol.starts_with("vol-") && !vol.contains('/') {
        Ok(())
    } else {
        Err(format!(
            "failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume ({id})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::types::NodeSelector;
    use crate::types::volume::AZURE_DISK_PLUGIN;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn affinity(terms: &[&[(&str, &[&str])]]) -> k8s::NodeSelector {
        k8s::NodeSelector {
            node_selector_terms: terms
                .iter()
                .map(|reqs| k8s::NodeSelectorTerm {
                    match_expressions: Some(
                        reqs.iter()
                            .map(|(k, vals)| k8s::NodeSelectorRequirement {
                                key: k.to_string(),
                                operator: "In".into(),
                                values: Some(vals.iter().map(|v| v.to_string()).collect()),
                            })
                            .collect(),
                    ),
                    match_fields: None,
                })
                .collect(),
        }
    }

    /// Whether a node with `node` labels passes the translated affinity.
    fn fits(translated: &Option<k8s::NodeSelector>, node: &[(&str, &str)]) -> bool {
        translated
            .as_ref()
            .map(NodeSelector::from_k8s)
            .is_none_or(|s| s.matches_labels("", &labels(node)))
    }

    const EBS_KEY: &str = "topology.ebs.csi.aws.com/zone";

    #[test]
    fn a_beta_zone_affinity_of_an_ebs_volume_is_checked_against_the_driver_key() {
        let req = affinity(&[&[(ZONE_BETA, &["us-east-1a"])]]);
        let t = translate_required_affinity(AWS_EBS_PLUGIN, &BTreeMap::new(), Some(&req), None)
            .unwrap();
        assert!(fits(&t, &[(EBS_KEY, "us-east-1a")]));
        assert!(!fits(&t, &[(EBS_KEY, "us-east-1b")]));
        // The in-tree key alone no longer satisfies it.
        assert!(!fits(&t, &[(ZONE_BETA, "us-east-1a")]));
    }

    #[test]
    fn a_zone_label_without_affinity_becomes_a_requirement_in_every_term() {
        let l = labels(&[(ZONE_GA, "us-east-1a__us-east-1b")]);
        let t = translate_required_affinity(AWS_EBS_PLUGIN, &l, None, None).unwrap();
        assert!(fits(&t, &[(EBS_KEY, "us-east-1b")]));
        assert!(!fits(&t, &[(EBS_KEY, "us-east-1c")]));
        let req = affinity(&[
            &[("kubernetes.io/hostname", &["n1"])],
            &[("kubernetes.io/hostname", &["n2"])],
        ]);
        let t = translate_required_affinity(
            GCE_PD_PLUGIN,
            &labels(&[(ZONE_BETA, "z1")]),
            Some(&req),
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.node_selector_terms.len(), 2);
        for term in &t.node_selector_terms {
            let keys: Vec<&str> = term
                .match_expressions
                .iter()
                .flatten()
                .map(|r| r.key.as_str())
                .collect();
            assert_eq!(keys, ["kubernetes.io/hostname", "topology.gke.io/zone"]);
        }
    }

    #[test]
    fn the_ga_zone_in_the_affinity_wins_over_a_beta_label() {
        let req = affinity(&[&[(ZONE_GA, &["z1"]), (REGION_GA, &["r1"])]]);
        let l = labels(&[(ZONE_BETA, "z9")]);
        let t = translate_required_affinity(CINDER_PLUGIN, &l, Some(&req), None).unwrap();
        let node = [
            ("topology.cinder.csi.openstack.org/zone", "z1"),
            (REGION_GA, "r1"),
        ];
        assert!(fits(&t, &node));
        // The label's zone was not added.
        let sel = t.unwrap();
        let values: Vec<&String> = sel.node_selector_terms[0]
            .match_expressions
            .iter()
            .flatten()
            .flat_map(|r| r.values.iter().flatten())
            .collect();
        assert!(!values.iter().any(|v| *v == "z9"));
    }

    #[test]
    fn a_beta_region_becomes_the_ga_region_with_the_beta_zone() {
        let req = affinity(&[&[(ZONE_BETA, &["z1"]), (REGION_BETA, &["r1"])]]);
        let t = translate_required_affinity(AWS_EBS_PLUGIN, &BTreeMap::new(), Some(&req), None)
            .unwrap();
        assert!(fits(&t, &[(EBS_KEY, "z1"), (REGION_GA, "r1")]));
        assert!(!fits(&t, &[(EBS_KEY, "z1"), (REGION_BETA, "r1")]));
    }

    #[test]
    fn plugins_without_topology_rewriting_keep_their_affinity() {
        let req = affinity(&[&[(ZONE_GA, &["z1"])]]);
        let t = translate_required_affinity(AZURE_DISK_PLUGIN, &BTreeMap::new(), Some(&req), None)
            .unwrap();
        assert_eq!(t, Some(req));
        let t =
            translate_required_affinity(AZURE_DISK_PLUGIN, &labels(&[(ZONE_GA, "z1")]), None, None)
                .unwrap();
        assert_eq!(t, None);
    }

    #[test]
    fn a_regional_pd_needs_zones_of_one_region() {
        let ok = labels(&[(ZONE_GA, "us-central1-a__us-central1-b")]);
        let t = translate_required_affinity(GCE_PD_PLUGIN, &ok, None, None).unwrap();
        assert!(fits(&t, &[("topology.gke.io/zone", "us-central1-b")]));
        for bad in ["us-central1-a__europe-west1-b", "zone1__zone2"] {
            let e = translate_required_affinity(
                GCE_PD_PLUGIN,
                &labels(&[(ZONE_BETA, bad)]),
                None,
                None,
            )
            .unwrap_err();
            assert!(
                e.starts_with("could not translate pv: failed to get region from zones"),
                "{e}"
            );
        }
        // One zone names a zonal disk: nothing to check.
        assert!(
            translate_required_affinity(GCE_PD_PLUGIN, &labels(&[(ZONE_GA, "zone1")]), None, None)
                .is_ok()
        );
    }

    #[test]
    fn an_ebs_url_id_without_a_vol_id_cannot_be_translated() {
        for ok in ["vol-1", "aws://us-east-1a/vol-1", "aws:///vol-1"] {
            assert!(
                translate_required_affinity(AWS_EBS_PLUGIN, &BTreeMap::new(), None, Some(ok))
                    .is_ok(),
                "{ok}"
            );
        }
        let e = translate_required_affinity(
            AWS_EBS_PLUGIN,
            &BTreeMap::new(),
            None,
            Some("aws://us-east-1a/disk-1"),
        )
        .unwrap_err();
        assert!(e.starts_with("could not translate pv: "), "{e}");
        assert!(e.contains("aws://us-east-1a/disk-1"), "{e}");
    }
}
