//! The harness's own guarantees, on the fake server: cleanup on success and on failure,
//! run ids, target selection. A module of the scenarios binary, not a test target of its
//! own: one test binary less to build in CI.

use ferrosched_e2e::{Env, Target, run_id};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::node::v1::RuntimeClass;
use serde_json::{Value, json};

/// Creates one object of every kind cleanup handles.
async fn populate(env: &Env) {
    env.create_node(env.node("n")).await;
    env.create_priority_class("p", 5).await;
    env.create_wffc_storage_class("s").await;
    env.create_cluster::<RuntimeClass>(
        json!({"metadata": {"name": env.name("r")}, "handler": "h"}),
    )
    .await;
    env.create::<PersistentVolumeClaim>(json!({
        "metadata": {"name": "c"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .await;
    env.create_pod(env.pod("p")).await;
}

fn leftovers(server: &fake_apiserver::FakeApiServer) -> Vec<Value> {
    [
        "pods",
        "persistentvolumeclaims",
        "namespaces",
        "nodes",
        "persistentvolumes",
        "storageclasses",
        "priorityclasses",
        "runtimeclasses",
    ]
    .iter()
    .flat_map(|c| server.list(c))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_deletes_everything_the_run_created() {
    let env = Env::on(Target::Fake, "finish").await;
    populate(&env).await;
    let server = env.fake_server().unwrap();
    assert_eq!(leftovers(&server).len(), 7);
    env.finish().await;
    assert_eq!(leftovers(&server), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_scenario_is_cleaned_up_on_drop() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let scenario = tokio::spawn(async move {
        let mut env = Env::on(Target::Fake, "panics").await;
        let _ = tx.send(env.fake_server().unwrap());
        env.start_default_scheduler().await;
        populate(&env).await;
        panic!("the scenario failed");
    });
    assert!(scenario.await.unwrap_err().is_panic());
    let server = rx.await.unwrap();
    assert_eq!(leftovers(&server), Vec::<Value>::new());
}

#[test]
fn only_an_explicit_cluster_selects_the_cluster() {
    assert_eq!(Target::parse(None), Ok(Target::Fake));
    assert_eq!(Target::parse(Some("")), Ok(Target::Fake));
    assert_eq!(Target::parse(Some("fake")), Ok(Target::Fake));
    assert_eq!(Target::parse(Some("cluster")), Ok(Target::Cluster));
    assert!(Target::parse(Some("1")).is_err());
}

#[test]
fn run_ids_differ() {
    let ids: std::collections::BTreeSet<String> = (0..100).map(|_| run_id()).collect();
    assert_eq!(ids.len(), 100);
}

/// The harness's kubelet finishes graceful deletions. The fake server deletes at once, so
/// the pod is created already terminating (it keeps metadata as sent), as a cluster shows a
/// preemption victim on a node without a kubelet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kwok_force_deletes_terminating_pods() {
    let env = Env::on(Target::Fake, "kwok").await;
    let node = env.create_node(env.node("n")).await;
    env.create_pod(env.pod("running").on_node(&node)).await;
    env.create_pod(
        env.pod("terminating")
            .on_node(&node)
            .merge(json!({"metadata": {"deletionTimestamp": ferrosched_e2e::now()}})),
    )
    .await;
    env.eventually("the terminating pod force-deleted", || async {
        match env.pod_opt("terminating").await {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
    assert!(env.pod_opt("running").await.is_some());
    env.finish().await;
}
