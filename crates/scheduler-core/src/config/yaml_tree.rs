//! The spanned value tree every config document is parsed into before typed decoding.
//!
//! serde stops at the first problem and loses positions inside untyped values, so the
//! decoder walks this tree instead and can report every problem with its line and column.

use std::fmt;

/// A 1-based line and column in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One YAML/JSON value with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub pos: Option<Pos>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

/// A mapping entry; keys are always scalars in a config, kept as text.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub key_pos: Option<Pos>,
    pub value: Node,
}

impl Node {
    pub fn new(value: Value, pos: Option<Pos>) -> Self {
        Node { value, pos }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Null)
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|e| e.key == key).map(|e| &e.value),
            _ => None,
        }
    }

    /// A short description of the value for "expected X, got Y" messages.
    pub fn describe(&self) -> String {
        match &self.value {
            Value::Null => "null".to_string(),
            Value::Bool(b) => format!("boolean {b}"),
            Value::Int(i) => format!("integer {i}"),
            Value::Float(x) => format!("number {x}"),
            Value::Str(s) => format!("string {s:?}"),
            Value::Seq(_) => "a list".to_string(),
            Value::Map(_) => "a mapping".to_string(),
        }
    }

    /// Converts the subtree to JSON for types deserialized with serde (k8s-openapi).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(x) => serde_json::Number::from_f64(*x).map_or(J::Null, J::Number),
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => J::Object(
                entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.to_json()))
                    .collect(),
            ),
        }
    }
}
