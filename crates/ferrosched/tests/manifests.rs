//! The install manifests under `manifests/` and the Dockerfile: every YAML document decodes
//! into its Kubernetes type without losing a field, the embedded scheduler config validates,
//! and the Deployment, static pod, RBAC and image agree with each other and with
//! `ferrosched run`'s real command line.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Pod, PodSpec, Probe, Service, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use scheduler_core::policy::{self, SchedulingPolicy};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (file relative to manifests/, document) for every YAML document under manifests/.
fn documents() -> Vec<(String, Value)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                out.push(p);
            }
        }
    }
    let root = repo().join("manifests");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        let docs: Vec<Value> =
            serde_saphyr::from_str_multiple(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
        out.extend(
            docs.into_iter()
                .filter(|d| !d.is_null())
                .map(|d| (rel.clone(), d)),
        );
    }
    out
}

/// Decodes into `T` and re-encodes: a misspelt or misplaced field (which a plain decode
/// would silently drop, and the API server would reject or ignore) shows up as a difference.
fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(file: &str, doc: &Value) -> T {
    let t: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{file}: {} does not decode: {e}", doc["kind"]));
    let back = serde_json::to_value(&t).unwrap();
    let mut diffs = Vec::new();
    diff("", doc, &back, &mut diffs);
    assert!(
        diffs.is_empty(),
        "{file}: {} {} loses or changes fields when decoded (misspelt or misplaced?):\n{}",
        doc["kind"],
        doc["metadata"]["name"],
        diffs.join("\n")
    );
    t
}

/// Paths where `written` and `decoded` differ.
fn diff(path: &str, written: &Value, decoded: &Value, out: &mut Vec<String>) {
    match (written, decoded) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                diff(
                    &format!("{path}.{k}"),
                    v,
                    b.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("  {path}.{k}: added by decoding"));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a != b => out.push(format!("  {path}: written {a}, decoded {b}")),
        _ => {}
    }
}

fn find<'a>(docs: &'a [(String, Value)], file: &str, kind: &str) -> &'a Value {
    docs.iter()
        .find(|(f, d)| f == file && d["kind"] == kind)
        .map(|(_, d)| d)
        .unwrap_or_else(|| panic!("no {kind} in {file}"))
}

/// The value of `--flag=value` or `--flag value` in a command line.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix(&eq)
            .or_else(|| (a == name).then(|| args.get(i + 1).map(String::as_str))?)
    })
}

/// `ferrosched run --help`'s default for a flag, e.g. "10259" for --secure-port.
fn run_default(name: &str) -> String {
    let out = Command::new(BIN).args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let section = help
        .split(&format!("{name} <"))
        .nth(1)
        .unwrap_or_else(|| panic!("{name} not in `ferrosched run --help`:\n{help}"));
    let section = section.split("\n  -").next().unwrap();
    section
        .split("[default: ")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap_or_else(|| panic!("no default for {name}"))
        .to_string()
}

fn port_of(p: &Probe) -> (&str, i32, &str) {
    let g = p.http_get.as_ref().expect("httpGet probe");
    let port = match &g.port {
        IntOrString::Int(i) => *i,
        IntOrString::String(s) => panic!("named probe port {s}: use the number"),
    };
    (
        g.path.as_deref().unwrap_or(""),
        port,
        g.scheme.as_deref().unwrap_or("HTTP"),
    )
}

/// Runs `ferrosched` with a container's command line (the binary path swapped for the
/// test binary, files swapped as given) against a kubeconfig that does not exist: clap must
/// accept every flag and the config must load, so the only error is the kubeconfig.
fn run_command_line(command: &[String], replace: &[(&str, String)]) {
    let args: Vec<String> = command[1..]
        .iter()
        .map(|a| {
            replace
                .iter()
                .find_map(|(from, to)| a.strip_prefix(from).map(|_| format!("{from}{to}")))
                .unwrap_or_else(|| a.clone())
        })
        .collect();
    let out = Command::new(BIN).args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(
        stderr.contains("nonexistent-kubeconfig"),
        "{args:?} must get as far as reading the kubeconfig: {stderr}"
    );
}

fn restricted(file: &str, c: &Container, spec: &PodSpec) {
    let sc = c
        .security_context
        .as_ref()
        .expect("container securityContext");
    assert_eq!(sc.allow_privilege_escalation, Some(false), "{file}");
    assert_eq!(sc.read_only_root_filesystem, Some(true), "{file}");
    let caps = sc.capabilities.as_ref().and_then(|c| c.drop.clone());
    assert_eq!(caps, Some(vec!["ALL".to_string()]), "{file}");
    let psc = spec.security_context.as_ref().expect("pod securityContext");
    assert_eq!(
        psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
        Some("RuntimeDefault"),
        "{file}"
    );
}

#[test]
fn every_manifest_decodes_into_its_kubernetes_type_without_losing_fields() {
    let docs = documents();
    let mut kinds = BTreeSet::new();
    for (file, d) in &docs {
        let kind = d["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("{file}: no kind"));
        kinds.insert(kind.to_string());
        match kind {
            "Kustomization" => continue,
            "ServiceAccount" => drop(typed::<ServiceAccount>(file, d)),
            "ClusterRole" => drop(typed::<ClusterRole>(file, d)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(file, d)),
            "Role" => drop(typed::<Role>(file, d)),
            "RoleBinding" => drop(typed::<RoleBinding>(file, d)),
            "ConfigMap" => drop(typed::<ConfigMap>(file, d)),
            "Deployment" => drop(typed::<Deployment>(file, d)),
            "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(file, d)),
            "Pod" => drop(typed::<Pod>(file, d)),
            "CustomResourceDefinition" => drop(typed::<CustomResourceDefinition>(file, d)),
            "Service" => drop(typed::<Service>(file, d)),
            "MutatingWebhookConfiguration" => drop(typed::<MutatingWebhookConfiguration>(file, d)),
            "ValidatingWebhookConfiguration" => {
                drop(typed::<ValidatingWebhookConfiguration>(file, d))
            }
            "SchedulingPolicy" => {
                let p: SchedulingPolicy = typed(file, d);
                assert_eq!(policy::validate(&p), Vec::<String>::new(), "{file}");
            }
            other => panic!("{file}: no typed check for kind {other}"),
        }
        let ns = d["metadata"]["namespace"].as_str();
        if kind.starts_with("Cluster")
            || kind.ends_with("WebhookConfiguration")
            || kind == "CustomResourceDefinition"
            || kind == "SchedulingPolicy"
        {
            assert_eq!(ns, None, "{file}: {kind} is cluster-scoped");
        } else {
            assert_eq!(
                ns,
                Some("kube-system"),
                "{file}: {kind} belongs in kube-system"
            );
        }
    }
    for k in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Pod",
    ] {
        assert!(kinds.contains(k), "no {k} under manifests/");
    }
}

#[test]
fn the_kustomization_installs_every_top_level_manifest() {
    let text = std::fs::read_to_string(repo().join("manifests/kustomization.yaml")).unwrap();
    let k: Value = serde_saphyr::from_str(&text).unwrap();
    let listed: BTreeSet<String> = k["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(repo().join("manifests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".yaml") && f != "kustomization.yaml")
        .collect();
    assert_eq!(listed, on_disk);
}

#[test]
fn the_configmap_config_validates_and_runs_beside_kube_scheduler() {
    let docs = documents();
    let cm: ConfigMap = typed("configmap.yaml", find(&docs, "configmap.yaml", "ConfigMap"));
    let data = cm.data.unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["config.yaml"]);
    let loaded = scheduler_core::config::load_str(&data["config.yaml"], "configmap.yaml")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let names: Vec<&str> = loaded
        .config
        .profiles
        .iter()
        .map(|p| p.scheduler_name.as_str())
        .collect();
    assert_eq!(names, ["ferrosched", "ferrosched-bin-packing"]);

    // Its own Lease, and the Role grants exactly that one.
    let le = &loaded.config.leader_election;
    assert!(le.leader_elect);
    assert_eq!(le.resource_namespace, "kube-system");
    assert_eq!(le.resource_name, "ferrosched");
    let role: Role = typed(
        "leader-election.yaml",
        find(&docs, "leader-election.yaml", "Role"),
    );
    assert_eq!(
        role.metadata.namespace.as_deref(),
        Some(le.resource_namespace.as_str())
    );
    let named: Vec<String> = role
        .rules
        .unwrap()
        .into_iter()
        .flat_map(|r| r.resource_names.unwrap_or_default())
        .collect();
    assert_eq!(named, std::slice::from_ref(&le.resource_name));
}

#[test]
fn the_deployment_runs_the_mounted_config_with_probes_on_run_s_port() {
    let docs = documents();
    let d: Deployment = typed(
        "deployment.yaml",
        find(&docs, "deployment.yaml", "Deployment"),
    );
    let spec = d.spec;
    assert_eq!(spec.replicas, Some(2), "HA with leader election");
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.containers.len(), 1);
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap();
    assert_eq!(args[0], "run");

    // --config points at a key of the ConfigMap through its volume mount.
    let config = flag(&args, "--config").expect("--config");
    let (dir, key) = config.rsplit_once('/').unwrap();
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == dir)
        .unwrap_or_else(|| panic!("nothing mounted at {dir}"));
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap();
    let cm_name = volume
        .config_map
        .as_ref()
        .expect("configMap volume")
        .name
        .clone();
    let cm: ConfigMap = typed("configmap.yaml", find(&docs, "configmap.yaml", "ConfigMap"));
    assert_eq!(cm.metadata.name.as_deref(), Some(cm_name.as_str()));
    assert!(cm.data.unwrap().contains_key(key), "ConfigMap has no {key}");

    // Probes on `ferrosched run`'s health port, HTTPS as kube-scheduler's.
    let default_port: i32 = run_default("--secure-port").parse().unwrap();
    assert_eq!(default_port, 10259);
    let port: i32 = flag(&args, "--secure-port").map_or(default_port, |p| p.parse().unwrap());
    assert_eq!(port, default_port);
    let live = port_of(c.liveness_probe.as_ref().expect("liveness probe"));
    let ready = port_of(c.readiness_probe.as_ref().expect("readiness probe"));
    assert_eq!(live, ("/livez", port, "HTTPS"));
    assert_eq!(ready, ("/readyz", port, "HTTPS"));
    let bind =
        flag(&args, "--bind-address").map_or_else(|| run_default("--bind-address"), str::to_string);
    assert_eq!(bind, "0.0.0.0", "kubelet probes reach the pod IP");

    // Hardening and placement.
    restricted("deployment.yaml", c, &pod);
    let psc = pod.security_context.as_ref().unwrap();
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.run_as_user, Some(65532));
    assert!(
        c.resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .is_some()
    );
    assert!(
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .is_some()
    );
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    assert!(
        pod.tolerations
            .iter()
            .flatten()
            .any(|t| t.key.as_deref() == Some("node-role.kubernetes.io/control-plane"))
    );
    let anti = pod.affinity.unwrap().pod_anti_affinity.unwrap();
    let terms = anti
        .preferred_during_scheduling_ignored_during_execution
        .unwrap();
    assert_eq!(
        terms[0].pod_affinity_term.topology_key,
        "kubernetes.io/hostname"
    );
    assert_eq!(
        terms[0]
            .pod_affinity_term
            .label_selector
            .as_ref()
            .unwrap()
            .match_labels,
        spec.selector.match_labels
    );

    // The service account the RBAC binds.
    let sa: ServiceAccount = typed(
        "serviceaccount.yaml",
        find(&docs, "serviceaccount.yaml", "ServiceAccount"),
    );
    assert_eq!(pod.service_account_name, sa.metadata.name);
    for (file, kind) in [
        ("rbac.yaml", "ClusterRoleBinding"),
        ("leader-election.yaml", "RoleBinding"),
    ] {
        let subjects = &find(&docs, file, kind)["subjects"];
        assert_eq!(subjects[0]["kind"], "ServiceAccount", "{file}");
        assert_eq!(subjects[0]["name"], "ferrosched", "{file}");
        assert_eq!(subjects[0]["namespace"], "kube-system", "{file}");
    }

    // The real command line: flags parse and the ConfigMap's config loads.
    let dir = std::env::temp_dir().join(format!("ferrosched-manifests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(key);
    std::fs::write(
        &file,
        find(&docs, "configmap.yaml", "ConfigMap")["data"][key]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let mut command = c.command.clone().expect("command");
    command.extend(args.iter().cloned());
    command.push("--kubeconfig=/nonexistent-kubeconfig".into());
    run_command_line(
        &command,
        &[
            ("--config=", file.display().to_string()),
            // No listener in tests; the port was checked above.
            ("--secure-port=", "0".into()),
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_kubeadm_static_pod_replaces_kube_scheduler() {
    let docs = documents();
    let file = "kubeadm/kube-scheduler.yaml";
    let pod: Pod = typed(file, find(&docs, file, "Pod"));
    assert_eq!(pod.metadata.name.as_deref(), Some("kube-scheduler"));
    let spec = pod.spec.unwrap();
    assert_eq!(spec.host_network, Some(true));
    let c = &spec.containers[0];
    let command = c.command.clone().unwrap();
    assert_eq!(command[1], "run");
    let kubeconfig = flag(&command, "--kubeconfig").unwrap();
    assert_eq!(kubeconfig, "/etc/kubernetes/scheduler.conf");
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == kubeconfig)
        .expect("scheduler.conf mounted");
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap();
    assert_eq!(volume.host_path.as_ref().unwrap().path, kubeconfig);

    // No --config: kube-scheduler's defaults, i.e. leader election on kube-scheduler's own
    // Lease, so kube-scheduler and ferrosched never both lead while nodes are swapped.
    assert_eq!(flag(&command, "--config"), None);
    let defaults = scheduler_core::config::from_flags(None, None).unwrap();
    let le = &defaults.config.leader_election;
    assert!(le.leader_elect);
    assert_eq!(
        (le.resource_namespace.as_str(), le.resource_name.as_str()),
        ("kube-system", "kube-scheduler")
    );
    assert_eq!(
        defaults.config.profiles[0].scheduler_name,
        "default-scheduler"
    );

    let port: i32 = flag(&command, "--secure-port")
        .map_or_else(|| run_default("--secure-port"), str::to_string)
        .parse()
        .unwrap();
    let live = port_of(c.liveness_probe.as_ref().unwrap());
    assert_eq!(live, ("/livez", port, "HTTPS"));
    let host = c
        .liveness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap()
        .host
        .clone();
    assert_eq!(host.as_deref(), flag(&command, "--bind-address"));
    restricted(file, c, &spec);

    // The review kubeconfigs must exist (checked at start); with the port off they are not
    // read further.
    let review =
        std::env::temp_dir().join(format!("ferrosched-review-{}.conf", std::process::id()));
    std::fs::write(&review, "").unwrap();
    let review_file = review.clone();
    let review = review.display().to_string();
    run_command_line(
        &command,
        &[
            ("--kubeconfig=", "/nonexistent-kubeconfig".into()),
            ("--secure-port=", "0".into()),
            ("--authentication-kubeconfig=", review.clone()),
            ("--authorization-kubeconfig=", review),
        ],
    );
    let _ = std::fs::remove_file(review_file);
}

#[test]
fn the_image_holds_the_binary_the_manifests_run() {
    let dockerfile = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let froms: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(froms.len(), 2, "multi-stage: {froms:?}");
    assert!(froms[0].starts_with("FROM rust:1.95"), "{}", froms[0]);
    // The hot-code order fits one toolchain: the image must build with the one it was made
    // with, or the image's scheduler maps ~9 MiB more (crates/ferrosched/link/README.md).
    let order =
        std::fs::read_to_string(repo().join("crates/ferrosched/link/hot-symbols.txt")).unwrap();
    let made_with = ferrosched::hot_code::Fingerprint::from_header(&order)
        .unwrap()
        .rustc;
    let image_rust = froms[0]
        .trim_start_matches("FROM rust:")
        .split('-')
        .next()
        .unwrap();
    assert!(
        made_with.starts_with(&format!("rustc {image_rust} ")),
        "the Dockerfile builds with Rust {image_rust}, link/hot-symbols.txt was made with \
         {made_with}: regenerate it with crates/ferrosched/link/collect.sh"
    );
    assert!(dockerfile.contains("cargo build --profile dist --locked -p ferrosched"));
    assert!(dockerfile.contains("target/dist/ferrosched"));
    let last_stage = dockerfile.split("\nFROM ").last().unwrap();
    assert!(last_stage.contains("USER 65532:65532"));
    let copies: Vec<&str> = last_stage
        .lines()
        .filter(|l| l.starts_with("COPY"))
        .collect();
    assert_eq!(copies.len(), 1, "only the binary: {copies:?}");
    let binary = copies[0].split_whitespace().last().unwrap();
    assert!(last_stage.contains(&format!("ENTRYPOINT [\"{binary}\"]")));

    let docs = documents();
    let d: Deployment = typed(
        "deployment.yaml",
        find(&docs, "deployment.yaml", "Deployment"),
    );
    let c = &d.spec.template.spec.unwrap().containers[0];
    assert_eq!(c.command.as_deref(), Some(&[binary.to_string()][..]));
    let pod: Pod = typed(
        "kubeadm/kube-scheduler.yaml",
        find(&docs, "kubeadm/kube-scheduler.yaml", "Pod"),
    );
    assert_eq!(
        pod.spec.unwrap().containers[0].command.as_ref().unwrap()[0],
        binary
    );

    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).unwrap();
    assert!(
        ignore.lines().any(|l| l.trim() == "target/"),
        "keep target/ out of the context"
    );
}

/// `manifests/policy/webhook.yaml`: the Deployment runs `ferrosched webhook` with flags it
/// accepts, probes and the Service reach its port over HTTPS, the certificate files come
/// from the TLS Secret, both webhook configurations call the Service, and the RBAC grants
/// exactly what the webhook asks the API server.
#[test]
fn the_policy_webhook_manifests_agree_with_ferrosched_webhook() {
    let docs = documents();
    let file = "policy/webhook.yaml";
    let d: Deployment = typed(file, find(&docs, file, "Deployment"));
    let pod = d.spec.template.spec.unwrap();
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap();
    assert_eq!(args[0], "webhook");
    let port: i32 = flag(&args, "--secure-port").unwrap().parse().unwrap();
    let (path, probe_port, scheme) = port_of(c.readiness_probe.as_ref().unwrap());
    assert_eq!((path, probe_port, scheme), ("/healthz", port, "HTTPS"));
    restricted(file, c, &pod);

    // Certificate and key from the mounted Secret.
    for f in ["--tls-cert-file", "--tls-private-key-file"] {
        let (dir, _) = flag(&args, f).unwrap().rsplit_once('/').unwrap();
        let mount = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == dir)
            .unwrap_or_else(|| panic!("{f}: nothing mounted at {dir}"));
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .unwrap();
        assert_eq!(
            volume.secret.as_ref().unwrap().secret_name.as_deref(),
            Some("ferrosched-webhook-tls")
        );
    }

    // The Service forwards 443 to that port; both configurations call it.
    let svc: Service = typed(file, find(&docs, file, "Service"));
    let sp = &svc.spec.unwrap().ports.unwrap()[0];
    assert_eq!(sp.target_port, Some(IntOrString::Int(port)));
    let m: MutatingWebhookConfiguration =
        typed(file, find(&docs, file, "MutatingWebhookConfiguration"));
    let v: ValidatingWebhookConfiguration =
        typed(file, find(&docs, file, "ValidatingWebhookConfiguration"));
    let mutating = &m.webhooks.unwrap()[0];
    let validating = &v.webhooks.unwrap()[0];
    for (cc, versions, side, rules, want_path, ops) in [
        (
            &mutating.client_config,
            &mutating.admission_review_versions,
            &mutating.side_effects,
            &mutating.rules,
            "/mutate",
            vec!["CREATE"],
        ),
        (
            &validating.client_config,
            &validating.admission_review_versions,
            &validating.side_effects,
            &validating.rules,
            "/validate",
            vec!["CREATE", "UPDATE"],
        ),
    ] {
        let s = cc.service.as_ref().unwrap();
        assert_eq!(s.name, svc.metadata.name.clone().unwrap());
        assert_eq!(Some(s.namespace.clone()), svc.metadata.namespace);
        assert_eq!(s.port, Some(sp.port));
        assert_eq!(s.path.as_deref(), Some(want_path));
        assert_eq!(versions, &["v1"]);
        assert_eq!(side, "None");
        let r = &rules.as_ref().unwrap()[0];
        assert_eq!(r.resources.as_deref(), Some(&["pods".to_string()][..]));
        assert_eq!(r.operations.clone().unwrap(), ops);
    }

    // RBAC: bound to the Deployment's service account, grants what the webhook calls.
    let sa: ServiceAccount = typed(file, find(&docs, file, "ServiceAccount"));
    assert_eq!(pod.service_account_name, sa.metadata.name);
    for f in [file, "policy/scheduler-rbac.yaml"] {
        let role: ClusterRole = typed(f, find(&docs, f, "ClusterRole"));
        let granted: BTreeSet<(String, String, String)> = role
            .rules
            .unwrap()
            .into_iter()
            .flat_map(|r| {
                let group = r.api_groups.unwrap_or_default()[0].clone();
                let res = r.resources.unwrap_or_default()[0].clone();
                r.verbs
                    .into_iter()
                    .map(move |v| (group.clone(), res.clone(), v))
            })
            .collect();
        let mut want: BTreeSet<(String, String, String)> = [
            ("scheduling.ferrosched.io", "schedulingpolicies", "list"),
            ("scheduling.ferrosched.io", "schedulingpolicies", "watch"),
            ("authorization.k8s.io", "subjectaccessreviews", "create"),
        ]
        .into_iter()
        .map(|(g, r, v)| (g.into(), r.into(), v.into()))
        .collect();
        if f == file {
            // /mutate asks whether a pod's class is the globalDefault one.
            want.insert((
                "scheduling.k8s.io".into(),
                "priorityclasses".into(),
                "get".into(),
            ));
        }
        assert_eq!(granted, want, "{f}");
    }

    // The real command line: every flag parses and the certificate is the first thing read.
    let mut command = c.command.clone().unwrap();
    command.extend(args.iter().cloned());
    let replaced: Vec<String> = command[1..]
        .iter()
        .map(|a| {
            if a.starts_with("--tls-cert-file=") {
                "--tls-cert-file=/nonexistent-cert.pem".to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    let out = Command::new(BIN).args(&replaced).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("/nonexistent-cert.pem"), "{stderr}");
}
