//! Typed reading of the spanned tree that keeps going after a problem, so one load reports
//! every unknown field and wrong type at once.

use std::time::Duration;

use super::duration::parse_go_duration;
use super::messages as msg;
use super::spans::{Report, child, index};
use super::suggest::closest;
use super::yaml_tree::{Entry, Node, Value};

/// A mapping read as an object with a fixed set of fields.
pub(crate) struct Obj<'n> {
    entries: &'n [Entry],
    pub path: String,
}

impl<'n> Obj<'n> {
    /// The field's value; null counts as absent (as `null` does for Go pointers).
    pub fn get(&self, name: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|e| e.key == name)
            .map(|e| &e.value)
            .filter(|n| !n.is_null())
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn path(&self, name: &str) -> String {
        child(&self.path, name)
    }
}

impl Report {
    /// Reads `node` as an object with `fields`; every other key is reported with a
    /// suggestion. `null` reads as an empty object.
    pub fn object<'n>(&mut self, node: &'n Node, path: &str, fields: &[&str]) -> Option<Obj<'n>> {
        self.spans.record(path, node.pos);
        let entries: &'n [Entry] = match &node.value {
            Value::Map(entries) => entries,
            Value::Null => &[],
            _ => {
                self.error(path, msg::expected("a mapping", node))
                    .hint(msg::FIX_EXPECTED_MAPPING);
                return None;
            }
        };
        for (i, e) in entries.iter().enumerate() {
            let p = child(path, &e.key);
            if entries[..i].iter().any(|x| x.key == e.key) {
                self.error_at(e.key_pos, &p, msg::duplicate_key(&e.key))
                    .hint(msg::FIX_DUPLICATE_KEY);
                continue;
            }
            if fields.contains(&e.key.as_str()) {
                // Block collections start on the next line; their key is what to point at.
                let pos = match e.value.value {
                    Value::Map(_) | Value::Seq(_) => e.key_pos,
                    _ => e.value.pos,
                };
                self.spans.record(&p, pos.or(e.value.pos));
                continue;
            }
            let err = self.error_at(e.key_pos, &p, msg::unknown_field(&e.key));
            if let Some(removed) = msg::removed_field(path, &e.key) {
                err.hint(removed);
            } else if let Some(s) = closest(&e.key, fields.iter().copied()) {
                err.hint(format!("did you mean `{s}`?"));
            } else {
                err.hint(format!(
                    "valid fields here are: {}",
                    fields
                        .iter()
                        .filter(|f| !matches!(**f, "apiVersion" | "kind"))
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Some(Obj {
            entries,
            path: path.to_string(),
        })
    }

    pub fn list<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n [Node]> {
        match &node.value {
            Value::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    self.spans.record(&index(path, i), item.pos);
                }
                Some(items)
            }
            Value::Null => Some(&[]),
            _ => {
                self.error(path, msg::expected("a list", node))
                    .hint(msg::FIX_EXPECTED_LIST);
                None
            }
        }
    }

    fn integer(&mut self, node: &Node, path: &str, min: i64, max: i64, ty: &str) -> Option<i64> {
        match &node.value {
            Value::Int(i) if (min..=max).contains(i) => Some(*i),
            Value::Int(i) => {
                self.error(path, msg::int_out_of_range(*i, ty));
                None
            }
            Value::Float(x) if x.fract() == 0.0 && x.is_finite() && x.abs() < 1e18 => {
                self.error(path, msg::expected("an integer", node))
                    .hint(format!("write it without a decimal point: {}", *x as i64));
                None
            }
            Value::Str(s) if s.trim().parse::<i64>().is_ok() => {
                self.error(path, msg::expected("an integer", node))
                    .hint(format!("remove the quotes: {}", s.trim()));
                None
            }
            _ => {
                self.error(path, msg::expected("an integer", node));
                None
            }
        }
    }

    pub fn int32(&mut self, node: &Node, path: &str) -> Option<i32> {
        self.integer(node, path, i32::MIN.into(), i32::MAX.into(), "int32")
            .map(|i| i as i32)
    }

    pub fn int64(&mut self, node: &Node, path: &str) -> Option<i64> {
        self.integer(node, path, i64::MIN, i64::MAX, "int64")
    }

    pub fn float32(&mut self, node: &Node, path: &str) -> Option<f32> {
        match &node.value {
            Value::Int(i) => Some(*i as f32),
            Value::Float(x) if x.is_finite() && x.abs() <= f64::from(f32::MAX) => Some(*x as f32),
            Value::Float(_) => {
                self.error(
                    path,
                    msg::invalid(&node.describe(), "must be a finite number"),
                );
                None
            }
            _ => {
                self.error(path, msg::expected("a number", node));
                None
            }
        }
    }

    pub fn boolean(&mut self, node: &Node, path: &str) -> Option<bool> {
        match &node.value {
            Value::Bool(b) => Some(*b),
            // YAML 1.1 spellings that Go's YAML reader (used by kube-scheduler) accepts.
            Value::Str(s) if matches!(s.as_str(), "yes" | "Yes" | "YES" | "on" | "On" | "ON") => {
                Some(true)
            }
            Value::Str(s) if matches!(s.as_str(), "no" | "No" | "NO" | "off" | "Off" | "OFF") => {
                Some(false)
            }
            _ => {
                self.error(path, msg::expected("a boolean (true or false)", node));
                None
            }
        }
    }

    pub fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                let text = match &node.value {
                    Value::Int(i) => i.to_string(),
                    Value::Float(x) => x.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => unreachable!(),
                };
                self.error(path, msg::expected("a string", node))
                    .hint(format!("quote it: \"{text}\""));
                None
            }
            _ => {
                self.error(path, msg::expected("a string", node));
                None
            }
        }
    }

    pub fn string_list(&mut self, node: &Node, path: &str) -> Vec<String> {
        let Some(items) = self.list(node, path) else {
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, n)| self.string(n, &index(path, i)))
            .collect()
    }

    pub fn duration(&mut self, node: &Node, path: &str) -> Option<Duration> {
        if let Value::Int(i) = node.value {
            self.error(path, format!("missing unit in duration {i}"))
                .hint(msg::FIX_DURATION);
            return None;
        }
        let text = self.string(node, path)?;
        match parse_go_duration(&text) {
            Ok(d) => Some(d),
            Err(e) if e.contains("negative") => {
                self.error(
                    path,
                    msg::invalid(&format!("{text:?}"), msg::GREATER_THAN_ZERO),
                );
                None
            }
            Err(e) => {
                self.error(path, e).hint(msg::FIX_DURATION);
                None
            }
        }
    }
}

/// Shorthand: decode optional field `name` of `obj` with `f`.
macro_rules! field {
    ($r:expr, $obj:expr, $name:literal, $f:ident) => {
        match $obj.get($name) {
            Some(n) => {
                let p = $obj.path($name);
                $r.$f(n, &p)
            }
            None => None,
        }
    };
}
pub(crate) use field;
