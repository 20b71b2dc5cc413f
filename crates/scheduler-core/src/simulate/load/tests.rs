use super::*;

#[test]
fn multi_document_files_load_every_kind() {
    let text = r#"
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {gpu: "true"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: 100m}}}]
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
scheduling: {nodeSelector: {sandbox: "true"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb, namespace: default}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored}
"#;
    let o = load_str(text, "dump.yaml").unwrap();
    assert_eq!(o.nodes.len(), 1);
    assert_eq!(o.nodes[0].metadata.name.as_deref(), Some("n1"));
    assert_eq!(o.pods.len(), 1);
    assert_eq!(o.runtime_classes[0].handler, "kata");
    assert_eq!(o.priority_classes[0].value, Some(1000));
    assert_eq!(o.pdbs.len(), 1);
    assert_eq!(o.skipped_kinds.get("Deployment"), Some(&1));
}

#[test]
fn storage_objects_load_including_typed_lists() {
    let text = r#"
apiVersion: v1
kind: PersistentVolumeClaimList
items:
- metadata: {name: data, namespace: default}
  spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /x}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: standard}
provisioner: pd.csi.storage.gke.io
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n1}
spec: {drivers: [{name: pd.csi.storage.gke.io, nodeID: n1, allocatable: {count: 15}}]}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: pd.csi.storage.gke.io}
spec: {storageCapacity: true}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacityList
items:
- metadata: {name: cap-a, namespace: kube-system}
  storageClassName: standard
  nodeTopology: {matchLabels: {topology.kubernetes.io/zone: a}}
  capacity: 100Gi
  maximumVolumeSize: 10Gi
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: va-1}
spec: {attacher: pd.csi.storage.gke.io, nodeName: n1, source: {persistentVolumeName: pv1}}
---
apiVersion: storage.k8s.io/v1beta1
kind: StorageClass
metadata: {name: old}
provisioner: x
"#;
    let err = load_str(text, "s.yaml").unwrap_err();
    assert_eq!(err.len(), 1);
    assert!(
        err[0].message.starts_with("StorageClass old: apiVersion"),
        "{}",
        err[0].message
    );
    let o = load_str(
        text.split("---\napiVersion: storage.k8s.io/v1beta1")
            .next()
            .unwrap(),
        "s.yaml",
    )
    .unwrap();
    assert_eq!(o.pvcs[0].metadata.name.as_deref(), Some("data"));
    assert_eq!(o.pvs.len(), 1);
    assert_eq!(o.storage_classes[0].provisioner, "pd.csi.storage.gke.io");
    assert_eq!(
        o.csi_nodes[0].spec.drivers[0]
            .allocatable
            .as_ref()
            .unwrap()
            .count,
        Some(15)
    );
    assert_eq!(o.csi_drivers[0].spec.storage_capacity, Some(true));
    assert_eq!(o.volume_attachments[0].spec.node_name, "n1");
    assert_eq!(o.storage_capacities[0].storage_class_name, "standard");
    assert_eq!(
        o.storage_capacities[0].maximum_volume_size,
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
            "10Gi".into()
        ))
    );
}

#[test]
fn kubectl_list_output_loads_items_without_kind() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: a}
- apiVersion: v1
  kind: Node
  metadata: {name: b}
"#;
    assert_eq!(load_str(text, "l.yaml").unwrap().nodes.len(), 2);
    let typed = "apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: a}\n";
    assert_eq!(load_str(typed, "l.yaml").unwrap().nodes.len(), 1);
}

#[test]
fn yaml_1_1_booleans_stay_strings() {
    let o = load_str(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: {gpu: no}}\n",
        "n.yaml",
    )
    .unwrap();
    assert_eq!(o.nodes[0].metadata.name.as_deref(), Some("n"));
    assert_eq!(o.nodes[0].metadata.labels.as_ref().unwrap()["gpu"], "no");
}

#[test]
fn json_documents_load() {
    let text = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"j"}}"#;
    assert_eq!(
        load_str(text, "n.json").unwrap().nodes[0]
            .metadata
            .name
            .as_deref(),
        Some("j")
    );
}

#[test]
fn bad_field_names_the_object_field_and_line() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad, namespace: ns}\nspec:\n  containers:\n  - name: c\n    ports: [{containerPort: eighty}]\n";
    let errs = load_str(text, "pods.yaml").unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    let e = errs[0].to_string();
    assert!(e.starts_with("pods.yaml:5"), "{e}");
    assert!(
        e.contains("Pod ns/bad: field spec.containers[0].ports[0].containerPort"),
        "{e}"
    );
}

#[test]
fn syntax_errors_have_line_and_column() {
    let errs = load_str("kind: Node\nmetadata: {name: [\n", "broken.yaml").unwrap_err();
    assert_eq!(errs.len(), 1);
    assert!(errs[0].line.is_some(), "{:?}", errs[0]);
    assert!(
        errs[0].to_string().starts_with("broken.yaml:"),
        "{}",
        errs[0]
    );
}

#[test]
fn missing_kind_and_wrong_api_version_are_errors() {
    let errs = load_str("metadata: {name: x}\n---\napiVersion: node.k8s.io/v1beta1\nkind: RuntimeClass\nmetadata: {name: r}\nhandler: h\n", "x.yaml")
        .unwrap_err();
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].message.contains("no `kind`"));
    assert!(
        errs[1].message.contains("use node.k8s.io/v1"),
        "{}",
        errs[1]
    );
}

#[test]
fn directories_load_sorted_yaml_and_json_files() {
    let dir = std::env::temp_dir().join(format!("ferrosched-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("b.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: b}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("a.json"),
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}"#,
    )
    .unwrap();
    std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
    let o = load_paths(std::slice::from_ref(&dir)).unwrap();
    let names: Vec<_> = o
        .nodes
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, vec!["a", "b"]);
    std::fs::remove_dir_all(&dir).unwrap();
    let errs = load_paths(&[dir.join("missing.yaml")]).unwrap_err();
    assert!(errs[0].message.starts_with("cannot read"));
}

#[test]
fn invalid_quantities_are_refused_at_their_line() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources:\n      requests: {memory: 1Gi}\n      limits:\n        cpu: 500mm\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '4', memory: 8GB}}\n";
    let errors = load_str(text, "dump.yaml").unwrap_err();
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        vec![
            "dump.yaml:11: Pod d/p: spec.containers[0].resources.limits[cpu]: Invalid value: \"500mm\": unable to parse quantity's suffix",
            "dump.yaml:16: Node n: status.allocatable[memory]: Invalid value: \"8GB\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ]
    );
}

#[test]
fn an_object_given_twice_names_both_places() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec: {containers: [{name: c, image: i}]}\n";
    // In one file.
    let errors = load_str(&format!("{pod}---\n{pod}"), "one.yaml").unwrap_err();
    assert_eq!(
        errors[0].to_string(),
        "one.yaml:6: Pod default/web appears twice: first at one.yaml:1; each object may be given once (overlapping dump files?)"
    );
    // Across two files of a directory.
    let dir = std::env::temp_dir().join(format!("ferrosched-dup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.yaml"), pod).unwrap();
    std::fs::write(dir.join("b.yaml"), format!("# again\n{pod}")).unwrap();
    let errors = load_paths(std::slice::from_ref(&dir)).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    let a = dir.join("a.yaml").display().to_string();
    let b = dir.join("b.yaml").display().to_string();
    assert_eq!(
        errors[0].to_string(),
        format!(
            "{b}:2: Pod default/web appears twice: first at {a}:1; each object may be given once (overlapping dump files?)"
        )
    );
}

#[test]
fn every_kind_run_watches_is_read() {
    let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ns}\nspec: {selector: {app: a}}\n---\napiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: r, namespace: ns}\nspec: {selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}}}\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: st, namespace: ns}\nspec: {serviceName: s, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}}}\n---\napiVersion: v1\nkind: ReplicationController\nmetadata: {name: rc, namespace: ns}\nspec: {selector: {app: a}}\n";
    let o = load_str(text, "dump.yaml").unwrap();
    assert_eq!(
        (
            o.namespaces.len(),
            o.services.len(),
            o.replica_sets.len(),
            o.stateful_sets.len(),
            o.replication_controllers.len()
        ),
        (1, 1, 1, 1, 1)
    );
    assert!(o.skipped_kinds.is_empty(), "{:?}", o.skipped_kinds);
    // The dump commands name every kind read.
    for (_, resource) in KINDS_READ {
        assert!(
            DUMP_COMMAND.contains(&format!("{resource},"))
                || DUMP_COMMAND.contains(&format!("{resource} "))
                || TAINT_RULES_DUMP_COMMAND.contains(&format!(" {resource} "))
                || POD_GROUPS_DUMP_COMMAND.contains(&format!(" {resource} "))
                || COMPOSITE_POD_GROUPS_DUMP_COMMAND.contains(&format!(" {resource} ")),
            "{resource}"
        );
    }
}

/// "Billion laughs" in a dump: refused at the alias that crosses the YAML budget, in words
/// (not the reader's debug output), with the fix.
#[test]
fn an_alias_bomb_is_refused_in_words() {
    let mut text = String::from("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n");
    text.push_str("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for l in 1..9u8 {
        let (name, prev) = ((b'a' + l) as char, (b'a' + l - 1) as char);
        let refs = vec![format!("*{prev}"); 9].join(", ");
        text.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    let errors = load_str(&text, "dump.yaml").unwrap_err();
    let e = errors[0].to_string();
    assert!(e.starts_with("dump.yaml:"), "{e}");
    assert!(e.contains("YAML aliases expand to more than"), "{e}");
    assert!(e.contains("write the values out"), "{e}");
    assert!(!e.contains('{'), "{e}");
}

/// A dump of 5,000 nodes with 20 labels each is millions of YAML nodes without a single
/// alias: the budget grows with the file, so it loads.
#[test]
fn a_large_dump_without_aliases_loads() {
    let mut text = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..5_000 {
        text.push_str(&format!(
            "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: node-{i}\n    labels:\n"
        ));
        for j in 0..20 {
            text.push_str(&format!("      label-{j}.example.com/key: value-{j}\n"));
        }
        text.push_str("  status:\n    allocatable: {cpu: '32', memory: 128Gi, pods: '110'}\n");
    }
    let objects = load_str(&text, "big.yaml").unwrap();
    assert_eq!(objects.nodes.len(), 5_000);
}

/// The API server refuses negative requests, limits and overhead on a pod and negative
/// node capacity or allocatable (`must be greater than or equal to 0`); a dump holding
/// them is refused at each value's line, with the object and the field.
#[test]
fn negative_quantities_are_refused_at_their_line() {
    let text = "apiVersion: v1
kind: Pod
metadata: {name: p, namespace: d}
spec:
  overhead: {memory: -1Mi}
  resources:
    limits: {cpu: '-2'}
  initContainers:
  - name: i
    resources:
      requests: {cpu: -100m}
  containers:
  - name: c
    resources:
      requests:
        cpu: -1
        memory: -5Gi
      limits:
        memory: 1Gi
---
apiVersion: v1
kind: Node
metadata: {name: n}
status:
  capacity: {cpu: '4', memory: -8Gi}
  allocatable:
    cpu: '-4'
";
    let errors = load_str(text, "dump.yaml").unwrap_err();
    let mut texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    texts.sort();
    let mut want = vec![
        "dump.yaml:5: Pod d/p: spec.overhead[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0",
        "dump.yaml:7: Pod d/p: spec.resources.limits[cpu]: Invalid value: \"-2\": must be greater than or equal to 0",
        "dump.yaml:11: Pod d/p: spec.initContainers[0].resources.requests[cpu]: Invalid value: \"-100m\": must be greater than or equal to 0",
        "dump.yaml:16: Pod d/p: spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
        "dump.yaml:17: Pod d/p: spec.containers[0].resources.requests[memory]: Invalid value: \"-5Gi\": must be greater than or equal to 0",
        "dump.yaml:25: Node n: status.capacity[memory]: Invalid value: \"-8Gi\": must be greater than or equal to 0",
        "dump.yaml:27: Node n: status.allocatable[cpu]: Invalid value: \"-4\": must be greater than or equal to 0",
    ];
    want.sort();
    assert_eq!(texts, want);
    // Zero is fine.
    let zero = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '0', memory: 0}}\n";
    assert_eq!(load_str(zero, "z.yaml").unwrap().nodes.len(), 1);
}

/// Found by the fuzz harness: thousands of bad values each looked for their line from the
/// top of the file (quadratic: 2 s for 7,000 nodes in 1 MiB in release). Each is still
/// found at its own line; a value not written literally in its own document falls back to
/// the document's line instead of a line of a later document.
#[test]
fn many_bad_quantities_each_at_its_own_line() {
    let node = |i: usize, pods: &str| {
        format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\nstatus: {{allocatable: {{pods: {pods}}}}}\n"
        )
    };
    let n = 20_000;
    let text: String = (0..n).map(|i| node(i, "'0o777'")).collect();
    let started = std::time::Instant::now();
    let Err(errors) = load_str(&text, "dump.yaml") else {
        panic!("a dump of bad quantities loaded");
    };
    assert_eq!(errors.len(), n);
    for (i, e) in errors.iter().enumerate() {
        assert_eq!(e.line, Some(5 * i as u32 + 5), "{e}");
    }
    // Linear: well under a second in a debug build (minutes when it was quadratic).
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // "\x2d1" is -1, written otherwise: its own document's line, not the later comment's.
    let escaped = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {pods: \"\\x2d1\"}}\n---\n# pods: -1 is refused\napiVersion: v1\nkind: Node\nmetadata: {name: b}\n";
    let errors = load_str(escaped, "dump.yaml").unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].line, Some(1), "{}", errors[0]);
}

/// A dump with thousands of broken objects prints the first errors and a count of the
/// rest, not megabytes; a few errors print whole.
#[test]
fn described_load_errors_are_capped() {
    let text: String = (0..5_000)
        .map(|i| format!("---\napiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\nstatus: {{allocatable: {{cpu: -1}}}}\n"))
        .collect();
    let errors = load_str(&text, "big.yaml").unwrap_err();
    assert_eq!(errors.len(), 5_000);
    let printed = describe_errors(&errors);
    assert!(
        printed.starts_with("5000 errors in cluster files:\n  big.yaml:"),
        "{}",
        &printed[..200]
    );
    assert_eq!(printed.lines().count(), 1 + crate::config::MAX_PRINTED + 1);
    assert!(printed.ends_with("... and 4900 more errors (fix the ones above first)"));
    assert!(printed.len() < 30_000, "{}", printed.len());

    let few = describe_errors(&errors[..2]);
    assert!(few.starts_with("2 errors in cluster files:"));
    assert_eq!(few.lines().count(), 3);
    assert!(!few.contains("more errors"));
}
