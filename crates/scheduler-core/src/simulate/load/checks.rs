//! What the API server would have refused before a dump could hold it: invalid resource
//! quantities (a `cpu: 500mm` changes placements silently otherwise), negative ones on pods
//! and nodes (a pod requesting `cpu: -1` would fit anywhere) and the same object twice
//! (overlapping dump files).

use serde_json::Value;

use crate::types::parse_quantity;

/// Upstream's message for a negative quantity (apimachinery's IsNegativeErrorMsg).
const NEGATIVE: &str = "must be greater than or equal to 0";

/// One invalid quantity: the field path as the API server names it, and its message.
pub(super) struct BadQuantity {
    pub path: String,
    pub value: String,
    pub key: String,
    pub message: String,
}

/// Every invalid quantity in an object of `kind`.
pub(super) fn bad_quantities(kind: &str, v: &Value) -> Vec<BadQuantity> {
    let mut out = Vec::new();
    // Pods' requests, limits and overhead and nodes' capacity and allocatable must not be
    // negative (upstream's ValidateResourceQuantityValue); the other kinds' quantities
    // have rules of their own, not checked here.
    let nonnegative = matches!(kind, "Pod" | "Node");
    let mut check = |path: String, list: Option<&Value>| {
        let Some(Value::Object(m)) = list else {
            return;
        };
        for (name, q) in m {
            let text = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            let message = match parse_quantity(&text) {
                Err(e) => e.to_string(),
                Ok(q) if nonnegative && q.nanos() < 0 => NEGATIVE.to_string(),
                Ok(_) => continue,
            };
            out.push(BadQuantity {
                path: format!("{path}[{name}]"),
                value: text,
                key: name.clone(),
                message,
            });
        }
    };
    let at = |v: &Value, path: &[&str]| -> Option<Value> {
        let mut cur = v;
        for p in path {
            cur = cur.get(p)?;
        }
        Some(cur.clone())
    };
    match kind {
        "Pod" => {
            for list in ["initContainers", "containers", "ephemeralContainers"] {
                if let Some(Value::Array(cs)) = at(v, &["spec", list]) {
                    for (i, c) in cs.iter().enumerate() {
                        for which in ["requests", "limits"] {
                            check(
                                format!("spec.{list}[{i}].resources.{which}"),
                                at(c, &["resources", which]).as_ref(),
                            );
                        }
                    }
                }
            }
            for which in ["requests", "limits"] {
                check(
                    format!("spec.resources.{which}"),
                    at(v, &["spec", "resources", which]).as_ref(),
                );
            }
            check(
                "spec.overhead".into(),
                at(v, &["spec", "overhead"]).as_ref(),
            );
        }
        "Node" => {
            for which in ["allocatable", "capacity"] {
                check(
                    format!("status.{which}"),
                    at(v, &["status", which]).as_ref(),
                );
            }
        }
        "PersistentVolume" => check(
            "spec.capacity".into(),
            at(v, &["spec", "capacity"]).as_ref(),
        ),
        "PersistentVolumeClaim" => {
            for which in ["requests", "limits"] {
                check(
                    format!("spec.resources.{which}"),
                    at(v, &["spec", "resources", which]).as_ref(),
                );
            }
        }
        _ => {}
    }
    out
}

/// Where each line of `text` starts (byte offsets); built once per file, and only when a
/// value needs its line.
pub(super) fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The line (1-based) at or after `from`, in the same document, where `key: value` is
/// written, to point at the field itself rather than at its document. `starts` is
/// [`line_starts`] of `text`: the search begins at line `from` and ends at the next `---`,
/// so a dump with thousands of bad values is not read from its top, nor to its end, for
/// each (that was quadratic: 2 s for 7,000 bad nodes in 1 MiB; found by the fuzz harness).
pub(super) fn line_of(
    text: &str,
    starts: &[usize],
    from: u32,
    key: &str,
    value: &str,
) -> Option<u32> {
    let first = from.saturating_sub(1) as usize;
    let offset = *starts.get(first)?;
    text[offset..]
        .lines()
        .enumerate()
        .take_while(|(i, l)| *i == 0 || !l.starts_with("---"))
        .find(|(_, l)| l.contains(key) && has_token(l, value))
        .map(|(i, _)| (first + i) as u32 + 1)
}

/// Whether `value` is written in `line` as a whole (`-1` is not in `-100m`).
fn has_token(line: &str, value: &str) -> bool {
    line.match_indices(value).any(|(at, _)| {
        !line[at + value.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '.')
    })
}
