//! `simulate -o html` as a user opens it: one self-contained page that a real headless
//! browser (Debian's chromium) renders without errors, and `--compare-config` as a table
//! and JSON. Without /usr/bin/chromium the browser test says why it skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");
const CHROMIUM: &str = "/usr/bin/chromium";

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
        .display()
        .to_string()
}

fn simulate(args: &[&str]) -> String {
    let o: Output = Command::new(BIN)
        .arg("simulate")
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

const NODES: [&str; 15] = [
    "cpu-1", "cpu-2", "cpu-3", "cpu-4", "cpu-5", "cpu-6", "cpu-7", "cpu-8", "cpu-9", "gpu-1",
    "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6",
];

/// Nothing in the page reaches out: no URL, no external script, style, font or image.
fn assert_self_contained(page: &str) {
    for bad in [
        "http://", "https://", "src=", "<link", "@import", "url(", "//cdn",
    ] {
        assert!(!page.contains(bad), "page contains {bad:?}");
    }
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
}

#[test]
fn the_simulate_page_has_every_node_bar_and_every_pending_pod_with_its_reason() {
    let page = simulate(&["-o", "html"]);
    assert_self_contained(&page);
    for node in NODES {
        assert!(page.contains(&format!("<tr><td>{node}</td>")), "{node}");
    }
    // The GPU nodes have a GPU column; the built-in example leaves 4 of 20 pods pending.
    assert!(page.contains("<th>nvidia.com/gpu</th>"));
    assert!(page.contains("<h2>Pending pods (4)</h2>"), "pending count");
    assert!(page.contains("<tr><td>ml/train-huge</td><td>0/15 nodes are available"));
    assert!(page.contains("16 of 20 pending pod(s) scheduled."));
}

#[test]
fn the_capacity_page_answers_the_question_with_copies_per_node() {
    let page = simulate(&[
        "--pod-template",
        &repo("examples/web-deployment.yaml"),
        "-o",
        "html",
    ]);
    assert_self_contained(&page);
    assert!(page.contains("How many copies of Deployment default/web fit"));
    assert!(
        page.contains("<p>87 copies fit.</p>"),
        "same count as the table"
    );
    assert!(page.contains("<tr><td>cpu-1</td><td>15</td></tr>"));
    // The copy that did not fit is listed with the pending pods, with upstream's reason.
    assert!(page.contains(
        "default/web (the next copy)</td><td>0/15 nodes are available: 7 Insufficient cpu"
    ));
}

#[test]
fn compare_shows_the_packing_config_leaving_nodes_empty() {
    let packing = repo("config/most-allocated.yaml");
    let json: serde_json::Value =
        serde_json::from_str(&simulate(&["--compare-config", &packing, "-o", "json"])).unwrap();
    let configs = json["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 2);
    assert_eq!(configs[0]["name"], "the built-in example's config");
    assert_eq!(configs[1]["name"], packing.as_str());
    let empty = |i: usize| configs[i]["emptyNodes"].as_array().unwrap().len();
    // The example's default profile spreads; packing it leaves more nodes empty.
    assert!(empty(1) > empty(0), "{} vs {}", empty(0), empty(1));
    assert!(!json["moved"].as_array().unwrap().is_empty());
    for m in json["moved"].as_array().unwrap() {
        assert_ne!(m["first"], m["second"]);
    }
    assert!(configs[0]["fragmentation"]["cpuPercent"].is_number());
    assert_eq!(configs[0]["nodes"].as_array().unwrap().len(), 15);

    let table = simulate(&["--compare-config", &packing]);
    assert!(table.contains("pending pods placed"), "{table}");
    assert!(table.contains(&format!(
        "Placed differently: {} pod(s) on other nodes",
        json["moved"].as_array().unwrap().len()
    )));
    assert!(table.contains("NODE") && table.contains("CPU SECOND"));
}

/// A dump of `n` 16-CPU nodes, each running one pod, plus 50 pending pods.
fn big_dump(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: node-{i:05}, labels: {{kubernetes.io/hostname: node-{i:05}}}}}\nstatus: {{allocatable: {{cpu: '16', memory: 64Gi, pods: '110'}}}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: run-{i}, namespace: default}}\nspec:\n  nodeName: node-{i:05}\n  containers: [{{name: c, image: i, resources: {{requests: {{cpu: '2', memory: 4Gi}}}}}}]\n"
        ));
    }
    for i in 0..50 {
        s.push_str(&format!("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p-{i}, namespace: default}}\nspec:\n  containers: [{{name: c, image: i, resources: {{requests: {{cpu: 500m}}}}}}]\n"));
    }
    s
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrosched-html-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_5000_node_report_stays_under_5_mb() {
    let dir = scratch("big");
    let dump = dir.join("dump.yaml");
    std::fs::write(&dump, big_dump(5_000)).unwrap();
    let page = simulate(&["--cluster", dump.to_str().unwrap(), "-o", "html"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_self_contained(&page);
    assert!(page.contains("<h2>Nodes (5000)</h2>"));
    assert!(page.contains("<tr><td>node-04999</td>"));
    assert!(page.len() < 5 * 1024 * 1024, "{} bytes", page.len());
}

#[test]
fn a_5000_node_drain_report_stays_under_5_mb() {
    let dir = scratch("big-drain");
    let dump = dir.join("dump.yaml");
    std::fs::write(&dump, big_dump(5_000)).unwrap();
    let page = simulate(&[
        "--cluster",
        dump.to_str().unwrap(),
        "--drain",
        "node-00000",
        "node-00001",
        "-o",
        "html",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_self_contained(&page);
    assert!(page.contains("<h2>Nodes (5000)</h2>"));
    assert!(page.contains("<tr><td>node-00001<em>drained</em></td>"));
    assert!(page.contains("<p>Draining node-00000, node-00001: 2 pod(s) evicted, 2 placed elsewhere, 0 not placed.</p>"));
    assert!(page.len() < 5 * 1024 * 1024, "{} bytes", page.len());
}

/// Opens `page` in headless chromium and returns the DOM after its script ran, failing on
/// any script error the browser logs.
fn render_in_chromium(page: &str, name: &str) -> String {
    let dir = scratch(name);
    let file = dir.join("report.html");
    std::fs::write(&file, page).unwrap();
    let profile = dir.join("profile");
    let out = Command::new("timeout")
        .arg("120")
        .arg(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "chromium exit {:?}: {stderr}",
        out.status.code()
    );
    for line in stderr.lines().filter(|l| l.contains("CONSOLE")) {
        assert!(
            !line.contains("Uncaught") && !line.contains("Error"),
            "{line}"
        );
    }
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn reports_render_in_a_real_headless_browser() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!(
            "skipped: {CHROMIUM} is missing, so the pages are not opened in a browser (apt-get install chromium; .ci/run installs it)"
        );
        return;
    }
    let dom = render_in_chromium(&simulate(&["-o", "html"]), "simulate");
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "script did not finish:\n{dom}"
    );
    assert!(dom.contains("data-nodes=\"15\""));
    assert!(dom.contains("data-pending=\"4\""));
    for node in NODES {
        assert!(dom.contains(&format!("<td>{node}</td>")), "{node}");
    }

    let packing = repo("config/most-allocated.yaml");
    let dom = render_in_chromium(
        &simulate(&["--compare-config", &packing, "-o", "html"]),
        "compare",
    );
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "script did not finish:\n{dom}"
    );
    assert!(dom.contains("data-nodes=\"15\""));
    assert!(dom.contains("Pods on other nodes"));

    let dir = scratch("what-if-pages");
    let pages = what_if_pages(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    for (name, page) in pages {
        let dom = render_in_chromium(&page, name);
        assert!(
            dom.contains("data-rendered=\"ok\""),
            "{name}: script did not finish:\n{dom}"
        );
        let (nodes, answer) = match name {
            "drain" => ("3", "over the budget: shop/web-b"),
            "compress" => ("3", "1 of 3 candidate node(s) can be removed: n2."),
            "add-nodes" => ("3", "2 node(s) like big place all 4 pending pod(s)"),
            _ => ("2", "1 left over"),
        };
        assert!(
            dom.contains(&format!("data-nodes=\"{nodes}\"")),
            "{name}: {dom}"
        );
        assert!(dom.contains(answer), "{name}: {dom}");
    }
}

/// n1, n2, n3 (2 CPU each): web-a (500m) and a DaemonSet pod on n1, web-b (500m) on n2,
/// filler (1500m) on n3. web-pdb lets one of the two web pods go.
const WHAT_IF_DUMP: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}, status: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-a, namespace: shop, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]}
  spec: {nodeName: n1, containers: [{name: c, image: i, resources: {requests: {cpu: 500m}}}]}
  status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: agent-n1, namespace: shop, ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u2, controller: true}]}
  spec: {nodeName: n1, containers: [{name: c, image: i, resources: {requests: {cpu: 100m}}}]}
  status: {phase: Running}
- apiVersion: v1
  kind: Pod
  metadata: {name: web-b, namespace: shop, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]}
  spec: {nodeName: n2, containers: [{name: c, image: i, resources: {requests: {cpu: 500m}}}]}
  status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: filler, namespace: shop, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: filler, uid: u4, controller: true}]}
  spec: {nodeName: n3, containers: [{name: c, image: i, resources: {requests: {cpu: 1500m}}}]}
  status: {phase: Running}
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {name: web-pdb, namespace: shop}
  spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
";

/// n1 (1 CPU) and four pending 1-CPU pods.
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

const BIG_NODE: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: big, labels: {kubernetes.io/hostname: big}}\nstatus: {allocatable: {cpu: '2', memory: 8Gi, pods: '110'}}\n";

/// The three what-if pages: (name, page), from files in `dir`.
fn what_if_pages(dir: &Path) -> Vec<(&'static str, String)> {
    let dump = dir.join("what-if.yaml");
    let pending = dir.join("pending.yaml");
    let node = dir.join("node.yaml");
    std::fs::write(&dump, WHAT_IF_DUMP).unwrap();
    std::fs::write(&pending, PENDING_DUMP).unwrap();
    std::fs::write(&node, BIG_NODE).unwrap();
    let (dump, pending, node) = (
        dump.to_str().unwrap(),
        pending.to_str().unwrap(),
        node.to_str().unwrap(),
    );
    vec![
        (
            "drain",
            simulate(&["--cluster", dump, "--drain", "n1", "n2", "-o", "html"]),
        ),
        (
            "compress",
            simulate(&["--cluster", dump, "--compress", "-o", "html"]),
        ),
        (
            "add-nodes",
            simulate(&["--cluster", pending, "--add-nodes", node, "-o", "html"]),
        ),
        (
            "add-nodes-count",
            simulate(&[
                "--cluster",
                pending,
                "--add-nodes",
                node,
                "--count",
                "1",
                "-o",
                "html",
            ]),
        ),
    ]
}

#[test]
fn drain_compress_and_add_nodes_pages_show_the_answer_and_bars_before_and_after() {
    let dir = scratch("what-if");
    let pages = what_if_pages(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    for (name, page) in &pages {
        assert_self_contained(page);
        assert!(page.contains("<table id=nodes>"), "{name}: node bars");
    }
    let page = |name: &str| pages.iter().find(|(n, _)| *n == name).unwrap().1.as_str();

    // Drain: n3 has 500m free, so one web pod moves there and the other fits nowhere;
    // web-pdb allows one of the two evictions.
    let drain = page("drain");
    assert!(
        drain.contains(
            "<p>Draining n1, n2: 2 pod(s) evicted, 1 placed elsewhere, 1 not placed.</p>"
        ),
        "{drain}"
    );
    assert!(
        drain.contains(
            "<tr><td>shop/web-a</td><td>n1</td><td>0</td><td>n3</td><td></td><td></td></tr>"
        ),
        "{drain}"
    );
    assert!(drain.contains(
        "PodDisruptionBudgets exceeded: shop/web-pdb (minAvailable: 1; 1 disruption(s) allowed; over the budget: shop/web-b)."
    ));
    assert!(drain.contains(
        "<tr><td>shop/web-b (evicted from n2)</td><td>0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable."
    ));
    assert!(drain.contains("<tr><td>shop/agent-n1</td><td>n1</td><td>DaemonSet</td></tr>"));
    // Bars: n1 keeps its DaemonSet pod (600m -> 100m), n3 takes web-a (1500m -> 2000m).
    assert!(drain.contains("<tr><td>n1<em>drained</em></td><td class=\"r\"><s style=\"--b:30%;--a:5%\"></s>600m\u{2192}100m/2</td>"), "{drain}");
    assert!(
        drain.contains(
            "<tr><td>n3</td><td class=\"r\"><s style=\"--b:75%;--a:100%\"></s>1500m\u{2192}2/2</td>"
        ),
        "{drain}"
    );

    // Compression: n2 (25%) goes, its pod moving; then n1 cannot (one web pod fits
    // nowhere, and the budget allows one eviction of two).
    let compress = page("compress");
    assert!(
        compress.contains("<p>1 of 3 candidate node(s) can be removed: n2.</p>"),
        "{compress}"
    );
    assert!(
        compress.contains("<p>n1 cannot go: 1 pod(s) would fit nowhere (shop/web-"),
        "{compress}"
    );
    assert!(compress.contains(
        "exceeds PodDisruptionBudget shop/web-pdb (minAvailable: 1; 1 disruption(s) allowed)"
    ));
    assert!(compress.contains("<tr><td>n2<em>removed</em></td><td class=\"r\"><s style=\"--b:25%;--a:0%\"></s>500m\u{2192}0/2</td>"), "{compress}");
    assert!(
        compress
            .contains("<td>n1</td><td>30%</td><td>0%</td><td>no: the node that could not go</td>")
    );

    // Nodes to add: two 2-CPU nodes, and one fewer leaves a pod over.
    let add = page("add-nodes");
    assert!(
        add.contains("<p>2 node(s) like big place all 4 pending pod(s); with 1 node(s), 1 would be left over.</p>"),
        "{add}"
    );
    assert!(add.contains("<tr><td>big-0<em>added</em></td><td class=\"r\"><s style=\"--b:0%;--a:100%\"></s>0\u{2192}2/2</td>"), "{add}");
    assert!(add.contains("<tr><td>big-1</td><td>1</td></tr>"), "{add}");
    assert!(add.contains("<h2>Pending pods (0)</h2>"));
    let one = page("add-nodes-count");
    assert!(one.contains("With 1 node(s) like big: 3 of 4 pending pod(s) placed, 1 left over."));
    assert!(one.contains("<h2>Pending pods (1)</h2>"), "{one}");
    assert!(
        one.contains("</td><td>0/2 nodes are available: 2 Insufficient cpu."),
        "{one}"
    );
}

#[test]
fn an_unreadable_second_config_is_named_with_its_field() {
    let o = Command::new(BIN)
        .args([
            "simulate",
            "--compare-config",
            &repo("config/broken-example.yaml"),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: --compare-config: "), "{err}");
    assert!(
        err.contains("broken-example.yaml:12:5: profiles[1].schedulerNmae"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}
