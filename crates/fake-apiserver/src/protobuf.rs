//! Nodes and pods in Kubernetes' protobuf encoding, as kube-apiserver serves them to a
//! client whose Accept header puts `application/vnd.kubernetes.protobuf` first
//! (kube-scheduler's, and ferrosched's pod and node informers): lists as `k8s\0` +
//! `runtime.Unknown{typeMeta, raw}` around a NodeList or PodList, watches as
//! 4-byte-length-prefixed WatchEvent frames whose object is such an envelope around the
//! object.
//!
//! The store keeps JSON; an object is encoded field by field from a schema of its message
//! (field numbers of k8s.io/api core/v1 and apimachinery meta/v1; the Pod's in [`pod`]). A
//! list holding an object with a field the schema lacks is served as JSON instead (the
//! client decodes by Content-Type), and such an object in a watch becomes an ERROR event
//! naming the field, so a test never sees an object silently missing a field. Other kinds
//! are always JSON.

mod pod;

use serde_json::Value;

pub(crate) const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
pub(crate) const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether the Accept header's first media type is protobuf (as the real server
/// negotiates: the first type it can serve wins; it serves protobuf for built-in kinds).
pub(crate) fn wanted(accept: Option<&str>) -> bool {
    accept
        .and_then(|a| a.split(',').next())
        .map(|t| t.split(';').next().unwrap_or("").trim())
        == Some(CONTENT_TYPE)
}

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    Time,
    Msg(&'static [Field]),
    RepStr,
    /// repeated int32/int64, one varint per element (proto2 does not pack).
    RepInt,
    /// A `resource.Quantity` (its string, field 1).
    Quantity,
    /// An `intstr.IntOrString`: type 1 (0 int, 1 string), intVal 2, strVal 3; JSON holds
    /// either a number or a string.
    IntOrString,
    /// A message Go embeds inline: its fields sit in the parent's JSON object.
    Inline(&'static [Field]),
    RepMsg(&'static [Field]),
    MapStr,
    MapQuantity,
    /// `fieldsV1`: a JSON object carried as its JSON bytes in `FieldsV1.Raw`.
    RawJson,
}

type Field = (&'static str, u32, Kind);

use Kind::*;

const OWNER_REFERENCE: &[Field] = &[
    ("kind", 1, Str),
    ("name", 3, Str),
    ("uid", 4, Str),
    ("apiVersion", 5, Str),
    ("controller", 6, Bool),
    ("blockOwnerDeletion", 7, Bool),
];
const MANAGED_FIELDS: &[Field] = &[
    ("manager", 1, Str),
    ("operation", 2, Str),
    ("apiVersion", 3, Str),
    ("time", 4, Time),
    ("fieldsType", 6, Str),
    ("fieldsV1", 7, RawJson),
    ("subresource", 8, Str),
];
const OBJECT_META: &[Field] = &[
    ("name", 1, Str),
    ("generateName", 2, Str),
    ("namespace", 3, Str),
    ("selfLink", 4, Str),
    ("uid", 5, Str),
    ("resourceVersion", 6, Str),
    ("generation", 7, Int),
    ("creationTimestamp", 8, Time),
    ("deletionTimestamp", 9, Time),
    ("deletionGracePeriodSeconds", 10, Int),
    ("labels", 11, MapStr),
    ("annotations", 12, MapStr),
    ("ownerReferences", 13, RepMsg(OWNER_REFERENCE)),
    ("finalizers", 14, RepStr),
    ("managedFields", 17, RepMsg(MANAGED_FIELDS)),
];
const TAINT: &[Field] = &[
    ("key", 1, Str),
    ("value", 2, Str),
    ("effect", 3, Str),
    ("timeAdded", 4, Time),
];
const NODE_SPEC: &[Field] = &[
    ("podCIDR", 1, Str),
    ("externalID", 2, Str),
    ("providerID", 3, Str),
    ("unschedulable", 4, Bool),
    ("taints", 5, RepMsg(TAINT)),
    ("podCIDRs", 7, RepStr),
];
const CONDITION: &[Field] = &[
    ("type", 1, Str),
    ("status", 2, Str),
    ("lastHeartbeatTime", 3, Time),
    ("lastTransitionTime", 4, Time),
    ("reason", 5, Str),
    ("message", 6, Str),
];
const ADDRESS: &[Field] = &[("type", 1, Str), ("address", 2, Str)];
const DAEMON_ENDPOINT: &[Field] = &[("Port", 1, Int)];
const DAEMON_ENDPOINTS: &[Field] = &[("kubeletEndpoint", 1, Msg(DAEMON_ENDPOINT))];
const NODE_INFO: &[Field] = &[
    ("machineID", 1, Str),
    ("systemUUID", 2, Str),
    ("bootID", 3, Str),
    ("kernelVersion", 4, Str),
    ("osImage", 5, Str),
    ("containerRuntimeVersion", 6, Str),
    ("kubeletVersion", 7, Str),
    ("kubeProxyVersion", 8, Str),
    ("operatingSystem", 9, Str),
    ("architecture", 10, Str),
];
const IMAGE: &[Field] = &[("names", 1, RepStr), ("sizeBytes", 2, Int)];
const ATTACHED_VOLUME: &[Field] = &[("name", 1, Str), ("devicePath", 2, Str)];
const NODE_STATUS: &[Field] = &[
    ("capacity", 1, MapQuantity),
    ("allocatable", 2, MapQuantity),
    ("phase", 3, Str),
    ("conditions", 4, RepMsg(CONDITION)),
    ("addresses", 5, RepMsg(ADDRESS)),
    ("daemonEndpoints", 6, Msg(DAEMON_ENDPOINTS)),
    ("nodeInfo", 7, Msg(NODE_INFO)),
    ("images", 8, RepMsg(IMAGE)),
    ("volumesInUse", 9, RepStr),
    ("volumesAttached", 10, RepMsg(ATTACHED_VOLUME)),
    ("declaredFeatures", 14, RepStr),
];
const NODE: &[Field] = &[
    ("metadata", 1, Msg(OBJECT_META)),
    ("spec", 2, Msg(NODE_SPEC)),
    ("status", 3, Msg(NODE_STATUS)),
];

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes_field(out: &mut Vec<u8>, number: u32, b: &[u8]) {
    varint(out, (u64::from(number) << 3) | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn varint_field(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

/// RFC 3339 (`2026-11-27T09:14:42Z`, fraction and offset allowed) to whole seconds since
/// the epoch.
fn seconds(s: &str, path: &str) -> Result<i64, String> {
    let bad = || format!("{path}: {s:?} is not an RFC 3339 time");
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        s.get(r).and_then(|x| x.parse().ok()).ok_or_else(bad)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = s.get(19..).ok_or_else(bad)?;
    let rest = rest.trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let oh: i64 = o[1..3].parse().map_err(|_| bad())?;
            let om: i64 = o[4..6].parse().map_err(|_| bad())?;
            sign * (oh * 3600 + om * 60)
        }
        _ => return Err(bad()),
    };
    // Days since 1970-01-01 of a proleptic Gregorian date.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok(days * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

fn message(v: &Value, schema: &[Field], path: &str) -> Result<Vec<u8>, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("{path}: not an object"))?;
    let mut out = Vec::new();
    // Field-number order, as Go writes them.
    let mut fields: Vec<&Field> = schema.iter().collect();
    fields.sort_by_key(|f| f.1);
    let known = |key: &str| {
        schema.iter().any(|f| match f.2 {
            Inline(inner) => inner.iter().any(|g| g.0 == key),
            _ => f.0 == key,
        })
    };
    for key in obj.keys() {
        if !known(key) && !(path.is_empty() && (key == "apiVersion" || key == "kind")) {
            return Err(format!("{path}.{key}: no protobuf encoding in the fake"));
        }
    }
    for &(name, number, kind) in fields {
        if let Inline(inner) = kind {
            // Go writes the embedded message whole, empty or not.
            let part: serde_json::Map<String, Value> = obj
                .iter()
                .filter(|(k, _)| inner.iter().any(|g| g.0 == k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            bytes_field(
                &mut out,
                number,
                &message(&Value::Object(part), inner, path)?,
            );
            continue;
        }
        let Some(x) = obj.get(name).filter(|x| !x.is_null()) else {
            continue;
        };
        let p = format!("{path}.{name}");
        match kind {
            Inline(_) => unreachable!("handled above"),
            RepInt => {
                for n in x.as_array().ok_or(&p)? {
                    varint_field(&mut out, number, n.as_i64().ok_or(&p)? as u64);
                }
            }
            Quantity => {
                let mut q = Vec::new();
                bytes_field(&mut q, 1, x.as_str().ok_or(&p)?.as_bytes());
                bytes_field(&mut out, number, &q);
            }
            IntOrString => {
                let mut v = Vec::new();
                if let Some(n) = x.as_i64() {
                    varint_field(&mut v, 1, 0);
                    varint_field(&mut v, 2, n as u64);
                } else {
                    varint_field(&mut v, 1, 1);
                    bytes_field(&mut v, 3, x.as_str().ok_or(&p)?.as_bytes());
                }
                bytes_field(&mut out, number, &v);
            }
            Str => bytes_field(&mut out, number, x.as_str().ok_or(&p)?.as_bytes()),
            Int => varint_field(&mut out, number, x.as_i64().ok_or(&p)? as u64),
            Bool => varint_field(&mut out, number, u64::from(x.as_bool().ok_or(&p)?)),
            Time => {
                let s = seconds(x.as_str().ok_or(&p)?, &p)?;
                let mut t = Vec::new();
                varint_field(&mut t, 1, s as u64);
                varint_field(&mut t, 2, 0);
                bytes_field(&mut out, number, &t);
            }
            Msg(inner) => bytes_field(&mut out, number, &message(x, inner, &p)?),
            RepStr => {
                for s in x.as_array().ok_or(&p)? {
                    bytes_field(&mut out, number, s.as_str().ok_or(&p)?.as_bytes());
                }
            }
            RepMsg(inner) => {
                for m in x.as_array().ok_or(&p)? {
                    bytes_field(&mut out, number, &message(m, inner, &p)?);
                }
            }
            MapStr | MapQuantity => {
                // serde_json's map is sorted by key, as Go writes map entries.
                for (k, val) in x.as_object().ok_or(&p)? {
                    let val = val.as_str().ok_or(&p)?;
                    let mut entry = Vec::new();
                    bytes_field(&mut entry, 1, k.as_bytes());
                    if matches!(kind, MapQuantity) {
                        let mut q = Vec::new();
                        bytes_field(&mut q, 1, val.as_bytes());
                        bytes_field(&mut entry, 2, &q);
                    } else {
                        bytes_field(&mut entry, 2, val.as_bytes());
                    }
                    bytes_field(&mut out, number, &entry);
                }
            }
            RawJson => {
                let mut raw = Vec::new();
                bytes_field(&mut raw, 1, x.to_string().as_bytes());
                bytes_field(&mut out, number, &raw);
            }
        }
    }
    Ok(out)
}

/// `k8s\0` + Unknown{ typeMeta{apiVersion, kind}, raw }.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    bytes_field(&mut type_meta, 1, api_version.as_bytes());
    bytes_field(&mut type_meta, 2, kind.as_bytes());
    let mut out = b"k8s\0".to_vec();
    bytes_field(&mut out, 1, &type_meta);
    bytes_field(&mut out, 2, raw);
    out
}

/// The message schema and kind of the collections the fake encodes.
fn schema_of(collection: &str) -> Option<(&'static [Field], &'static str)> {
    match collection {
        "nodes" => Some((NODE, "Node")),
        "pods" => Some((pod::POD, "Pod")),
        _ => None,
    }
}

/// Whether the fake can answer `collection` in protobuf.
pub(crate) fn encodes(collection: &str) -> bool {
    schema_of(collection).is_some()
}

/// An object of `collection` as its message, or why the fake cannot encode it.
pub(crate) fn object(collection: &str, v: &Value) -> Result<Vec<u8>, String> {
    let (schema, _) = schema_of(collection).ok_or_else(|| format!("{collection}: not encoded"))?;
    message(v, schema, "")
}

/// A NodeList or PodList body, or why not (then the caller answers JSON).
pub(crate) fn list(
    collection: &str,
    items: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
) -> Result<Vec<u8>, String> {
    let (_, kind) = schema_of(collection).ok_or_else(|| format!("{collection}: not encoded"))?;
    let mut list = Vec::new();
    let mut meta = Vec::new();
    bytes_field(&mut meta, 2, resource_version.as_bytes());
    if let Some(c) = continue_token {
        bytes_field(&mut meta, 3, c.as_bytes());
    }
    bytes_field(&mut list, 1, &meta);
    for item in items {
        bytes_field(&mut list, 2, &object(collection, item)?);
    }
    Ok(envelope("v1", &format!("{kind}List"), &list))
}

/// One watch frame: length, then WatchEvent{type, RawExtension{raw: envelope(object)}}.
/// `object` is one of `collection`, or a Status for ERROR events. None: the object cannot
/// be encoded.
pub(crate) fn watch_frame(collection: &str, type_: &str, object: &Value) -> Option<Vec<u8>> {
    let default_kind = schema_of(collection).map_or("Status", |(_, k)| k);
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(default_kind);
    let raw = if kind == "Status" {
        let mut s = Vec::new();
        for (name, number) in [("status", 2), ("message", 3), ("reason", 4)] {
            if let Some(x) = object.get(name).and_then(Value::as_str) {
                bytes_field(&mut s, number, x.as_bytes());
            }
        }
        if let Some(code) = object.get("code").and_then(Value::as_i64) {
            varint_field(&mut s, 6, code as u64);
        }
        s
    } else {
        self::object(collection, object).ok()?
    };
    let mut ext = Vec::new();
    bytes_field(&mut ext, 1, &envelope("v1", kind, &raw));
    let mut event = Vec::new();
    bytes_field(&mut event, 1, type_.as_bytes());
    bytes_field(&mut event, 2, &ext);
    let mut out = (event.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&event);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accept_negotiation_takes_the_first_type() {
        assert!(wanted(Some(
            "application/vnd.kubernetes.protobuf, application/json"
        )));
        assert!(wanted(Some(
            "application/vnd.kubernetes.protobuf;stream=watch"
        )));
        assert!(!wanted(Some(
            "application/json, application/vnd.kubernetes.protobuf"
        )));
        assert!(!wanted(Some("*/*")));
        assert!(!wanted(None));
    }

    #[test]
    fn times_are_seconds_since_the_epoch() {
        assert_eq!(seconds("1970-01-01T00:00:00Z", "t").unwrap(), 0);
        assert_eq!(seconds("2026-11-27T09:14:42Z", "t").unwrap(), 1_795_770_882);
        assert_eq!(
            seconds("2000-02-29T12:00:00.5+01:00", "t").unwrap(),
            951_822_000
        );
        assert!(seconds("yesterday", "t").is_err());
    }

    #[test]
    fn a_node_with_a_field_the_schema_lacks_is_refused_with_its_path() {
        let n = json!({"metadata": {"name": "a"}, "spec": {"configSource": {}}});
        let e = object("nodes", &n).unwrap_err();
        assert!(e.contains(".spec.configSource"), "{e}");
        assert!(
            object(
                "nodes",
                &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}})
            )
            .is_ok()
        );
    }

    #[test]
    fn a_pods_inline_messages_are_nested_and_unknown_fields_refused() {
        // A Volume's source sits in the volume's JSON but is message 2 of the Volume.
        let p = json!({"spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}});
        let claim = [(1 << 3) | 2, 1, b'c'];
        let mut source = vec![(10 << 3) | 2, claim.len() as u8];
        source.extend_from_slice(&claim);
        let mut volume = vec![(1 << 3) | 2, 1, b'v', (2 << 3) | 2, source.len() as u8];
        volume.extend_from_slice(&source);
        let mut spec = vec![(1 << 3) | 2, volume.len() as u8];
        spec.extend_from_slice(&volume);
        let mut want = vec![(2 << 3) | 2, spec.len() as u8];
        want.extend_from_slice(&spec);
        assert_eq!(object("pods", &p).unwrap(), want);
        // A probe's handler and an int-or-string port.
        let c = json!({"spec": {"containers": [{"name": "a",
            "livenessProbe": {"httpGet": {"port": 8080}, "periodSeconds": 5}}]}});
        assert!(object("pods", &c).is_ok());
        let bad = json!({"spec": {"containers": [{"name": "a", "livenessProbe": {"htpGet": {}}}]}});
        let e = object("pods", &bad).unwrap_err();
        assert!(e.contains(".spec.containers.livenessProbe.htpGet"), "{e}");
        assert!(
            list("pods", &[bad], "1", None).is_err(),
            "served as JSON instead"
        );
    }
}
