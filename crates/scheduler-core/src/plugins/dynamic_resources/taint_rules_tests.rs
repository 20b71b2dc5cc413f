//! DeviceTaintRules through the whole plugin: a rule's taint acts exactly as the same taint
//! in the slice (upstream's allocator sees the tracker's patched slices), and a rule change
//! is seen by the next cycle (the device index follows the patched slices).

use k8s_openapi::api::resource::v1 as dra;

use super::allocator::tests::{claim, count, req};
use super::tests::{cluster, framework, run, with_claims};
use super::*;
use crate::cache::Cache;
use crate::schedule_one::Decision;
use crate::types::dra::taint_rules::DeviceTaintRuleInfo;

fn taint_rule(device: Option<&str>, effect: &str) -> DeviceTaintRuleInfo {
    DeviceTaintRuleInfo::new(
        "maintenance".into(),
        None,
        Some("n1".into()),
        device.map(Into::into),
        ("example.com/maintenance", Some("firmware"), effect),
    )
}

/// Two GPUs on n1 (cluster()); a cache holding them on nodes n1 and n2.
fn cache() -> Cache {
    let mut cache = Cache::new();
    for n in ["n1", "n2"] {
        cache.add_node(&NodeInfo::test(n).pods(10).build_node());
    }
    cache.set_dra_api_served(true);
    *cache.dra_mut() = cluster();
    cache
}

fn placed_devices(d: Decision) -> Option<Vec<String>> {
    match d {
        Decision::Bind { state, .. } => Some(
            decided_claim_writes(&state)
                .unwrap()
                .iter()
                .flat_map(|w| w.allocation.iter())
                .flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten()))
                .map(|r| r.device.clone())
                .collect(),
        ),
        Decision::Unschedulable { message, .. } => {
            assert_eq!(
                message,
                format!(
                    "0/2 nodes are available: 2 {CANNOT_ALLOCATE_ALL_CLAIMS}. still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
                ),
            );
            None
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rule_keeps_untolerating_claims_off_the_device_until_it_is_deleted() {
    let fw = framework(None);
    let mut cache = cache();
    let pod = with_claims(&["a"]);
    // A rule tainting gpu-0: the claim gets gpu-1.
    assert!(
        cache
            .dra_mut()
            .update_taint_rule(taint_rule(Some("gpu-0"), "NoSchedule"))
    );
    assert_eq!(
        placed_devices(run(&fw, &pod, &cache.snapshot())),
        Some(vec!["gpu-1".into()])
    );
    // Widened to the whole pool (NoExecute): nothing left for it.
    assert!(
        cache
            .dra_mut()
            .update_taint_rule(taint_rule(None, "NoExecute"))
    );
    assert_eq!(placed_devices(run(&fw, &pod, &cache.snapshot())), None);
    // Effect None: informational only.
    assert!(cache.dra_mut().update_taint_rule(taint_rule(None, "None")));
    assert_eq!(
        placed_devices(run(&fw, &pod, &cache.snapshot())),
        Some(vec!["gpu-0".into()])
    );
    // Back to NoExecute, then deleted: the pod fits again.
    assert!(
        cache
            .dra_mut()
            .update_taint_rule(taint_rule(None, "NoExecute"))
    );
    assert_eq!(placed_devices(run(&fw, &pod, &cache.snapshot())), None);
    assert!(cache.dra_mut().remove_taint_rule("maintenance"));
    assert_eq!(
        placed_devices(run(&fw, &pod, &cache.snapshot())),
        Some(vec!["gpu-0".into()])
    );
}

#[test]
fn a_request_s_tolerations_admit_a_rule_s_taint() {
    let fw = framework(None);
    let mut cache = cache();
    cache
        .dra_mut()
        .update_taint_rule(taint_rule(None, "NoExecute"));
    let toleration = |key: &str, effect: Option<&str>| dra::DeviceToleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: effect.map(Into::into),
        ..Default::default()
    };
    // (claim, toleration, fits)
    let cases = [
        (
            "any-effect",
            toleration("example.com/maintenance", None),
            true,
        ),
        (
            "no-execute",
            toleration("example.com/maintenance", Some("NoExecute")),
            true,
        ),
        (
            "no-schedule-only",
            toleration("example.com/maintenance", Some("NoSchedule")),
            false,
        ),
        ("other-key", toleration("example.com/other", None), false),
    ];
    for (name, t, fits) in cases {
        let mut r = count(req("r", "gpu"), 2);
        r.exactly.as_mut().unwrap().tolerations = Some(vec![t.clone()]);
        cache.dra_mut().update_claim(&claim(name, vec![r]));
        let got = placed_devices(run(&fw, &with_claims(&[name]), &cache.snapshot()));
        assert_eq!(got.is_some(), fits, "{name}");
        if fits {
            assert_eq!(got, Some(vec!["gpu-0".into(), "gpu-1".into()]), "{name}");
        }
    }
}
