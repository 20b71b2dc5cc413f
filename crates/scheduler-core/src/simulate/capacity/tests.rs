//! How many copies fit, on small hand-made dumps whose answers can be counted by hand.

use super::*;
use crate::simulate::load_str;

/// Three nodes (2, 2 and 1 CPU), one pod bound on n1 (1 CPU), one pending (500m), one
/// PriorityClass: 5 - 1 - 0.5 = 3.5 CPUs free, so seven 500m copies fit.
const DUMP: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1, zone: a}}
status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2, zone: b}}
status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {kubernetes.io/hostname: n3, zone: b}}
status: {allocatable: {cpu: '1', memory: 8Gi, pods: '110'}}
---
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: default}
spec:
  nodeName: n1
  containers: [{name: c, image: img, resources: {requests: {cpu: '1', memory: 128Mi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: pending, namespace: default}
spec:
  containers: [{name: c, image: img, resources: {requests: {cpu: 500m, memory: 128Mi}}}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
";

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
";

const SMALL_POD: &str = "
apiVersion: v1
kind: Pod
metadata: {name: small}
spec:
  containers: [{name: c, image: img, resources: {requests: {cpu: 500m, memory: 128Mi}}}]
";

fn ask(template: &str, max: Option<usize>) -> CapacityReport {
    let objects = load_str(DUMP, "dump.yaml").unwrap();
    let loaded = crate::config::load_str(CONFIG, "config.yaml").unwrap();
    let t = read_template(template, "template.yaml").unwrap();
    how_many_fit(&objects, &loaded, 1, &t, max, &[]).unwrap()
}

fn copies_on(r: &CapacityReport, node: &str) -> usize {
    r.nodes
        .iter()
        .find(|n| n.node == node)
        .map_or(0, |n| n.copies)
}

fn template_error(template: &str) -> TemplateError {
    read_template(template, "template.yaml").unwrap_err()
}

#[test]
fn copies_fill_the_free_cpu_and_the_next_one_says_why_not() {
    let r = ask(SMALL_POD, None);
    assert_eq!(
        r.pending,
        PendingSummary {
            scheduled: 1,
            total: 1
        }
    );
    assert_eq!(r.placed, 7, "{r:?}");
    // Every node is full to its last 500m: 1 CPU free on n1, 2 on n2, 1 on n3, with the
    // dump's pending pod taking 500m of one of them.
    assert_eq!(
        copies_on(&r, "n1") + copies_on(&r, "n2") + copies_on(&r, "n3"),
        7
    );
    assert!(copies_on(&r, "n1") <= 2 && copies_on(&r, "n2") <= 4 && copies_on(&r, "n3") <= 2);
    assert_eq!(
        r.stopped_by,
        Stop::Unschedulable {
            message: "0/3 nodes are available: 3 Insufficient cpu.".into()
        }
    );
    assert_eq!(
        r.template,
        TemplateSummary {
            kind: "Pod".into(),
            name: "small".into(),
            namespace: "default".into(),
            profile: "default-scheduler".into(),
        }
    );
}

#[test]
fn max_stops_early_and_says_the_limit_stopped_it() {
    let r = ask(SMALL_POD, Some(2));
    assert_eq!(r.placed, 2);
    assert_eq!(r.stopped_by, Stop::MaxReached);
    assert_eq!(r.nodes.iter().map(|n| n.copies).sum::<usize>(), 2);
    // The limit equal to what fits is still the limit, not a failure.
    let r = ask(SMALL_POD, Some(7));
    assert_eq!((r.placed, &r.stopped_by), (7, &Stop::MaxReached));
}

#[test]
fn a_deployment_is_copied_from_its_pod_template_in_its_namespace() {
    let r = ask(
        "
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: img, resources: {requests: {cpu: '1'}}}]
",
        None,
    );
    assert_eq!(
        r.template,
        TemplateSummary {
            kind: "Deployment".into(),
            name: "web".into(),
            namespace: "shop".into(),
            profile: "default-scheduler".into(),
        }
    );
    // 1 CPU free on n1, 2 on n2, 1 on n3, minus the pending pod's 500m somewhere.
    assert_eq!(r.placed, 3, "{r:?}");
}

#[test]
fn copies_see_each_other_one_per_node_with_anti_affinity_to_themselves() {
    let r = ask(
        "
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: db}}
            topologyKey: kubernetes.io/hostname
      containers: [{name: c, image: img, resources: {requests: {cpu: 100m}}}]
",
        None,
    );
    assert_eq!(r.placed, 3, "{r:?}");
    assert!(r.nodes.iter().all(|n| n.copies == 1), "{r:?}");
    let Stop::Unschedulable { message } = &r.stopped_by else {
        panic!("{r:?}");
    };
    assert_eq!(
        message,
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    );
}

#[test]
fn a_node_selector_no_node_satisfies_gives_zero_and_the_reason() {
    let r = ask(
        "
apiVersion: v1
kind: Pod
metadata: {name: gpu}
spec:
  nodeSelector: {accelerator: h100}
  containers: [{name: c, image: img}]
",
        None,
    );
    assert_eq!(r.placed, 0);
    assert!(r.nodes.is_empty());
    assert_eq!(
        r.stopped_by,
        Stop::Unschedulable {
            message:
                "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
                    .into()
        }
    );
}

#[test]
fn copies_never_preempt_even_with_a_higher_priority() {
    let r = ask(
        "
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  priorityClassName: high
  containers: [{name: c, image: img, resources: {requests: {cpu: '2'}}}]
",
        None,
    );
    // Only n2 has 2 CPUs free, unless the pending pod took 500m of it; the bound pod on n1
    // (priority 0) would be a victim for a 1000-priority pod, but copies preempt nothing.
    let Stop::Unschedulable { message } = &r.stopped_by else {
        panic!("{r:?}");
    };
    assert!(!message.contains("preemption"), "{message}");
    assert!(r.placed <= 1, "{r:?}");
    assert_eq!(copies_on(&r, "n1"), 0);
}

#[test]
fn a_template_that_is_not_a_pod_kind_names_the_field_and_the_kinds() {
    let e = template_error("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
    assert_eq!(e.field.as_deref(), Some("kind"));
    assert_eq!(
        e.to_string(),
        "template.yaml:2: pod template: kind: \"ConfigMap\" is not a kind whose pods can be copied; use one of Pod, Deployment, Job, ReplicaSet, StatefulSet"
    );
}

#[test]
fn a_workload_without_a_pod_template_says_where_it_goes() {
    let e = template_error("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {}\n");
    assert_eq!(e.field.as_deref(), Some("spec.template"));
    assert!(e.fix.contains("kubectl get job NAME -o yaml"), "{e}");
}

#[test]
fn an_invalid_quantity_in_a_workload_names_its_field_and_line() {
    let e = template_error(
        "apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  template:
    spec:
      containers:
      - name: c
        image: img
        resources: {requests: {cpu: 500mm}}
",
    );
    assert_eq!(
        e.field.as_deref(),
        Some("spec.template.spec.containers[0].resources.requests[cpu]")
    );
    assert_eq!(e.line, Some(10), "{e}");
}

#[test]
fn a_file_with_two_objects_a_pod_without_containers_or_a_bound_pod_is_refused() {
    let e = template_error(&format!("{SMALL_POD}\n---\n{SMALL_POD}"));
    assert_eq!(e.message, "the file holds 2 objects");
    let e =
        template_error("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n");
    assert_eq!(e.field.as_deref(), Some("spec.containers"));
    let e = template_error(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: n1, containers: [{name: c}]}\n",
    );
    assert_eq!(e.field.as_deref(), Some("spec.nodeName"));
    let e = template_error("apiVersion: v1\nkind: Pod\nspec: {containers: [{name: c}]}\n");
    assert_eq!(e.field.as_deref(), Some("metadata.name"));
}

#[test]
fn a_template_for_another_scheduler_or_an_unknown_priority_class_is_an_error() {
    let objects = load_str(DUMP, "dump.yaml").unwrap();
    let loaded = crate::config::load_str(CONFIG, "config.yaml").unwrap();
    let other = read_template(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {schedulerName: other, containers: [{name: c}]}\n",
        "t.yaml",
    )
    .unwrap();
    let Err(CapacityError::Template(e)) = how_many_fit(&objects, &loaded, 1, &other, None, &[])
    else {
        panic!("accepted a pod of another scheduler");
    };
    assert_eq!(e.field.as_deref(), Some("spec.schedulerName"));
    assert!(e.fix.contains("default-scheduler"), "{e}");
    let unknown = read_template(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {priorityClassName: nope, containers: [{name: c}]}\n",
        "t.yaml",
    )
    .unwrap();
    let Err(CapacityError::Template(e)) = how_many_fit(&objects, &loaded, 1, &unknown, None, &[])
    else {
        panic!("accepted an unknown PriorityClass");
    };
    assert_eq!(e.field.as_deref(), Some("spec.priorityClassName"));
}

#[test]
fn copies_skip_the_names_of_the_dumps_own_pods() {
    // The dump has `default/pending`; a template named `pending` would make `pending-0`...
    // and a dump pod named like a copy must not stop the copies.
    let dump = format!(
        "{DUMP}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: small-1, namespace: default}}\nspec:\n  nodeName: n2\n  containers: [{{name: c, image: img, resources: {{requests: {{cpu: 500m}}}}}}]\n"
    );
    let objects = load_str(&dump, "dump.yaml").unwrap();
    let loaded = crate::config::load_str(CONFIG, "config.yaml").unwrap();
    let t = read_template(SMALL_POD, "template.yaml").unwrap();
    let r = how_many_fit(&objects, &loaded, 1, &t, None, &[]).unwrap();
    // small-1 holds 500m of n2: one copy fewer than without it.
    assert_eq!(r.placed, 6, "{r:?}");
    assert!(matches!(r.stopped_by, Stop::Unschedulable { .. }), "{r:?}");
}

#[test]
fn a_template_with_scheduling_gates_places_nothing_and_says_it_is_gated() {
    let r = ask(
        "
apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  schedulingGates: [{name: example.com/quota}]
  containers: [{name: c, image: img}]
",
        None,
    );
    assert_eq!(r.placed, 0);
    let Stop::Gated { message } = &r.stopped_by else {
        panic!("{r:?}");
    };
    assert!(message.contains("example.com/quota"), "{message}");
}

/// n1 and n2 with 4 GPUs, n3 with 2: ten GPUs in all.
const GPU_DUMP: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110', nvidia.com/gpu: '4'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110', nvidia.com/gpu: '4'}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}
status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110', nvidia.com/gpu: '2'}}
";

/// A gang of two pods of two GPUs each: a PodGroup and a Job whose pods name it.
const GANG: &str = "apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: worker, namespace: ml}
spec:
  template:
    spec:
      schedulingGroup: {podGroupName: train}
      restartPolicy: Never
      containers: [{name: c, image: img, resources: {requests: {cpu: '1', nvidia.com/gpu: '2'}}}]
";

fn ask_gpu(template: &str, max: Option<usize>) -> CapacityReport {
    let objects = load_str(GPU_DUMP, "dump.yaml").unwrap();
    let loaded = crate::config::load_str(CONFIG, "config.yaml").unwrap();
    let t = read_template(template, "gang.yaml").unwrap_or_else(|e| panic!("{e}"));
    how_many_fit(&objects, &loaded, 1, &t, max, &[]).unwrap()
}

#[test]
fn gang_copies_are_placed_whole_and_the_next_gang_says_why_not() {
    // Ten GPUs hold five 2-GPU pods: two whole gangs, and the third would have one pod.
    let r = ask_gpu(GANG, None);
    assert_eq!(r.placed, 2, "{r:?}");
    assert_eq!(
        r.gang,
        Some(GangSummary {
            pod_group: "train".into(),
            min_count: 2
        })
    );
    let groups: Vec<&str> = r.gangs.iter().map(|g| g.pod_group.as_str()).collect();
    assert_eq!(groups, ["ml/train-0", "ml/train-1"]);
    let pods: Vec<&str> = r.gangs[0].members.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(pods, ["ml/train-0-0", "ml/train-0-1"]);
    assert_eq!(r.nodes.iter().map(|n| n.copies).sum::<usize>(), 4);
    // Every node holds at most its GPUs: n3 at most one pod.
    assert!(copies_on(&r, "n3") <= 1 && copies_on(&r, "n1") <= 2 && copies_on(&r, "n2") <= 2);
    let Stop::Unschedulable { message } = &r.stopped_by else {
        panic!("{:?}", r.stopped_by);
    };
    assert!(message.contains("Insufficient nvidia.com/gpu"), "{message}");
    // --max counts whole gangs.
    let r = ask_gpu(GANG, Some(1));
    assert_eq!((r.placed, r.stopped_by.clone()), (1, Stop::MaxReached));
    assert_eq!(r.nodes.iter().map(|n| n.copies).sum::<usize>(), 2);
}

#[test]
fn gang_templates_refuse_a_group_without_pods_and_pods_of_another_group() {
    let alone = GANG.split("---").next().unwrap();
    let e = read_template(alone, "gang.yaml").unwrap_err();
    assert_eq!(e.line, Some(1));
    assert!(
        e.to_string()
            .starts_with("gang.yaml:1: pod template: PodGroup train comes with 0 pod template(s); add exactly one"),
        "{e}"
    );
    let other = GANG.replace("podGroupName: train", "podGroupName: eval");
    let e = read_template(&other, "gang.yaml").unwrap_err();
    assert_eq!(e.line, Some(13), "{e}");
    assert_eq!(
        e.field.as_deref(),
        Some("spec.template.spec.schedulingGroup.podGroupName")
    );
    assert!(
        e.message
            .contains("\"eval\", not the file's PodGroup \"train\""),
        "{e}"
    );
    assert!(e.fix.contains("to \"train\""), "{e}");
    // A gang's pod without its PodGroup in the file is refused when asked.
    let lone_pod = GANG.split("---").nth(1).unwrap();
    let objects = load_str(GPU_DUMP, "dump.yaml").unwrap();
    let loaded = crate::config::load_str(CONFIG, "config.yaml").unwrap();
    let t = read_template(lone_pod, "pod.yaml").unwrap();
    let Err(CapacityError::Template(e)) = how_many_fit(&objects, &loaded, 1, &t, None, &[]) else {
        panic!("a gang's pod alone must be refused");
    };
    assert!(
        e.to_string()
            .contains("names PodGroup \"train\", which the file does not hold")
            || e.message.contains("which the file does not hold"),
        "{e}"
    );
}

/// Two nodes; three local PVs (10Gi each: two on n1, one on n2) of a
/// WaitForFirstConsumer class that provisions nothing.
const LOCAL_PV_DUMP: &str = "
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110'}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-a}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/a}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n1]}]}]}}
status: {phase: Available}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-b}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/b}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n1]}]}]}}
status: {phase: Available}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-c}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/c}
  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n2]}]}]}}
status: {phase: Available}
";

const DB_STATEFULSET: &str = "
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: img, resources: {requests: {cpu: 100m}}, volumeMounts: [{name: data, mountPath: /data}]}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: local
      resources: {requests: {storage: 5Gi}}
";

#[test]
fn statefulset_copies_get_their_own_claims_until_the_local_volumes_run_out() {
    let objects = load_str(LOCAL_PV_DUMP, "dump.yaml").unwrap();
    let loaded = crate::config::load_str(CONFIG, "config.yaml").unwrap();
    let t = read_template(DB_STATEFULSET, "db.yaml").unwrap();
    assert_eq!(t.claim_templates.len(), 1);
    let (r, details) = how_many_fit_detailed(&objects, &loaded, 1, &t, None, &[]).unwrap();
    // Each copy binds one PV of its own: three fit, two on n1 and one on n2.
    assert_eq!(r.placed, 3, "{r:?}");
    assert_eq!((copies_on(&r, "n1"), copies_on(&r, "n2")), (2, 1));
    let names: Vec<&str> = details.copies.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["data/db-0", "data/db-1", "data/db-2"]);
    let Stop::Unschedulable { message } = &r.stopped_by else {
        panic!("{:?}", r.stopped_by);
    };
    assert_eq!(
        message,
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
    );
    // Without the claim templates the same pods would not be limited by the volumes.
    let mut no_claims = t.clone();
    no_claims.claim_templates.clear();
    let r = how_many_fit(&objects, &loaded, 1, &no_claims, Some(10), &[]).unwrap();
    assert_eq!(r.placed, 10);
}

#[test]
fn a_claim_template_without_a_name_is_refused_naming_the_field() {
    let e = read_template(
        &DB_STATEFULSET.replace("- metadata: {name: data}", "- metadata: {}"),
        "db.yaml",
    )
    .unwrap_err();
    assert_eq!(
        e.field.as_deref(),
        Some("spec.volumeClaimTemplates[0].metadata.name"),
        "{e}"
    );
    assert_eq!(e.line, Some(12), "{e}");
}
