//! RBAC derived from the code: the controller runs a representative scenario (binding, volume
//! binding (claimRef and selected-node patches), an
//! unschedulable pod with events, event series and status patches, preemption deleting a
//! victim, leader election) against the fake API server, which logs every request in RBAC
//! terms. Every logged request must be allowed by the rules `kubectl apply -k manifests/`
//! gives the `kube-system/ferrosched` service account, and every verb those rules grant
//! must have been used (the role is exactly what the controller needs).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_apiserver::{FakeApiServer, RequestRecord};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};
use serde_json::{Value, json};

const SA_NAMESPACE: &str = "kube-system";
const SA_NAME: &str = "ferrosched";
/// A Role every cluster has (the API server makes it): reading the
/// extension-apiserver-authentication ConfigMap. Its rules are not ours to trim, so only
/// that ferrosched's requests fit them is checked, not that each is used.
const BUILT_IN_AUTHN_READER: &str = "extension-apiserver-authentication-reader";

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests")
}

/// Every document of every file the kustomization installs.
fn installed_objects() -> Vec<Value> {
    let dir = manifests_dir();
    let kustomization: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap())
            .unwrap();
    let mut out = Vec::new();
    for file in kustomization["resources"].as_array().unwrap() {
        let path = dir.join(file.as_str().unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.extend(docs.into_iter().filter(|d| !d.is_null()));
    }
    out
}

/// A rule, and the namespace it is limited to (None: cluster-wide).
struct Grant {
    from: String,
    namespace: Option<String>,
    rule: PolicyRule,
}

fn binds_our_account(subjects: Option<&Vec<Subject>>) -> bool {
    subjects.into_iter().flatten().any(|s| {
        s.kind == "ServiceAccount"
            && s.name == SA_NAME
            && s.namespace.as_deref() == Some(SA_NAMESPACE)
    })
}

/// The rules bound to the service account: ClusterRoles through ClusterRoleBindings
/// (cluster-wide), Roles and ClusterRoles through RoleBindings (in the binding's namespace).
fn grants(objects: &[Value]) -> Vec<Grant> {
    let of_kind = |k: &'static str| objects.iter().filter(move |o| o["kind"] == k).cloned();
    let cluster_roles: Vec<ClusterRole> = of_kind("ClusterRole")
        .map(|o| serde_json::from_value(o).unwrap())
        .collect();
    let roles: Vec<Role> = of_kind("Role")
        .map(|o| serde_json::from_value(o).unwrap())
        .collect();
    let cluster_role = |name: &str| {
        cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("ClusterRole {name} is bound but not defined"))
    };
    let mut out = Vec::new();
    for b in of_kind("ClusterRoleBinding") {
        let b: ClusterRoleBinding = serde_json::from_value(b).unwrap();
        if !binds_our_account(b.subjects.as_ref()) {
            continue;
        }
        assert_eq!(b.role_ref.kind, "ClusterRole");
        for rule in cluster_role(&b.role_ref.name)
            .rules
            .clone()
            .unwrap_or_default()
        {
            out.push(Grant {
                from: format!("ClusterRole/{}", b.role_ref.name),
                namespace: None,
                rule,
            });
        }
    }
    for b in of_kind("RoleBinding") {
        let b: RoleBinding = serde_json::from_value(b).unwrap();
        if !binds_our_account(b.subjects.as_ref()) {
            continue;
        }
        let ns = b.metadata.namespace.clone().expect("RoleBinding namespace");
        let rules = match b.role_ref.kind.as_str() {
            // Built into every cluster (the API server creates it): reading its client CAs.
            "Role" if ns == "kube-system" && b.role_ref.name == BUILT_IN_AUTHN_READER => {
                Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["configmaps".into()]),
                    resource_names: Some(vec!["extension-apiserver-authentication".into()]),
                    verbs: vec!["get".into(), "list".into(), "watch".into()],
                    ..Default::default()
                }])
            }
            "Role" => roles
                .iter()
                .find(|r| {
                    r.metadata.name.as_deref() == Some(b.role_ref.name.as_str())
                        && r.metadata.namespace.as_deref() == Some(ns.as_str())
                })
                .unwrap_or_else(|| panic!("Role {ns}/{} not defined", b.role_ref.name))
                .rules
                .clone(),
            _ => cluster_role(&b.role_ref.name).rules.clone(),
        };
        for rule in rules.unwrap_or_default() {
            out.push(Grant {
                from: format!("{}/{} (in {ns})", b.role_ref.kind, b.role_ref.name),
                namespace: Some(ns.clone()),
                rule,
            });
        }
    }
    out
}

fn listed(list: Option<&Vec<String>>, value: &str) -> bool {
    list.into_iter().flatten().any(|x| x == "*" || x == value)
}

fn full_resource(r: &RequestRecord) -> String {
    if r.subresource.is_empty() {
        r.resource.clone()
    } else {
        format!("{}/{}", r.resource, r.subresource)
    }
}

/// The RBAC authorizer's rule match (rbac/v1 `RuleAllows`), for resource requests.
fn allows(g: &Grant, r: &RequestRecord) -> bool {
    let rule = &g.rule;
    let names = rule.resource_names.as_deref().unwrap_or_default();
    g.namespace.as_ref().is_none_or(|ns| *ns == r.namespace)
        && listed(rule.api_groups.as_ref(), &r.group)
        && listed(rule.resources.as_ref(), &full_resource(r))
        && listed(Some(&rule.verbs), &r.verb)
        // A rule with resourceNames only matches requests that name one of them (so never
        // list, watch or create).
        && (names.is_empty() || names.contains(&r.name))
}

fn denied<'a>(grants: &[Grant], requests: &'a [RequestRecord]) -> Vec<&'a RequestRecord> {
    requests
        .iter()
        .filter(|r| !grants.iter().any(|g| allows(g, r)))
        .collect()
}

/// With the hostname label every kubelet sets (the test provisioner pins volumes to it).
fn node(name: &str, cpu: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    })
}

fn pod(name: &str, cpu: &str, extra_spec: Value) -> Value {
    let mut spec = json!({
        "schedulerName": "ferrosched",
        "containers": [{"name": "c", "image": "img", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}],
    });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra_spec) {
        s.extend(e);
    }
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The scheduler config the Deployment runs with: the ConfigMap's `config.yaml`.
fn deployed_config(objects: &[Value]) -> String {
    let cm = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "ferrosched-config")
        .expect("ConfigMap ferrosched-config");
    cm["data"]["config.yaml"].as_str().unwrap().to_string()
}

/// The deployed config plus a profile running Coscheduling beside the others (at PreFilter:
/// profiles share one queue sort), as a cluster of scheduler-plugins' PodGroups adds it; then
/// the controller keeps their status.
fn with_coscheduling(config: &str) -> String {
    // `profiles` must be the last key, its items two spaces in.
    let (_, profiles) = config.split_once("\nprofiles:\n").expect("profiles");
    assert!(
        profiles
            .lines()
            .all(|l| l.is_empty() || l.starts_with("  ")),
        "{config}"
    );
    assert!(profiles.contains("\n  - schedulerName:"), "{config}");
    format!(
        "{}\n  - schedulerName: ferrosched-gangs\n    plugins:\n      preFilter:\n        enabled:\n          - name: Coscheduling\n",
        config.trim_end()
    )
}

/// Runs the scenario and returns every request the controller made.
async fn requests_of_a_representative_run(config: &str) -> Vec<RequestRecord> {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "2"));
    server.apply(
        "runtimeclasses",
        &json!({"metadata": {"name": "gvisor"}, "handler": "runsc"}),
    );
    server.apply(
        "poddisruptionbudgets",
        &json!({"metadata": {"name": "web", "namespace": "default"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    );
    server.apply(
        "pods",
        &pod("victim", "1500m", json!({"nodeName": "n1", "priority": 0})),
    );
    server.apply("pods", &pod("web", "100m", json!({})));
    // VolumeBinding's PreBind: a pod with a WaitForFirstConsumer claim matching a free
    // volume (claimRef patch) and one to provision (selected-node patch).
    server.apply(
        "storageclasses",
        &json!({"metadata": {"name": "wffc"}, "provisioner": "csi.example.com",
                "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    server.apply(
        "csinodes",
        &json!({"metadata": {"name": "n1"}, "spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": 10}}]}}),
    );
    server.apply(
        "persistentvolumes",
        &json!({"metadata": {"name": "free"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": "wffc",
                         "csi": {"driver": "csi.example.com", "volumeHandle": "free"}},
                "status": {"phase": "Available"}}),
    );
    for c in ["existing", "fresh"] {
        server.apply(
            "persistentvolumeclaims",
            &json!({"metadata": {"name": c, "namespace": "default"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "wffc",
                             "resources": {"requests": {"storage": "1Gi"}}}}),
        );
    }
    server.apply(
        "pods",
        &pod(
            "db",
            "50m",
            json!({"volumes": [
                {"name": "a", "persistentVolumeClaim": {"claimName": "existing"}},
                {"name": "b", "persistentVolumeClaim": {"claimName": "fresh"}}]}),
        ),
    );
    server.apply("pods", &pod("urgent", "1", json!({"priority": 1000})));
    // DynamicResources' PreBind: a claim allocated from a node-local slice (finalizer
    // patch, then the status patch with allocation and reservedFor).
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    );
    server.apply(
        "resourceslices",
        &json!({"metadata": {"name": "n1-gpus"},
                "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                         "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-0"}]}}),
    );
    server.apply(
        "resourceclaims",
        &json!({"metadata": {"name": "gpu", "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}),
    );
    server.apply(
        "pods",
        &pod(
            "trainer",
            "10m",
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]}),
        ),
    );
    // Workloads whose selectors feed PodTopologySpread's default constraints.
    let web = json!({"app": "web"});
    server.apply(
        "services",
        &json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": web}}),
    );
    server.apply(
        "replicationcontrollers",
        &json!({"metadata": {"name": "legacy", "namespace": "default"},
                "spec": {"selector": {"app": "legacy"}}}),
    );
    server.apply(
        "replicasets",
        &json!({"metadata": {"name": "web-1", "namespace": "default"},
                "spec": {"selector": {"matchLabels": web}}}),
    );
    server.apply(
        "statefulsets",
        &json!({"metadata": {"name": "db", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "db"}}, "serviceName": "db",
                         "template": {}}}),
    );
    server.apply(
        "pods",
        &pod(
            "huge",
            "8",
            json!({"schedulerName": "ferrosched-bin-packing"}),
        ),
    );

    let loaded = scheduler_core::config::load_str(config, "configmap.yaml").unwrap();
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    // The secure port reviews tokens with the controller's own client (as
    // --authentication-kubeconfig/--authorization-kubeconfig default to its account).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let health = listener.local_addr().unwrap();
    let auth = controller::auth::DelegatedAuth::new(
        Some(client.clone()),
        Some(client.clone()),
        controller::auth::DEFAULT_ALWAYS_ALLOW_PATHS
            .map(String::from)
            .to_vec(),
    );
    // `ferrosched run` reads the client CAs once at start (the ConfigMap may be absent).
    controller::auth::lookup_in_cluster(&client).await.unwrap();
    let task = tokio::spawn(controller::run(controller::RunOptions {
        instance_id: "rbac-test".into(),
        health: Some(listener),
        // Every optional watch on, so the manifests' grants for it are checked too.
        composite_pod_groups: true,
        health_auth: Some(std::sync::Arc::new(auth)),
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    // A scrape with a token: one TokenReview and one SubjectAccessReview.
    server.add_token("scraper", "prometheus", &[]);
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(health).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nAuthorization: Bearer scraper\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(
            out.starts_with("HTTP/1.0 403"),
            "no grant for prometheus: {out}"
        );
    }

    // Volume binding, completed by the test's PV controller.
    wait_for("db bound", || {
        support::pv_controller::reconcile(&server);
        server.node_of("default", "db").is_some()
    })
    .await;
    wait_for("trainer bound with its device", || {
        server.node_of("default", "trainer").is_some()
    })
    .await;
    // Binding, preemption (status patch of the preemptor, victim deleted, events).
    wait_for("web and urgent bound", || {
        server.node_of("default", "web").is_some() && server.node_of("default", "urgent").is_some()
    })
    .await;
    assert!(server.get("pods", "default", "victim").is_none());
    // Unschedulable: FailedScheduling event and PodScheduled=False.
    wait_for("huge reported unschedulable", || {
        server
            .events_for("default", "huge")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling")
    })
    .await;
    // A cluster event retries huge; the repeated FailedScheduling patches the event series.
    // The event must be one NodeResourcesFit's hint queues huge for (a node whose allocatable
    // fits its 8 CPUs) and the retry must fail again, so the node is cordoned. (Other events
    // of the run retried huge only when they happened to come after its first attempt.)
    server.apply("nodes", &node("n2", "1"));
    let mut cordoned = node("n3", "16");
    cordoned["spec"] = json!({"unschedulable": true});
    server.apply("nodes", &cordoned);
    wait_for("an event series patch", || {
        server
            .requests()
            .iter()
            .any(|r| r.verb == "patch" && r.resource == "events")
    })
    .await;
    // DRA-backed extended resources: the claim is created; the first binding fails (every
    // retry), so it is deleted again, then created anew for the next attempt.
    server.apply(
        "deviceclasses",
        &json!({"metadata": {"name": "gpu"},
                "spec": {"extendedResourceName": "example.com/gpu",
                         "selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    );
    server.apply(
        "resourceslices",
        &json!({"metadata": {"name": "n2-gpus"},
                "spec": {"driver": "gpu.example.com", "nodeName": "n2",
                         "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
                         "devices": [{"name": "gpu-0"}]}}),
    );
    server.fail_next_bindings(5);
    let mut ext = pod("ext", "10m", json!({}));
    ext["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("1");
    server.apply("pods", &ext);
    wait_for(
        "ext bound after its claim was deleted and created again",
        || server.node_of("default", "ext").is_some(),
    )
    .await;
    // A gang: its PodGroup gets the scheduler's condition (podgroups/status patch).
    server.apply(
        "podgroups",
        &json!({"metadata": {"name": "pair", "namespace": "default"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}),
    );
    for name in ["pair-0", "pair-1"] {
        server.apply(
            "pods",
            &pod(
                name,
                "10m",
                json!({"schedulingGroup": {"podGroupName": "pair"}}),
            ),
        );
    }
    wait_for("the gang bound and its group marked", || {
        server.node_of("default", "pair-1").is_some()
            && server
                .requests()
                .iter()
                .any(|r| r.verb == "patch" && r.resource == "podgroups")
    })
    .await;
    // scheduler-plugins' PodGroup: the controller keeps its status (pods listed by label,
    // podgroups/status patched).
    server.apply(
        fake_apiserver::COSCHEDULING_POD_GROUPS,
        &json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": "tf", "namespace": "default"}, "spec": {"minMember": 1}}),
    );
    let mut tf = pod("tf-0", "10m", json!({"schedulerName": "ferrosched-gangs"}));
    tf["metadata"]["labels"] = json!({"scheduling.x-k8s.io/pod-group": "tf"});
    server.apply("pods", &tf);
    wait_for("the Coscheduling group's status written", || {
        server.requests().iter().any(|r| {
            r.verb == "patch" && r.group == "scheduling.x-k8s.io" && r.resource == "podgroups"
        })
    })
    .await;
    // Clean shutdown releases the lease (update).
    let _ = tx.send(());
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("controller stops")
        .expect("task")
        .expect("clean exit");
    server.requests()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_the_controller_makes_is_allowed_and_every_grant_is_used() {
    let objects = installed_objects();
    let grants = grants(&objects);
    assert!(
        !grants.is_empty(),
        "nothing is bound to {SA_NAMESPACE}/{SA_NAME}"
    );
    let config = with_coscheduling(&deployed_config(&objects));
    let requests = requests_of_a_representative_run(&config).await;

    // Discovery of a group version (`GET /apis/resource.k8s.io/v1`, logged with an empty
    // resource) is a non-resource URL every authenticated user may read (upstream's
    // system:discovery role), so it needs no grant; check that it happened, then drop it.
    assert!(
        requests
            .iter()
            .any(|r| r.group == "resource.k8s.io" && r.resource.is_empty()),
        "the controller never asked whether resource.k8s.io/v1 is served"
    );
    let requests: Vec<RequestRecord> = requests
        .into_iter()
        .filter(|r| !r.resource.is_empty())
        .collect();
    let mut distinct = requests.clone();
    distinct.sort();
    distinct.dedup();
    let listing = distinct
        .iter()
        .map(|r| format!("  {r}"))
        .collect::<Vec<_>>()
        .join("\n");
    println!("requests made by the controller:\n{listing}");

    // The scenario really is representative: each kind of call the controller has.
    for (verb, group, resource) in [
        ("list", "", "pods"),
        ("watch", "", "pods"),
        ("watch", "", "nodes"),
        ("watch", "", "namespaces"),
        ("watch", "node.k8s.io", "runtimeclasses"),
        ("watch", "policy", "poddisruptionbudgets"),
        ("watch", "", "persistentvolumeclaims"),
        ("watch", "", "persistentvolumes"),
        ("watch", "storage.k8s.io", "storageclasses"),
        ("watch", "storage.k8s.io", "csinodes"),
        ("watch", "", "services"),
        ("watch", "", "replicationcontrollers"),
        ("watch", "apps", "replicasets"),
        ("watch", "apps", "statefulsets"),
        ("watch", "storage.k8s.io", "csidrivers"),
        ("watch", "storage.k8s.io", "csistoragecapacities"),
        ("watch", "storage.k8s.io", "volumeattachments"),
        ("list", "resource.k8s.io", "resourceclaims"),
        ("watch", "resource.k8s.io", "resourceclaims"),
        ("patch", "resource.k8s.io", "resourceclaims"),
        ("patch", "resource.k8s.io", "resourceclaims/status"),
        ("create", "resource.k8s.io", "resourceclaims"),
        ("delete", "resource.k8s.io", "resourceclaims"),
        ("list", "resource.k8s.io", "resourceslices"),
        ("watch", "resource.k8s.io", "resourceslices"),
        ("list", "resource.k8s.io", "deviceclasses"),
        ("watch", "resource.k8s.io", "deviceclasses"),
        ("list", "resource.k8s.io", "devicetaintrules"),
        ("watch", "resource.k8s.io", "devicetaintrules"),
        ("list", "scheduling.k8s.io", "podgroups"),
        ("watch", "scheduling.k8s.io", "podgroups"),
        ("list", "scheduling.x-k8s.io", "podgroups"),
        ("watch", "scheduling.x-k8s.io", "podgroups"),
        ("patch", "scheduling.k8s.io", "podgroups/status"),
        ("list", "scheduling.k8s.io", "compositepodgroups"),
        ("watch", "scheduling.k8s.io", "compositepodgroups"),
        ("patch", "scheduling.x-k8s.io", "podgroups/status"),
        ("create", "", "pods/binding"),
        ("patch", "", "persistentvolumes"),
        ("patch", "", "persistentvolumeclaims"),
        ("patch", "", "pods/status"),
        ("delete", "", "pods"),
        ("create", "events.k8s.io", "events"),
        ("patch", "events.k8s.io", "events"),
        ("get", "coordination.k8s.io", "leases"),
        ("create", "coordination.k8s.io", "leases"),
        ("update", "coordination.k8s.io", "leases"),
        ("create", "authentication.k8s.io", "tokenreviews"),
        ("create", "authorization.k8s.io", "subjectaccessreviews"),
        ("get", "", "configmaps"),
    ] {
        assert!(
            distinct
                .iter()
                .any(|r| r.verb == verb && r.group == group && full_resource(r) == resource),
            "the scenario never made a `{verb} {group} {resource}` request:\n{listing}"
        );
    }

    let uncovered = denied(&grants, &distinct);
    assert!(
        uncovered.is_empty(),
        "requests not allowed by manifests/ for {SA_NAMESPACE}/{SA_NAME}:\n{}",
        uncovered
            .iter()
            .map(|r| format!("  {r}"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Exactly what is used: every (group, resource, verb, name) a rule grants was needed.
    let mut unused = Vec::new();
    for g in grants.iter().filter(|g| {
        !g.from
            .starts_with(&format!("Role/{BUILT_IN_AUTHN_READER} "))
    }) {
        let rule = &g.rule;
        let names = rule.resource_names.clone().unwrap_or_default();
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    let used = distinct.iter().any(|r| {
                        r.group == *group
                            && full_resource(r) == *resource
                            && r.verb == *verb
                            && allows(g, r)
                    });
                    if !used {
                        unused.push(format!(
                            "  {} grants {verb} {group:?} {resource} {names:?}",
                            g.from
                        ));
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "granted but never used (remove, or extend the scenario):\n{}",
        unused.join("\n")
    );
}

/// The matcher itself: what the manifests must NOT allow.
#[test]
fn the_rule_matcher_denies_what_the_manifests_do_not_grant() {
    let grants = grants(&installed_objects());
    let req =
        |verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str| RequestRecord {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        };
    let allowed = [
        req("create", "", "pods", "binding", "default", "p"),
        req(
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            "ferrosched",
        ),
        req(
            "create",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            "",
        ),
    ];
    for r in &allowed {
        assert!(denied(&grants, std::slice::from_ref(r)).is_empty(), "{r}");
    }
    let forbidden = [
        // kube-scheduler's lease: running beside it, ferrosched must not take it.
        req(
            "get",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            "kube-scheduler",
        ),
        req(
            "update",
            "coordination.k8s.io",
            "leases",
            "",
            "kube-system",
            "kube-scheduler",
        ),
        // Our lease name, but in another namespace.
        req(
            "update",
            "coordination.k8s.io",
            "leases",
            "",
            "default",
            "ferrosched",
        ),
        req("create", "coordination.k8s.io", "leases", "", "default", ""),
        // Subresources are not the resource.
        req("create", "", "pods", "eviction", "default", "p"),
        req("update", "", "pods", "status", "default", "p"),
        req("create", "", "pods", "", "default", ""),
        req("get", "", "secrets", "", "default", "s"),
        req("create", "", "events", "", "default", ""),
        req("delete", "", "nodes", "", "", "n1"),
    ];
    for r in &forbidden {
        assert_eq!(denied(&grants, std::slice::from_ref(r)).len(), 1, "{r}");
    }
}
