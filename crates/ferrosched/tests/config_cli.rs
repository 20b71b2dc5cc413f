//! `ferrosched config validate` as a user runs it: ConfigMaps, plugin names that can never
//! take effect, profile order and wording.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn validate(text: &str, name: &str) -> (Output, String) {
    // Cargo's per-target temp dir, not /tmp: a file per test name, rewritten each run.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("config_cli");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    let o = Command::new(BIN)
        .args(["config", "validate"])
        .arg(&p)
        .output()
        .unwrap();
    (o, p.display().to_string())
}

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_configmap_is_validated_through_its_embedded_config() {
    let o = Command::new(BIN)
        .args([
            "config",
            "validate",
            &format!("{ROOT}/manifests/configmap.yaml"),
        ])
        .output()
        .unwrap();
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains("manifests/configmap.yaml (ConfigMap kube-system/ferrosched-config, key config.yaml): valid, 2 profile(s)"),
        "{text}"
    );
    // An error inside the embedded config points at its line and column in the ConfigMap.
    let cm = std::fs::read_to_string(format!("{ROOT}/manifests/configmap.yaml")).unwrap();
    let broken = cm.replacen(
        "    kind: KubeSchedulerConfiguration\n",
        "    kind: KubeSchedulerConfiguration\n    percentageOfNodesToScore: 300\n",
        1,
    );
    let line = broken
        .lines()
        .position(|l| l == "    percentageOfNodesToScore: 300")
        .unwrap()
        + 1;
    let (o, path) = validate(&broken, "cm.yaml");
    assert_eq!(o.status.code(), Some(1));
    let text = out(&o);
    assert!(
        text.contains(&format!(
            "{path}:{line}:31: data[config.yaml].percentageOfNodesToScore: Invalid value: 300"
        )),
        "{text}"
    );
    let (o, _) = validate(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: y}\ndata: {foo: bar}\n",
        "empty.yaml",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        out(&o).contains("ConfigMap y/x holds no KubeSchedulerConfiguration (data keys: foo)"),
        "{}",
        out(&o)
    );
}

const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

#[test]
fn plugin_config_for_a_plugin_that_does_not_exist_is_an_error() {
    let (o, path) = validate(
        &format!(
            "{HEAD}profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourceFit\n    args: {{}}\n"
        ),
        "unknown.yaml",
    );
    assert_eq!(o.status.code(), Some(1));
    let text = out(&o);
    assert!(
        text.contains(&format!("{path}:6:11: profiles[0].pluginConfig[0].name: pluginConfig for \"NodeResourceFit\": no plugin has this name, so the entry can never take effect\n     fix: did you mean `NodeResourcesFit`?")),
        "{text}"
    );
}

#[test]
fn profiles_in_file_order_one_warning_prefix_and_no_empty_score_line() {
    let (o, _) = validate(
        &format!(
            "{HEAD}profiles:\n- schedulerName: zeta\n- schedulerName: alpha\n  plugins:\n    multiPoint:\n      disabled: [{{name: InterPodAffinity}}]\n    score:\n      disabled: [{{name: \"*\"}}]\n  pluginConfig:\n  - name: InterPodAffinity\n    args: {{hardPodAffinityWeight: 2}}\n"
        ),
        "order.yaml",
    );
    let text = out(&o);
    assert!(o.status.success(), "{text}");
    assert!(!text.contains("warning: warning:"), "{text}");
    assert!(text.contains("warning: "), "{text}");
    let zeta = text.find("profile \"zeta\"").unwrap();
    let alpha = text.find("profile \"alpha\"").unwrap();
    assert!(zeta < alpha, "{text}");
    assert!(
        text.contains("profile \"alpha\": ok (14 filters; no score plugins)"),
        "{text}"
    );
}

/// A "billion laughs" config (nine aliases per level, nine levels: 9^9 strings from a few
/// hundred bytes) is refused quickly by every command that reads a config, and inside a
/// ConfigMap, with the file, the line and the fix.
#[test]
fn an_alias_bomb_is_refused_by_every_command() {
    let mut bomb = String::from(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
    );
    bomb.push_str("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for l in 1..9u8 {
        let (name, prev) = ((b'a' + l) as char, (b'a' + l - 1) as char);
        let refs = vec![format!("*{prev}"); 9].join(", ");
        bomb.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    let check = |o: &Output, path: &str| {
        let text = out(o);
        assert_eq!(o.status.code(), Some(1), "{text}");
        assert!(text.contains(&format!("{path}:")), "{text}");
        assert!(text.contains("YAML aliases expand to more than"), "{text}");
        assert!(text.contains("fix: write the values out"), "{text}");
    };
    let (o, path) = validate(&bomb, "bomb.yaml");
    check(&o, &path);
    for cmd in [&["simulate", "--config"][..], &["run", "--config"]] {
        let o = Command::new(BIN).args(cmd).arg(&path).output().unwrap();
        check(&o, &path);
    }
    // Embedded in a ConfigMap.
    let indented: String = bomb.lines().map(|l| format!("    {l}\n")).collect();
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: s, namespace: kube-system}}\ndata:\n  config.yaml: |\n{indented}"
    );
    let (o, path) = validate(&cm, "cm-bomb.yaml");
    check(&o, &path);
    assert!(out(&o).contains("data[config.yaml]"), "{}", out(&o));
}
