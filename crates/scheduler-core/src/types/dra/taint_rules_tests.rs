//! Upstream's tracker cases (`TestListPatchedResourceSlices`), in our words: which devices
//! a rule selects, how its taint joins the slice's own, and what a rule change reports.

use k8s_openapi::api::resource::v1 as dra;

use super::*;

const DRIVER1: &str = "driver1.example.com";
const DRIVER2: &str = "driver2.example.com";

fn device(name: &str, taints: &[(&str, &str)]) -> dra::Device {
    dra::Device {
        name: name.into(),
        taints: (!taints.is_empty()).then(|| {
            taints
                .iter()
                .map(|(k, e)| dra::DeviceTaint {
                    key: k.to_string(),
                    value: Some("v".into()),
                    effect: e.to_string(),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    }
}

fn slice(name: &str, driver: &str, pool: &str, devices: Vec<dra::Device>) -> dra::ResourceSlice {
    let mut s = dra::ResourceSlice::default();
    s.metadata.name = Some(name.into());
    s.spec.driver = driver.into();
    s.spec.pool = dra::ResourcePool {
        name: pool.into(),
        generation: 1,
        resource_slice_count: 1,
    };
    s.spec.all_nodes = Some(true);
    s.spec.devices = Some(devices);
    s
}

/// s1: driver1/pool-1 with device-1; s2: driver2/pool-2 with device-2.
fn two_slices() -> DraObjects {
    let mut o = DraObjects::default();
    o.update_slice(&slice(
        "s1",
        DRIVER1,
        "pool-1",
        vec![device("device-1", &[])],
    ));
    o.update_slice(&slice(
        "s2",
        DRIVER2,
        "pool-2",
        vec![device("device-2", &[])],
    ));
    o
}

fn rule(
    name: &str,
    driver: Option<&str>,
    pool: Option<&str>,
    dev: Option<&str>,
) -> DeviceTaintRuleInfo {
    DeviceTaintRuleInfo::new(
        name.into(),
        driver.map(Into::into),
        pool.map(Into::into),
        dev.map(Into::into),
        ("example.com/taint", Some("tainted"), "NoExecute"),
    )
}

/// Each device as `slice/device=key,key` (keys of its effective taints), in slice order.
fn tainted(o: &DraObjects) -> Vec<String> {
    o.slices()
        .flat_map(|s| {
            s.devices.iter().map(move |d| {
                let keys: Vec<&str> = d.taints.iter().map(|t| t.key.as_str()).collect();
                format!("{}/{}={}", s.name, d.name, keys.join(","))
            })
        })
        .collect()
}

const T: &str = "example.com/taint";

#[test]
fn a_rule_taints_the_devices_its_selector_picks() {
    // (case, rule, want)
    let cases = [
        (
            "no selector: every device",
            rule("r", None, None, None),
            [format!("s1/device-1={T}"), format!("s2/device-2={T}")],
        ),
        (
            "driver",
            rule("r", Some(DRIVER1), None, None),
            [format!("s1/device-1={T}"), "s2/device-2=".into()],
        ),
        (
            "pool",
            rule("r", None, Some("pool-2"), None),
            ["s1/device-1=".into(), format!("s2/device-2={T}")],
        ),
        (
            "device name",
            rule("r", None, None, Some("device-1")),
            [format!("s1/device-1={T}"), "s2/device-2=".into()],
        ),
        (
            "all criteria",
            rule("r", Some(DRIVER1), Some("pool-1"), Some("device-1")),
            [format!("s1/device-1={T}"), "s2/device-2=".into()],
        ),
        (
            "criteria of different slices match nothing",
            rule("r", Some(DRIVER1), Some("pool-2"), None),
            ["s1/device-1=".into(), "s2/device-2=".into()],
        ),
    ];
    for (case, r, want) in cases {
        let mut o = two_slices();
        let changed = want.iter().any(|w| !w.ends_with('='));
        assert_eq!(o.update_taint_rule(r.clone()), changed, "{case}");
        assert_eq!(tainted(&o), want, "{case}: rule first");
        // The same when the slices come after the rule.
        let mut later = DraObjects::default();
        assert!(!later.update_taint_rule(r), "{case}: no slices yet");
        for s in two_slices().raw_slices.values() {
            later.put_slice((**s).clone());
        }
        assert_eq!(tainted(&later), want, "{case}: slices first");
    }
}

#[test]
fn rule_taints_follow_the_slice_s_own() {
    let mut o = DraObjects::default();
    assert!(
        !o.update_taint_rule(rule("r", None, None, None)),
        "no devices yet"
    );
    o.update_slice(&slice(
        "s1",
        DRIVER1,
        "pool-1",
        vec![device("device-1", &[("own", "NoSchedule")])],
    ));
    assert_eq!(tainted(&o), [format!("s1/device-1=own,{T}")]);
    // The published slice is kept as it was.
    let raw = &o.raw_slices["s1"];
    assert_eq!(raw.devices[0].taints.len(), 1);
    // A slice update re-applies the rules to the new devices (only device-1 is named).
    let mut o = DraObjects::default();
    o.update_taint_rule(rule("r", None, None, Some("device-1")));
    o.update_slice(&slice(
        "s1",
        DRIVER1,
        "pool-1",
        vec![device("device-1", &[])],
    ));
    o.update_slice(&slice(
        "s1",
        DRIVER1,
        "pool-1",
        vec![
            device("device-0", &[]),
            device("device-1", &[]),
            device("device-2", &[]),
        ],
    ));
    assert_eq!(
        tainted(&o),
        ["s1/device-0=", &format!("s1/device-1={T}"), "s1/device-2="]
    );
    assert!(o.remove_slice("s1"));
    assert!(o.slices().next().is_none() && o.raw_slices.is_empty());
}

#[test]
fn changing_or_deleting_a_rule_moves_or_lifts_its_taint() {
    let mut o = two_slices();
    assert!(o.update_taint_rule(rule("r", None, Some("pool-1"), None)));
    assert_eq!(
        tainted(&o),
        [format!("s1/device-1={T}"), "s2/device-2=".into()]
    );
    // Same rule again (a resync): nothing changes.
    assert!(!o.update_taint_rule(rule("r", None, Some("pool-1"), None)));
    // Pointed at pool-2: pool-1's device is clean again.
    assert!(o.update_taint_rule(rule("r", None, Some("pool-2"), None)));
    assert_eq!(
        tainted(&o),
        ["s1/device-1=".into(), format!("s2/device-2={T}")]
    );
    // Deleted: no taint left; deleting it again (or an unknown rule) changes nothing.
    assert!(o.remove_taint_rule("r"));
    assert_eq!(tainted(&o), ["s1/device-1=", "s2/device-2="]);
    assert!(!o.remove_taint_rule("r"));
    // Two rules on one device: both taints, in rule name order; removing one keeps the other.
    let other = DeviceTaintRuleInfo::new(
        "a-first".into(),
        None,
        None,
        Some("device-1".into()),
        ("other", None, "NoSchedule"),
    );
    assert!(o.update_taint_rule(rule("r", None, None, Some("device-1"))));
    assert!(o.update_taint_rule(other));
    assert_eq!(
        tainted(&o),
        [format!("s1/device-1=other,{T}"), "s2/device-2=".into()]
    );
    assert!(o.remove_taint_rule("r"));
    assert_eq!(tainted(&o), ["s1/device-1=other", "s2/device-2="]);
}

#[test]
fn only_effects_that_keep_claims_off_count() {
    let mut o = two_slices();
    for effect in ["None", "PreferNoSchedule", "SomeFutureEffect"] {
        let r = DeviceTaintRuleInfo::new("r".into(), None, None, None, ("k", None, effect));
        assert_eq!(r.taint, None, "{effect}");
        assert!(!o.update_taint_rule(r), "{effect}");
        assert_eq!(tainted(&o), ["s1/device-1=", "s2/device-2="], "{effect}");
    }
    // From None to NoSchedule: now it taints.
    let r = DeviceTaintRuleInfo::new("r".into(), None, None, None, ("k", Some("v"), "NoSchedule"));
    assert!(o.update_taint_rule(r));
    let d = &o.slices().next().unwrap().devices[0];
    assert_eq!(
        d.taints,
        [DeviceTaintView {
            key: "k".into(),
            value: "v".into(),
            effect: "NoSchedule".into()
        }]
    );
}

#[test]
fn every_served_version_reads_the_same() {
    use k8s_openapi::api::resource::{v1alpha3, v1beta2};
    let v1 = dra::DeviceTaintRule {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("r".into()),
            ..Default::default()
        },
        spec: dra::DeviceTaintRuleSpec {
            device_selector: Some(dra::DeviceTaintSelector {
                driver: Some(DRIVER1.into()),
                pool: Some("pool-1".into()),
                device: Some("device-1".into()),
            }),
            taint: dra::DeviceTaint {
                key: "k".into(),
                value: Some("v".into()),
                effect: "NoExecute".into(),
                ..Default::default()
            },
        },
        status: None,
    };
    let want = DeviceTaintRuleInfo::new(
        "r".into(),
        Some(DRIVER1.into()),
        Some("pool-1".into()),
        Some("device-1".into()),
        ("k", Some("v"), "NoExecute"),
    );
    assert_eq!(DeviceTaintRuleInfo::from_v1(&v1), want);
    let json = serde_json::to_value(&v1).unwrap();
    let as_version = |v: &str| {
        let mut j = json.clone();
        j["apiVersion"] = format!("resource.k8s.io/{v}").into();
        j
    };
    let beta: v1beta2::DeviceTaintRule = serde_json::from_value(as_version("v1beta2")).unwrap();
    assert_eq!(DeviceTaintRuleInfo::from_v1beta2(&beta), want);
    let alpha: v1alpha3::DeviceTaintRule = serde_json::from_value(as_version("v1alpha3")).unwrap();
    assert_eq!(DeviceTaintRuleInfo::from_v1alpha3(&alpha), want);
    // No selector: every device (upstream's tracker).
    let mut bare = v1.clone();
    bare.spec.device_selector = None;
    let r = DeviceTaintRuleInfo::from_v1(&bare);
    assert_eq!((r.driver, r.pool, r.device), (None, None, None));
}
