//! `metadata.managedFields`, as a real API server records them on every write: one entry per
//! (manager, operation, subresource) with the set of fields that write touched, in the
//! FieldsV1 form (`f:<field>`, `k:{...}` for list items with keys, `.` for the item itself).
//!
//! The sets here are taken from the JSON written (the whole object on create and replace,
//! the patch body on patch) rather than from server-side apply's merge, so ownership is
//! approximate; what matters to clients is that every object and watch event carries
//! entries of realistic size, as from a real server.

use serde_json::{Map, Value, json};

/// Metadata the server sets itself; never part of a client's field set.
const SERVER_META: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
];

/// The field manager of a request: `?fieldManager=` if given, else the first word of the
/// User-Agent up to `/` (as the API server defaults it), else "unknown".
pub(crate) fn manager(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    user_agent
        .and_then(|ua| ua.split('/').next())
        .filter(|m| !m.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// Records that `manager` wrote `written` (the object or patch sent) on `object`: its entry
/// for this operation and subresource gains those fields. `subresource` is `Some("status")`
/// for status writes.
pub(crate) fn record(
    object: &mut Value,
    manager: &str,
    written: &Value,
    subresource: Option<&str>,
) {
    let mut fields = Map::new();
    if let Some(w) = written.as_object() {
        for (k, v) in w {
            if matches!(k.as_str(), "apiVersion" | "kind") {
                continue;
            }
            let set = if k == "metadata" {
                let mut meta = v.clone();
                if let Some(m) = meta.as_object_mut() {
                    m.retain(|k, _| !SERVER_META.contains(&k.as_str()));
                    // Name and namespace identify the object; the server does not list them.
                    m.remove("name");
                    m.remove("namespace");
                }
                field_set(&meta, false)
            } else {
                field_set(v, false)
            };
            if set.as_object().is_some_and(|m| !m.is_empty()) || !v.is_object() {
                fields.insert(format!("f:{k}"), set);
            }
        }
    }
    if fields.is_empty() {
        return;
    }
    let api_version = object["apiVersion"].clone();
    let meta = &mut object["metadata"];
    if !meta["managedFields"].is_array() {
        meta["managedFields"] = json!([]);
    }
    let entries = meta["managedFields"].as_array_mut().expect("an array");
    let same = |e: &Value| {
        e["manager"] == manager
            && e["operation"] == "Update"
            && e["subresource"].as_str() == subresource
    };
    let fields = Value::Object(fields);
    match entries.iter_mut().find(|e| same(e)) {
        Some(e) => {
            merge(&mut e["fieldsV1"], &fields);
            e["time"] = json!("2026-01-01T00:00:00Z");
        }
        None => {
            let mut e = json!({
                "manager": manager, "operation": "Update", "apiVersion": api_version,
                "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields,
            });
            if let Some(s) = subresource {
                e["subresource"] = json!(s);
            }
            entries.push(e);
        }
    }
}

/// The FieldsV1 set of a written value. `item`: the value is a map inside a list or map
/// and owns itself (`"."`).
fn field_set(v: &Value, item: bool) -> Value {
    let mut out = Map::new();
    match v {
        Value::Object(m) => {
            if item {
                out.insert(".".into(), json!({}));
            }
            for (k, child) in m {
                out.insert(format!("f:{k}"), field_set(child, child.is_object()));
            }
        }
        Value::Array(items) => {
            for it in items {
                if let Some(key) = list_key(it) {
                    out.insert(format!("k:{key}"), field_set(it, true));
                }
            }
        }
        _ => {}
    }
    Value::Object(out)
}

/// The key of a list item for an associative list (`name`, `type`, `containerPort`), as
/// the JSON the API server writes after `k:`; `None` for atomic lists.
fn list_key(item: &Value) -> Option<String> {
    let m = item.as_object()?;
    for key in ["name", "type", "containerPort", "devicePath", "mountPath"] {
        if let Some(v) = m.get(key) {
            let mut k = Map::new();
            k.insert(key.to_string(), v.clone());
            if key == "containerPort"
                && let Some(p) = m.get("protocol")
            {
                k.insert("protocol".into(), p.clone());
            }
            return Some(Value::Object(k).to_string());
        }
    }
    None
}

fn merge(target: &mut Value, add: &Value) {
    match (target, add) {
        (Value::Object(t), Value::Object(a)) => {
            for (k, v) in a {
                merge(t.entry(k.clone()).or_insert_with(|| json!({})), v);
            }
        }
        (t, a) => *t = a.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manager_comes_from_the_parameter_then_the_user_agent() {
        assert_eq!(manager(Some("bench"), Some("kube-rs/5")), "bench");
        assert_eq!(
            manager(None, Some("kube-scheduler/v1.28.7 (linux)")),
            "kube-scheduler"
        );
        assert_eq!(manager(Some(""), None), "unknown");
    }

    #[test]
    fn a_create_records_the_fields_written_with_list_keys() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i",
                "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
                "tolerations": [{"key": "k", "operator": "Exists"}]}
        });
        let mut stored = pod.clone();
        record(&mut stored, "bench", &pod, None);
        let e = &stored["metadata"]["managedFields"][0];
        assert_eq!(e["manager"], "bench");
        assert_eq!(e["operation"], "Update");
        assert_eq!(e["apiVersion"], "v1");
        assert!(e.get("subresource").is_none());
        let f = &e["fieldsV1"];
        assert_eq!(f["f:metadata"], json!({"f:labels": {".": {}, "f:app": {}}}));
        let c = &f["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
        assert_eq!(c["f:image"], json!({}));
        assert!(c["f:ports"]["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"].is_object());
        // Tolerations are an atomic list: owned as a whole.
        assert_eq!(f["f:spec"]["f:tolerations"], json!({}));
    }

    #[test]
    fn a_status_write_gets_its_own_entry_and_repeats_merge() {
        let mut pod = json!({"apiVersion": "v1", "metadata": {"name": "p"}});
        record(&mut pod, "bench", &json!({"spec": {"nodeName": "n"}}), None);
        let status =
            json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}});
        record(&mut pod, "ferrosched", &status, Some("status"));
        record(
            &mut pod,
            "ferrosched",
            &json!({"status": {"nominatedNodeName": "n"}}),
            Some("status"),
        );
        let entries = pod["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1]["subresource"], "status");
        let s = &entries[1]["fieldsV1"]["f:status"];
        assert!(s["f:conditions"]["k:{\"type\":\"PodScheduled\"}"].is_object());
        assert_eq!(s["f:nominatedNodeName"], json!({}));
    }
}
