//! Namespace labels in the cache and snapshots (namespaceSelector of pod affinity terms).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use scheduler_core::cache::{Cache, Snapshot};

fn ns(name: &str, labels: &[(&str, &str)]) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn namespaces_reach_snapshots_and_old_snapshots_keep_their_copy() {
    let mut c = Cache::new();
    c.add_namespace(&ns("team-a", &[("team", "a")]));
    let mut s = Snapshot::new();
    c.update_snapshot(&mut s);
    assert_eq!(
        s.namespace_labels("team-a"),
        Some(&labels(&[("team", "a")]))
    );
    assert_eq!(s.namespace_labels("team-b"), None);

    let old = s.clone();
    c.update_namespace(&ns("team-a", &[("team", "a"), ("env", "prod")]));
    c.add_namespace(&ns("team-b", &[]));
    c.update_snapshot(&mut s);
    assert_eq!(
        s.namespace_labels("team-a"),
        Some(&labels(&[("team", "a"), ("env", "prod")]))
    );
    assert_eq!(s.namespace_labels("team-b"), Some(&labels(&[])));
    assert_eq!(s.namespaces().count(), 2);
    assert_eq!(
        old.namespace_labels("team-a"),
        Some(&labels(&[("team", "a")])),
        "a snapshot taken earlier is not changed"
    );

    assert!(c.remove_namespace("team-a"));
    assert!(!c.remove_namespace("team-a"));
    c.update_snapshot(&mut s);
    assert_eq!(s.namespace_labels("team-a"), None);
    assert_eq!(c.namespace_labels("team-b"), Some(&labels(&[])));
}
