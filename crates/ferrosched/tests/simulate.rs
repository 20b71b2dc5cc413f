//! `ferrosched simulate` as a user runs it: explanations per pod as a table, JSON and YAML,
//! and the errors a user can hit.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");

fn simulate(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("simulate")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

const NODES: [&str; 15] = [
    "cpu-1", "cpu-2", "cpu-3", "cpu-4", "cpu-5", "cpu-6", "cpu-7", "cpu-8", "cpu-9", "gpu-1",
    "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6",
];

#[test]
fn explain_table_of_an_unschedulable_pod_shows_every_node_and_what_would_change() {
    let out = stdout(&simulate(&["--explain", "ml/train-huge"]));
    assert!(
        out.starts_with("ml/train-huge (profile default-scheduler): unschedulable\n"),
        "{out}"
    );
    for node in NODES {
        let row = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no row for {node}:\n{out}"));
        let reason = if node.starts_with("gpu") {
            "Insufficient nvidia.com/gpu"
        } else {
            "node(s)"
        };
        assert!(row.contains(reason), "{row}");
    }
    assert!(out.contains("What would change it:"), "{out}");
    assert!(
        out.contains(
            "NodeResourcesFit: the pod asks for more nvidia.com/gpu than 6 nodes have allocatable in total"
        ),
        "{out}"
    );
    assert!(out.contains("Preemption: no node found."), "{out}");
}

#[test]
fn explain_table_of_a_placed_pod_shows_the_scores() {
    let out = stdout(&simulate(&["--explain", "default/web-1"]));
    let header = out
        .lines()
        .find(|l| l.trim_start().starts_with("NODE "))
        .unwrap();
    assert!(header.contains("NodeResourcesFit(x1)"), "{header}");
    assert!(header.ends_with("TOTAL"), "{header}");
    let chosen = out
        .lines()
        .find_map(|l| l.strip_prefix("Chosen: "))
        .unwrap_or_else(|| panic!("no Chosen line:\n{out}"));
    let node = chosen.split_whitespace().next().unwrap();
    assert!(
        out.starts_with(&format!(
            "default/web-1 (profile default-scheduler): scheduled on {node}\n"
        )),
        "{out}"
    );
    // The chosen node's row ends with its total, and the Chosen line repeats it.
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{node} ")))
        .unwrap();
    let total = row.split_whitespace().last().unwrap();
    assert!(
        chosen.contains(&format!("(total {total})")),
        "{chosen} / {row}"
    );
}

#[test]
fn explain_json_carries_the_full_explanation() {
    let out = stdout(&simulate(&["--explain", "ml/train-huge", "-o", "json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "ferrosched.io/explain/v1");
    assert_eq!(v["pod"], "ml/train-huge");
    assert_eq!(v["outcome"], "unschedulable");
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 15);
    for n in nodes {
        assert_eq!(n["verdict"], "rejected", "{n}");
        assert!(n["plugin"].is_string() && n["reasons"].is_array(), "{n}");
    }
    assert!(!v["hints"].as_array().unwrap().is_empty());
    assert_eq!(v["preemption"]["nodes"].as_array().unwrap().len(), 15);

    let out = stdout(&simulate(&["--explain", "default/web-1", "-o", "json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let scores = v["scores"].as_array().unwrap();
    assert!(!scores.is_empty());
    for s in scores {
        let sum: i64 = s["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                assert_eq!(
                    p["weighted"].as_i64().unwrap(),
                    p["normalized"].as_i64().unwrap() * p["weight"].as_i64().unwrap()
                );
                p["weighted"].as_i64().unwrap()
            })
            .sum();
        assert_eq!(sum, s["total"].as_i64().unwrap(), "{s}");
    }
    assert_eq!(v["selection"]["chosen"], v["node"]);
}

#[test]
fn explain_yaml_and_every_pod() {
    let out = stdout(&simulate(&["--explain", "default/web-1", "-o", "yaml"]));
    assert!(
        out.starts_with("schema: ferrosched.io/explain/v1\n"),
        "{out}"
    );
    // Without a pod: the report, each attempted pod with its explanation.
    let out = stdout(&simulate(&["--explain", "-o", "json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let outcomes = v["outcomes"].as_array().unwrap();
    let explained = outcomes
        .iter()
        .filter(|o| o["explanation"].is_object())
        .count();
    // Gated and ignored pods never reach a cycle.
    assert_eq!(explained, outcomes.len() - 2);
    let table = stdout(&simulate(&["--explain"]));
    assert!(table.contains("ml/train-huge (profile default-scheduler): unschedulable"));
    assert!(table.contains("batch/batch-1 (profile bin-packing): scheduled on"));
}

#[test]
fn explain_names_pods_it_cannot_explain() {
    let o = simulate(&["--explain", "ml/nope"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("\"ml/nope\" is not a pending pod of this cluster")
            && err.contains("ml/train-huge"),
        "{err}"
    );
    let o = simulate(&["--explain", "batch/waiting-for-quota"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("batch/waiting-for-quota has no explanation: it never reached a scheduling cycle: waiting for scheduling gates"),
        "{err}"
    );
}

#[test]
fn one_dump_command_in_readme_docs_and_help() {
    let help = stdout(&simulate(&["--help"]));
    let cmd = scheduler_core::simulate::DUMP_COMMAND;
    // Help breaks the command with shell line continuations; joined, it is the same.
    let joined = help
        .replace(" \\\n", " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(joined.contains(cmd), "{help}");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    for doc in ["README.md", "docs/operations.md", "docs/plugins.md"] {
        let text = std::fs::read_to_string(format!("{root}/{doc}")).unwrap();
        let dumps: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("kubectl get nodes"))
            .collect();
        assert!(!dumps.is_empty(), "{doc} shows no dump command");
        for d in dumps {
            assert_eq!(d, cmd, "{doc}");
        }
        // PodGroups are dumped apart (only some clusters serve them): each place that shows
        // the dump command shows theirs too.
        let pod_groups = scheduler_core::simulate::POD_GROUPS_DUMP_COMMAND;
        assert!(text.contains(pod_groups), "{doc} lacks {pod_groups}");
    }
    assert!(joined.contains(scheduler_core::simulate::POD_GROUPS_DUMP_COMMAND));
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrosched-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn table_leaves_out_resources_no_node_has_and_names_what_the_dump_lacks() {
    let cluster = temp_file(
        "hugepages.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '2', memory: 4Gi, pods: '10', hugepages-1Gi: '0', hugepages-2Mi: '0', example.com/fpga: '1'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: pg-0, namespace: db}\nspec:\n  containers: [{name: c, image: i}]\n  volumes: [{name: data, persistentVolumeClaim: {claimName: data-pg-0}}]\n",
    );
    let out = stdout(&simulate(&["--cluster", cluster.to_str().unwrap()]));
    assert!(!out.contains("hugepages"), "{out}");
    assert!(out.contains("example.com/fpga 0/1"), "{out}");
    assert!(
        out.contains("missing from the dump: PersistentVolumeClaim db/data-pg-0 (dump persistentvolumeclaims)"),
        "{out}"
    );
}

#[test]
fn an_invalid_quantity_in_a_dump_is_refused_with_its_line() {
    let cluster = temp_file(
        "bad.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: d}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources:\n      requests: {cpu: 500mm}\n",
    );
    let o = simulate(&["--cluster", cluster.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "{}:9: Pod d/p: spec.containers[0].resources.requests[cpu]: Invalid value: \"500mm\"",
            cluster.display()
        )),
        "{err}"
    );
}

/// `simulate --explain` on a dump with a gang: the pod's group cycle, first in the table.
#[test]
fn explain_table_of_a_gang_member_shows_its_group_first() {
    let mut text = String::new();
    for i in 0..2 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: gpu-{i}}}\nstatus:\n  allocatable: {{cpu: '64', memory: 256Gi, pods: '110', nvidia.com/gpu: '8'}}\n"
        ));
    }
    text.push_str("---\napiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: train, namespace: ml}\nspec:\n  schedulingPolicy: {gang: {minCount: 3}}\n");
    for i in 0..3 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: train-{i}, namespace: ml}}\nspec:\n  schedulingGroup: {{podGroupName: train}}\n  containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '8'}}}}}}]\n"
        ));
    }
    let cluster = temp_file("gang.yaml", &text);
    let out = stdout(&simulate(&[
        "--cluster",
        cluster.to_str().unwrap(),
        "--explain",
        "ml/train-2",
    ]));
    assert!(
        out.starts_with(
            "Pod group ml/train (PodGroup scheduling.k8s.io/v1beta1, gang, minCount 3): unschedulable\n  minCount (3) cannot be satisfied: 2 scheduled, 0 remaining\n"
        ),
        "{out}"
    );
    let rows: Vec<String> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("ml/train-"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert!(rows[0].starts_with("ml/train-0 fitted gpu-"), "{rows:?}");
    assert!(rows[1].starts_with("ml/train-1 fitted gpu-"), "{rows:?}");
    assert_eq!(
        rows[2],
        "ml/train-2 unschedulable - 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    );
    assert_eq!(
        rows[3],
        "ml/train-2 (profile default-scheduler): unschedulable"
    );
    assert!(out.contains("What would change it:"), "{out}");
}

/// A one-verb extender on a local port, answering every filter call by keeping `keep` only
/// (whole nodes sent), on a thread with std's sockets; counts the calls.
fn filter_extender(keep: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&calls);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let counted = std::sync::Arc::clone(&counted);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; len];
                    reader.read_exact(&mut body).unwrap();
                    counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let answer = format!(
                        "{{\"Nodes\":{{\"items\":[{{\"metadata\":{{\"name\":\"{keep}\"}}}}]}},\"FailedNodes\":{{\"n1\":\"not {keep}\",\"n2\":\"not {keep}\",\"n3\":\"not {keep}\"}}}}"
                    );
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                }
            });
        }
    });
    (port, calls)
}

#[test]
fn simulate_calls_the_configs_extenders_or_leaves_them_out_when_asked() {
    let (port, calls) = filter_extender("n2");
    let config = temp_file(
        "extender-config.yaml",
        &format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nextenders:\n- urlPrefix: http://127.0.0.1:{port}\n  filterVerb: filter\n"
        ),
    );
    let mut dump = String::new();
    for n in ["n1", "n2", "n3"] {
        dump += &format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\nstatus: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '10'}}}}\n---\n"
        );
    }
    dump += "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: d}\nspec:\n  containers: [{name: c, image: i, resources: {requests: {cpu: 100m}}}]\n";
    let cluster = temp_file("extender-cluster.yaml", &dump);
    let (c, k) = (config.to_str().unwrap(), cluster.to_str().unwrap());
    let o = simulate(&["--config", c, "--cluster", k, "-o", "json"]);
    let out: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let web = out["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["pod"] == "d/web")
        .unwrap();
    assert_eq!(web["node"], "n2", "{web}");
    assert!(calls.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("calling 1 extender(s)"), "{err}");

    // Explained, the extender's rejection is each other node's verdict.
    let o = simulate(&["--config", c, "--cluster", k, "--explain", "d/web"]);
    let out = stdout(&o);
    assert!(out.contains("not n2"), "{out}");

    // Left out: the extender is not called and the note says so.
    let before = calls.load(std::sync::atomic::Ordering::Relaxed);
    let o = simulate(&["--config", c, "--cluster", k, "--ignore-extenders"]);
    stdout(&o);
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), before);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--ignore-extenders: the config's 1 extender(s) are not called"),
        "{err}"
    );
}

/// The README's what-if line: copies of the example Deployment on the built-in example.
const WEB_TEMPLATE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/web-deployment.yaml"
);

#[test]
fn pod_template_counts_copies_as_a_table_and_as_json() {
    let json: serde_json::Value = serde_json::from_str(&stdout(&simulate(&[
        "--pod-template",
        WEB_TEMPLATE,
        "-o",
        "json",
    ])))
    .unwrap();
    let placed = json["placed"].as_u64().unwrap();
    assert!(placed > 0, "{json}");
    assert_eq!(json["template"]["kind"], "Deployment");
    assert_eq!(json["template"]["name"], "web");
    assert_eq!(json["stoppedBy"]["reason"], "Unschedulable");
    let message = json["stoppedBy"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("0/15 nodes are available: "),
        "{message}"
    );
    let per_node: u64 = json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["copies"].as_u64().unwrap())
        .sum();
    assert_eq!(per_node, placed);

    let table = stdout(&simulate(&["--pod-template", WEB_TEMPLATE]));
    assert!(
        table.contains(&format!(
            "Deployment default/web (profile default-scheduler): {placed} copies fit.\n"
        )),
        "{table}"
    );
    assert!(
        table.contains(&format!("The next copy does not fit: {message}")),
        "{table}"
    );
}

#[test]
fn pod_template_max_says_the_limit_stopped_it() {
    let out = stdout(&simulate(&["--pod-template", WEB_TEMPLATE, "--max", "2"]));
    assert!(
        out.contains("Deployment default/web (profile default-scheduler): 2 copies fit (at least; --max reached).\n"),
        "{out}"
    );
    assert!(
        out.contains("Stopped by --max 2, not by a failure: more copies may fit."),
        "{out}"
    );
}

#[test]
fn a_pod_template_of_another_kind_is_refused_naming_file_field_and_fix() {
    let t = temp_file(
        "configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    let o = simulate(&["--pod-template", t.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {}:2: pod template: kind: \"ConfigMap\" is not a kind whose pods can be copied; use one of Pod, Deployment, Job, ReplicaSet, StatefulSet",
            t.display()
        )
    );
    // --max means nothing without a template; --explain and a template do not mix.
    let o = simulate(&["--max", "3"]);
    assert_eq!(o.status.code(), Some(2));
    let o = simulate(&["--pod-template", WEB_TEMPLATE, "--explain"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The consumable-capacity example: shares of one NIC until its bandwidth is used up.
const SHARED_NIC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/dra-shared-nic.yaml"
);

/// `simulate --cluster DUMP -o json`, and a lookup of one pod's outcome in it.
fn json_outcomes(dump: &str) -> (serde_json::Value, impl Fn(&str) -> serde_json::Value) {
    let out: serde_json::Value =
        serde_json::from_str(&stdout(&simulate(&["--cluster", dump, "-o", "json"]))).unwrap();
    let all = out.clone();
    let outcome = move |pod: &str| {
        all["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["pod"] == pod)
            .unwrap_or_else(|| panic!("no outcome for {pod}: {all}"))
            .clone()
    };
    (out, outcome)
}

#[test]
fn shared_nic_example_hands_out_shares_until_the_bandwidth_is_used() {
    let (out, outcome) = json_outcomes(SHARED_NIC);
    let device = |pod: &str| {
        let o = outcome(pod);
        assert_eq!(o["node"], "n1", "{o}");
        let d = &o["devices"][0];
        let id = d["shareID"]
            .as_str()
            .unwrap_or_else(|| panic!("no shareID: {d}"));
        assert_eq!(id.len(), 36, "{id}");
        (
            id.to_string(),
            format!(
                "{}:{}",
                d["device"].as_str().unwrap(),
                d["consumedCapacity"]["bandwidth"].as_str().unwrap()
            ),
        )
    };
    let (a, b, c) = (device("net/a"), device("net/b"), device("net/c"));
    assert_eq!(a.1, "nic-0:4G");
    assert_eq!(b.1, "nic-0:5G");
    assert_eq!(
        c.1, "nic-1:3G",
        "2500M rounded up to the 1G step; nic-0 has 1G left"
    );
    assert!(a.0 != b.0 && b.0 != c.0);

    // The same seed gives the same share IDs; the table shows the shares.
    let again: serde_json::Value =
        serde_json::from_str(&stdout(&simulate(&["--cluster", SHARED_NIC, "-o", "json"]))).unwrap();
    assert_eq!(out, again);
    let table = stdout(&simulate(&["--cluster", SHARED_NIC]));
    assert!(table.contains("(share: bandwidth=3G)"), "{table}");
}

/// The compatibility-groups example: MIG slices and a vGPU profile of one GPU never go
/// together.
const GPU_MODES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/dra-gpu-modes.yaml"
);

#[test]
fn gpu_modes_example_keeps_mig_and_vgpu_apart() {
    let (_, outcome) = json_outcomes(GPU_MODES);
    let device = |pod: &str| {
        let o = outcome(pod);
        assert_eq!(o["node"], "n1", "{o}");
        o["devices"][0]["device"].as_str().unwrap().to_string()
    };
    assert_eq!(device("ml/a"), "gpu-0-mig-0");
    assert_eq!(
        device("ml/c"),
        "gpu-0-mig-1",
        "a second MIG slice joins the first"
    );
    let b = outcome("ml/b");
    assert!(b["node"].is_null(), "{b}");
    let text = b.to_string();
    assert!(
        text.contains("0/1 nodes are available: 1 cannot allocate all claims."),
        "{b}"
    );
}

/// A hand-made dump for the drain: n1, n2, n3 (2 CPU each). n1 runs web-a (1 CPU) and a
/// DaemonSet pod; n2 runs web-b (1 CPU) and big (900m); n3 runs filler (1 CPU), so only
/// 1 CPU is free outside n1 and n2. web-pdb keeps both web pods.
const DRAIN_DUMP: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1, pool: old}}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2, pool: old}}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n3, labels: {kubernetes.io/hostname: n3, pool: new}}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-a, namespace: shop, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]}
  spec: {nodeName: n1, containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}
  status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: agent-n1, namespace: shop, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u2, controller: true}]}
  spec: {nodeName: n1, containers: [{name: c, image: i, resources: {requests: {cpu: 100m}}}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-b, namespace: shop, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]}
  spec: {nodeName: n2, containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}
  status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: big, namespace: shop, labels: {app: big}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: big, uid: u3, controller: true}]}
  spec: {nodeName: n2, containers: [{name: c, image: i, resources: {requests: {cpu: 900m}}}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: filler, namespace: shop, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: filler, uid: u4, controller: true}]}
  spec: {nodeName: n3, containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}
  status: {phase: Running}
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {name: web-pdb, namespace: shop}
  spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}
";

#[test]
fn drain_of_two_nodes_reports_pods_that_do_not_fit_and_the_budget_it_breaks() {
    let dump = temp_file("drain.yaml", DRAIN_DUMP);
    let dump = dump.to_str().unwrap();
    let json: serde_json::Value = serde_json::from_str(&stdout(&simulate(&[
        "--cluster",
        dump,
        "--drain",
        "n1",
        "n2",
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(json["nodes"], serde_json::json!(["n1", "n2"]));
    let result = |pod: &str| {
        json["evicted"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["pod"] == pod)
            .unwrap_or_else(|| panic!("{pod} not evicted: {json}"))
            .clone()
    };
    // web-a takes n3's free CPU; web-b and big fit nowhere.
    assert_eq!(result("shop/web-a")["result"], "scheduled");
    assert_eq!(result("shop/web-a")["node"], "n3");
    for pod in ["shop/web-b", "shop/big"] {
        let r = result(pod);
        assert_eq!(r["result"], "unschedulable", "{r}");
        let message = r["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable."
            ),
            "{message}"
        );
    }
    assert_eq!(
        (json["placed"].as_u64(), json["notPlaced"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(json["staying"][0]["pod"], "shop/agent-n1");
    assert_eq!(json["staying"][0]["reason"], "DaemonSet");
    let pdb = &json["pdbViolations"][0];
    assert_eq!(pdb["pdb"], "shop/web-pdb");
    assert_eq!(pdb["budget"], "minAvailable: 2");
    assert_eq!(pdb["disruptionsAllowed"], 0);
    assert_eq!(
        pdb["exceeding"],
        serde_json::json!(["shop/web-a", "shop/web-b"])
    );

    // The same drain by label, as a table.
    let table = stdout(&simulate(&[
        "--cluster",
        dump,
        "--drain-selector",
        "pool=old",
    ]));
    assert!(
        table.contains("Draining n1, n2: 3 pod(s) evicted, 1 placed elsewhere, 2 not placed."),
        "{table}"
    );
    assert!(
        table.contains("shop/web-pdb (minAvailable: 2; 2 expected, 2 healthy, 2 must stay: 0 disruption(s) allowed)"),
        "{table}"
    );
    assert!(
        table.contains("Not evicted: shop/agent-n1 (DaemonSet, n1)."),
        "{table}"
    );

    // A name the dump lacks is an error naming it.
    let o = simulate(&["--cluster", dump, "--drain", "n1", "n9"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim_end(),
        "error: --drain: no node named n9 in the dump; its nodes are: n1, n2, n3"
    );
    // One question per run.
    let o = simulate(&["--cluster", dump, "--drain", "n1", "--compress"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn a_pod_two_budgets_cover_is_reported_not_evictable_by_drain_and_keeps_its_node() {
    // web-a is also selected by a second budget (tier: front): the API server refuses
    // its eviction.
    let dump = DRAIN_DUMP.replace(
        "name: web-a, namespace: shop, labels: {app: web}",
        "name: web-a, namespace: shop, labels: {app: web, tier: front}",
    ) + "- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {name: front-pdb, namespace: shop}
  spec: {maxUnavailable: 1, selector: {matchLabels: {tier: front}}}
";
    let dump = temp_file("two-budgets.yaml", &dump);
    let dump = dump.to_str().unwrap();
    let json: serde_json::Value = serde_json::from_str(&stdout(&simulate(&[
        "--cluster",
        dump,
        "--drain",
        "n1",
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(json["evicted"], serde_json::json!([]), "{json}");
    let n = &json["notEvictable"][0];
    assert_eq!(n["pod"], "shop/web-a");
    assert_eq!(n["node"], "n1");
    assert_eq!(
        n["pdbs"],
        serde_json::json!(["shop/web-pdb", "shop/front-pdb"])
    );
    assert_eq!(json["pdbViolations"], serde_json::json!([]));

    let table = stdout(&simulate(&["--cluster", dump, "--drain", "n1"]));
    assert!(
        table.contains("Draining n1: 0 pod(s) evicted, 0 placed elsewhere, 0 not placed; 1 pod(s) cannot be evicted (the drain would not finish)."),
        "{table}"
    );
    assert!(
        table.contains("Cannot be evicted:\n  shop/web-a (n1): covered by 2 PodDisruptionBudgets (shop/web-pdb, shop/front-pdb)"),
        "{table}"
    );

    let out = stdout(&simulate(&["--cluster", dump, "--compress"]));
    assert!(
        out.contains("  n1: shop/web-a cannot be evicted: covered by 2 PodDisruptionBudgets (shop/web-pdb, shop/front-pdb)"),
        "{out}"
    );
}

#[test]
fn compress_names_the_node_that_cannot_go() {
    let dump = temp_file("compress.yaml", DRAIN_DUMP);
    let dump = dump.to_str().unwrap();
    let out = stdout(&simulate(&["--cluster", dump, "--compress"]));
    // n3 (50% CPU) is the emptiest, then n1 (55%), then n2 (95%); n3's filler (1 CPU)
    // finds 900m free on n1 and 100m on n2: n3 cannot go, so nothing can.
    assert!(
        out.contains("0 of 3 candidate node(s) can be removed.\n"),
        "{out}"
    );
    assert!(
        out.contains("n3     50%      0%\nn1     55%      0%\nn2     95%      0%\n"),
        "{out}"
    );
    assert!(
        out.contains("\nn3 cannot go:\n  shop/filler is not placed: 0/2 nodes are available: 2 Insufficient cpu."),
        "{out}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&simulate(&[
        "--cluster",
        dump,
        "--compress",
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(json["removable"], serde_json::json!([]));
    assert_eq!(json["stoppedBy"]["node"], "n3");
}

/// n1 (1 CPU) and four pending 1-CPU pods: n1 takes one, three are left.
const PENDING_DUMP: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, status: {allocatable: {cpu: '1', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Pod, metadata: {name: p0, namespace: default}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: p1, namespace: default}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: p2, namespace: default}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: p3, namespace: default}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}}
";

#[test]
fn add_nodes_finds_the_smallest_count_and_one_fewer_leaves_a_pod_pending() {
    let dump = temp_file("pending.yaml", PENDING_DUMP);
    let dump = dump.to_str().unwrap();
    let node = temp_file(
        "node.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: big, labels: {kubernetes.io/hostname: big, zone: z1}}\nstatus: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}\n",
    );
    let node = node.to_str().unwrap();
    let ask = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["--cluster", dump, "--add-nodes", node, "-o", "json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&stdout(&simulate(&args))).unwrap()
    };
    let json = ask(&[]);
    assert_eq!(json["nodesAdded"], 2, "{json}");
    assert_eq!(json["allPlaced"], true);
    assert_eq!(json["oneFewer"]["leftOver"], 1);
    // Asked independently: N places every pod, N - 1 leaves exactly one pending.
    let n = json["nodesAdded"].as_u64().unwrap();
    let exact = ask(&["--count", &n.to_string()]);
    assert_eq!(exact["allPlaced"], true, "{exact}");
    assert_eq!(exact["placed"], 4);
    let fewer = ask(&["--count", &(n - 1).to_string()]);
    assert_eq!(fewer["allPlaced"], false, "{fewer}");
    assert_eq!(fewer["leftOver"].as_array().unwrap().len(), 1);
    let reason = fewer["leftOver"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("0/2 nodes are available: 2 Insufficient cpu."),
        "{reason}"
    );

    let table = stdout(&simulate(&["--cluster", dump, "--add-nodes", node]));
    assert!(
        table.starts_with(
            "2 node(s) like big place all 4 pending pod(s); with 1 node(s), 1 would be left over.\n"
        ),
        "{table}"
    );
    // --count needs --add-nodes; a template that is not a Node is refused, naming it.
    assert_eq!(
        simulate(&["--cluster", dump, "--count", "2"]).status.code(),
        Some(2)
    );
    let o = simulate(&["--cluster", dump, "--add-nodes", dump]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "error: {dump}: node template: kind: the file holds 4 object(s) besides the Node; give the Node alone"
        )),
        "{err}"
    );
}

/// A what-if question is never silently dropped: `--compare-config` does not combine with
/// drain, compression or nodes to add (clap refuses, exit 2).
#[test]
fn what_if_questions_refuse_what_they_cannot_answer() {
    let o = simulate(&[
        "--compress",
        "--compare-config",
        "config/most-allocated.yaml",
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let o = simulate(&[
        "--drain",
        "n1",
        "--compare-config",
        "config/most-allocated.yaml",
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// n1 and n2 with 4 GPUs, n3 with 2.
const GPU_DUMP: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110', nvidia.com/gpu: '4'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}, status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110', nvidia.com/gpu: '4'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}, status: {allocatable: {cpu: '8', memory: 32Gi, pods: '110', nvidia.com/gpu: '2'}}}
";

/// A gang of two 2-GPU pods: a PodGroup and a Job whose pods name it.
const GANG_TEMPLATE: &str = "apiVersion: scheduling.k8s.io/v1beta1
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

#[test]
fn a_podgroup_template_counts_whole_gangs() {
    let dump = temp_file("gpus.yaml", GPU_DUMP);
    let dump = dump.to_str().unwrap();
    let gang = temp_file("gang.yaml", GANG_TEMPLATE);
    let gang = gang.to_str().unwrap();
    let json: serde_json::Value = serde_json::from_str(&stdout(&simulate(&[
        "--cluster",
        dump,
        "--pod-template",
        gang,
        "-o",
        "json",
    ])))
    .unwrap();
    // Ten GPUs hold five 2-GPU pods: two whole gangs of two.
    assert_eq!(json["placed"], 2, "{json}");
    assert_eq!(
        json["gang"],
        serde_json::json!({"podGroup": "train", "minCount": 2})
    );
    assert_eq!(json["gangs"][1]["podGroup"], "ml/train-1");
    assert_eq!(json["gangs"][1]["members"][0][0], "ml/train-1-0");
    assert_eq!(json["stoppedBy"]["reason"], "Unschedulable");
    let why = json["stoppedBy"]["message"].as_str().unwrap();
    assert!(why.contains("minCount (2) cannot be satisfied"), "{why}");
    assert!(why.contains("Insufficient nvidia.com/gpu"), "{why}");

    let table = stdout(&simulate(&["--cluster", dump, "--pod-template", gang]));
    assert!(
        table.contains("PodGroup ml/train (a gang of 2 Job pod(s) ml/worker) (profile default-scheduler): 2 whole gang copies fit."),
        "{table}"
    );
    assert!(
        table.contains("Gangs placed:\n  ml/train-0: train-0-0 -> "),
        "{table}"
    );
    assert!(table.contains("The next gang does not fit: "), "{table}");
    let page = stdout(&simulate(&[
        "--cluster",
        dump,
        "--pod-template",
        gang,
        "-o",
        "html",
    ]));
    assert!(
        page.contains("How many whole gangs of PodGroup ml/train (2 pods of Job ml/worker) fit")
    );
    assert!(page.contains("<p>2 whole gang copies fit.</p>"), "{page}");
    assert!(
        page.contains("<tr><td>ml/train (the next gang)</td><td>minCount (2) cannot be satisfied")
    );

    // Pods naming another group: file, line, field and fix.
    let other = temp_file(
        "other.yaml",
        &GANG_TEMPLATE.replace("podGroupName: train", "podGroupName: eval"),
    );
    let o = simulate(&["--cluster", dump, "--pod-template", other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "error: {}:13: pod template: spec.template.spec.schedulingGroup.podGroupName: the pods name PodGroup \"eval\", not the file's PodGroup \"train\"; set",
            other.display()
        )),
        "{err}"
    );
}
