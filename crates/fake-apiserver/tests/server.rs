//! The fake API server answers as a real one would for what ferrosched uses; these tests
//! talk to it through kube's client, as the controller does.

use fake_apiserver::FakeApiServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

async fn client(server: &FakeApiServer) -> Client {
    let kc = Kubeconfig::read_from(server.kubeconfig()).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn pod(ns: &str, name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap()
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn create_conflicts_on_a_taken_name_and_generates_names() {
    let server = FakeApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server).await, "a");
    let created = pods
        .create(&PostParams::default(), &pod("a", "p", json!({})))
        .await
        .unwrap();
    // Status sent on create is dropped, as the API server does for pods.
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    assert!(created.metadata.uid.is_some());
    let again = pods
        .create(&PostParams::default(), &pod("a", "p", json!({})))
        .await
        .unwrap_err();
    assert_eq!(code(again), 409);

    let mut generated = pod("a", "", json!({}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let g = pods
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = g.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() > 4, "{name}");
}

#[tokio::test]
async fn lists_filter_by_namespace_and_labels_and_delete_collection_removes_only_matches() {
    let server = FakeApiServer::start().await;
    let c = client(&server).await;
    for (ns, name, run) in [("a", "p1", "x"), ("a", "p2", "y"), ("b", "p3", "x")] {
        Api::<Pod>::namespaced(c.clone(), ns)
            .create(&PostParams::default(), &pod(ns, name, json!({"run": run})))
            .await
            .unwrap();
    }
    let in_a = Api::<Pod>::namespaced(c.clone(), "a")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(in_a.items.len(), 2);
    let all: Api<Pod> = Api::all(c.clone());
    let run_x = all
        .list(&ListParams::default().labels("run=x"))
        .await
        .unwrap();
    let mut names: Vec<_> = run_x
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["p1", "p3"]);
    let not_x = all
        .list(&ListParams::default().labels("run!=x"))
        .await
        .unwrap();
    assert_eq!(not_x.items.len(), 1);

    Api::<Pod>::namespaced(c.clone(), "a")
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("run=x"),
        )
        .await
        .unwrap();
    let left: Vec<_> = server
        .list("pods")
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(left, ["p2", "p3"], "only a/p1 matched");
}

#[tokio::test]
async fn replace_and_patch_refuse_a_stale_resource_version() {
    let server = FakeApiServer::start().await;
    let nodes: Api<Node> = Api::all(client(&server).await);
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4"}},
    }))
    .unwrap();
    let created = nodes.create(&PostParams::default(), &node).await.unwrap();
    // Nodes keep the status they are created with (kwok-style fake nodes rely on it).
    assert!(
        created
            .status
            .unwrap()
            .allocatable
            .unwrap()
            .contains_key("cpu")
    );
    let stale = created.metadata.resource_version.clone();

    let mut changed = nodes.get("n1").await.unwrap();
    changed.metadata.labels = Some([("a".to_string(), "1".to_string())].into());
    nodes
        .replace("n1", &PostParams::default(), &changed)
        .await
        .unwrap();
    // The same (now stale) object again: 409.
    let err = nodes
        .replace("n1", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);

    let patch = json!({"metadata": {"resourceVersion": stale, "labels": {"b": "2"}}});
    let err = nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);
    let patched = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"b": "2"}}})),
        )
        .await
        .unwrap();
    let labels = patched.metadata.labels.unwrap();
    assert_eq!(labels.get("a").map(String::as_str), Some("1"));
    assert_eq!(labels.get("b").map(String::as_str), Some("2"));
}

#[tokio::test]
async fn watches_replay_after_a_resource_version_and_send_a_bookmark() {
    // kube's WatchParams ask for bookmarks by default.
    assert!(WatchParams::default().bookmarks);
    let server = FakeApiServer::start().await;
    let c = client(&server).await;
    let namespaces: Api<Namespace> = Api::all(c);
    let ns = |n: &str| -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": n}})).unwrap()
    };
    let first = namespaces
        .create(&PostParams::default(), &ns("one"))
        .await
        .unwrap();
    namespaces
        .create(&PostParams::default(), &ns("two"))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.unwrap();
    let mut stream = namespaces
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Added(n) => assert_eq!(n.metadata.name.as_deref(), Some("two")),
        other => panic!("expected ADDED two, got {other:?}"),
    }
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Bookmark(b) => assert!(!b.metadata.resource_version.is_empty()),
        other => panic!("expected a BOOKMARK, got {other:?}"),
    }
    server.delete("namespaces", "", "one");
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Deleted(n) => assert_eq!(n.metadata.name.as_deref(), Some("one")),
        other => panic!("expected DELETED one, got {other:?}"),
    }
}

#[tokio::test]
async fn a_disabled_resource_is_not_found_and_bindings_conflict_once_bound() {
    let server = FakeApiServer::start().await;
    let c = client(&server).await;
    server.disable("nodes");
    let err = Api::<Node>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap_err();
    // As kube-apiserver for an API it does not serve: plain text, no Status, so kube makes
    // up a reason and only the code tells "not served".
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.message.trim(), "404 page not found");
            assert!(!s.is_not_found(), "kube's is_not_found cannot tell: {s:?}");
        }
        other => panic!("expected an API error, got {other}"),
    }

    let pods: Api<Pod> = Api::namespaced(c, "a");
    pods.create(&PostParams::default(), &pod("a", "p", json!({})))
        .await
        .unwrap();
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p", "namespace": "a"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    });
    let bind = || async {
        pods.create_subresource::<_, serde_json::Value>(
            "binding",
            "p",
            &PostParams::default(),
            &binding,
        )
        .await
    };
    // Someone (an autoscaler) nominated the pod elsewhere; binding clears it, as
    // kube-apiserver does since 1.35.
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"nominatedNodeName": "n2"}})),
    )
    .await
    .unwrap();
    // An earlier attempt failed: the scheduler wrote its reason and message.
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Strategic(json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient cpu.",
        }]}})),
    )
    .await
    .unwrap();
    bind().await.unwrap();
    assert_eq!(server.node_of("a", "p").as_deref(), Some("n1"));
    let bound = server.get("pods", "a", "p").unwrap();
    assert!(
        bound["status"].get("nominatedNodeName").is_none(),
        "{bound}"
    );
    // The binding's condition replaces the failure whole: no stale reason or message.
    let scheduled: Vec<_> = bound["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "PodScheduled")
        .collect();
    assert_eq!(scheduled.len(), 1, "{bound}");
    assert_eq!(scheduled[0]["status"], "True");
    assert!(scheduled[0].get("reason").is_none(), "{bound}");
    assert!(scheduled[0].get("message").is_none(), "{bound}");
    assert_eq!(code(bind().await.unwrap_err()), 409);
}

#[tokio::test]
async fn subject_access_reviews_answer_from_the_grants() {
    use fake_apiserver::Grant;
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let server = FakeApiServer::start().await;
    // A RoleBinding-like grant to a group, in one namespace, on one object.
    server.grant(Grant {
        subject: "system:serviceaccounts:team".into(),
        namespace: Some("team".into()),
        verb: "use".into(),
        group: "scheduling.ferrosched.io".into(),
        resource: "schedulingpolicies".into(),
        name: Some("gpu".into()),
    });
    let api: Api<SubjectAccessReview> = Api::all(client(&server).await);
    let ask = |ns: &str, name: &str| SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{ns}:default")),
            groups: Some(vec![format!("system:serviceaccounts:{ns}")]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.into()),
                verb: Some("use".into()),
                group: Some("scheduling.ferrosched.io".into()),
                resource: Some("schedulingpolicies".into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    for (ns, name, allowed) in [
        ("team", "gpu", true),
        ("team", "other", false),
        ("dev", "gpu", false),
    ] {
        let r = api
            .create(&PostParams::default(), &ask(ns, name))
            .await
            .unwrap();
        assert_eq!(r.status.unwrap().allowed, allowed, "{ns} {name}");
    }
}

#[tokio::test]
async fn lists_come_in_pages_that_report_the_first_pages_resource_version() {
    let server = FakeApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server).await, "a");
    for i in 0..5 {
        pods.create(
            &PostParams::default(),
            &pod("a", &format!("p{i}"), json!({})),
        )
        .await
        .unwrap();
    }
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut versions = Vec::new();
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().limit(2);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = pods.list(&lp).await.unwrap();
        pages += 1;
        names.extend(page.items.iter().filter_map(|p| p.metadata.name.clone()));
        versions.push(page.metadata.resource_version.clone().unwrap());
        if pages == 1 {
            // A write between pages: later pages still report the first page's version.
            server.delete("pods", "a", "p0");
        }
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    assert_eq!(pages, 3);
    assert!(versions.iter().all(|v| *v == versions[0]), "{versions:?}");
    assert_eq!(server.list_count("pods"), 1, "one list, three pages");
}

/// As kube-apiserver's watch cache: a list at resourceVersion 0 ignores `limit` and comes
/// whole, with no continue token; a list at the latest version ("") is paged. (kube's own
/// ListParams never sends both, so the requests are written out.)
#[tokio::test]
async fn a_list_at_resource_version_zero_ignores_limit() {
    let server = FakeApiServer::start().await;
    let client = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "a");
    for i in 0..5 {
        pods.create(
            &PostParams::default(),
            &pod("a", &format!("p{i}"), json!({})),
        )
        .await
        .unwrap();
    }
    let list = |query: &'static str| {
        let client = client.clone();
        async move {
            let req = axum::http::Request::get(format!("/api/v1/namespaces/a/pods?{query}"))
                .body(Vec::new())
                .unwrap();
            let text = client.request_text(req).await.unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let items = v["items"].as_array().unwrap().len();
            let cont = v["metadata"]["continue"].as_str().unwrap_or("").to_string();
            (items, cont)
        }
    };
    let (items, cont) = list("limit=2&resourceVersion=0").await;
    assert_eq!((items, cont.as_str()), (5, ""));
    let (items, cont) = list("limit=2").await;
    assert_eq!(items, 2);
    assert!(!cont.is_empty());
}

/// Every write records its field manager in `metadata.managedFields`, as a real server
/// does, so clients decode (or skip) entries of realistic size on every object and event.
#[tokio::test]
async fn writes_record_managed_fields_per_manager_and_subresource() {
    let server = FakeApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server).await, "a");
    let created = pods
        .create(
            &PostParams {
                field_manager: Some("bench".into()),
                ..Default::default()
            },
            &pod("a", "p", json!({"app": "web"})),
        )
        .await
        .unwrap();
    let entries = created.metadata.managed_fields.clone().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].manager.as_deref(), Some("bench"));
    assert_eq!(entries[0].operation.as_deref(), Some("Update"));
    let fields = &entries[0].fields_v1.as_ref().unwrap().0;
    assert_eq!(fields["f:metadata"]["f:labels"]["f:app"], json!({}));
    assert!(fields["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:image"].is_object());

    let patch = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}});
    let patched = pods
        .patch_status(
            "p",
            &PatchParams {
                field_manager: Some("ferrosched".into()),
                ..Default::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let entries = patched.metadata.managed_fields.unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].manager.as_deref(), Some("ferrosched"));
    assert_eq!(entries[1].subresource.as_deref(), Some("status"));
    // The watch carries them too.
    let listed = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed.items[0]
            .metadata
            .managed_fields
            .as_ref()
            .map(Vec::len),
        Some(2)
    );
}

#[tokio::test]
async fn https_serves_http1_clients_too_and_watches_work_over_it() {
    // kube's own client speaks HTTP/1.1 only: ALPN settles on it, as kube-apiserver's would.
    let server = FakeApiServer::start_tls().await;
    let c = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(c, "default");
    pods.create(&PostParams::default(), &pod("default", "a", json!({})))
        .await
        .unwrap();
    let list = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.unwrap();
    let mut events = pods
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &pod("default", "b", json!({})))
        .await
        .unwrap();
    loop {
        match events.next().await {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            Some(Ok(WatchEvent::Added(p))) => {
                assert_eq!(p.metadata.name.as_deref(), Some("b"));
                break;
            }
            other => panic!("expected the second pod's ADDED event, got {other:?}"),
        }
    }
    let versions = server.http_versions();
    assert_eq!(
        versions.keys().collect::<Vec<_>>(),
        ["HTTP/1.1"],
        "{versions:?}"
    );
    assert!(server.connections() >= 1);
}

/// scheduler-plugins' PodGroup CRD: its status subresource takes the fields its controller
/// writes (merge patch; `null` drops one), and nothing outside `status`.
#[tokio::test]
async fn coscheduling_pod_group_status_takes_scheduler_plugins_fields() {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    let server = FakeApiServer::start().await;
    let client = client(&server).await;
    let gvk = GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "podgroups");
    let groups: Api<DynamicObject> = Api::namespaced_with(client, "ml", &ar);
    let mut pg = DynamicObject::new("tf", &ar).within("ml");
    pg.data = json!({"spec": {"minMember": 2}});
    groups.create(&PostParams::default(), &pg).await.unwrap();

    let patch = json!({
        "spec": {"minMember": 9},
        "status": {"phase": "Running", "occupiedBy": "ml/tf-job", "running": 2,
                   "succeeded": 1, "failed": 1, "scheduleStartTime": "2026-01-02T03:04:05Z"}
    });
    let pp = PatchParams::default();
    let got = groups
        .patch_status("tf", &pp, &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(got.data["status"], patch["status"]);
    assert_eq!(got.data["spec"]["minMember"], 2, "only status changes");

    let patch = json!({"status": {"phase": "Finished", "running": null, "succeeded": 3}});
    groups
        .patch_status("tf", &pp, &Patch::Merge(&patch))
        .await
        .unwrap();
    let got = groups.get("tf").await.unwrap();
    assert_eq!(
        got.data["status"],
        json!({"phase": "Finished", "occupiedBy": "ml/tf-job", "succeeded": 3, "failed": 1,
               "scheduleStartTime": "2026-01-02T03:04:05Z"})
    );
}

#[tokio::test]
async fn answers_version_and_discovery_leaves_out_a_disabled_api() {
    let server = FakeApiServer::start().await;
    let c = client(&server).await;
    let v = c.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "37"));
    assert_eq!(v.git_version, fake_apiserver::VERSION);
    let served = |c: Client| async move {
        c.list_api_group_resources("scheduling.k8s.io/v1beta1")
            .await
            .map(|l| l.resources.iter().any(|r| r.name == "podgroups"))
    };
    assert!(served(c.clone()).await.unwrap());
    // Without PodGroups the group version serves nothing: 404, as on a server without it.
    server.disable("podgroups");
    let err = served(c).await.unwrap_err();
    assert_eq!(code(err), 404);
}
