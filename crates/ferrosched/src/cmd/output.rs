//! `-o table|json|yaml`, the one output flag of every subcommand that prints results.

use clap::ValueEnum;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable.
    Table,
    Json,
    Yaml,
}

impl Output {
    /// `value` as JSON or YAML; `None` for a table, which each command renders itself.
    pub fn serialize<T: Serialize>(self, value: &T) -> Option<String> {
        match self {
            Output::Table => None,
            // Every type printed is plain data, which both serializers always handle.
            Output::Json => Some(format!(
                "{}\n",
                serde_json::to_string_pretty(value).expect("serializes to JSON")
            )),
            Output::Yaml => Some(serde_saphyr::to_string(value).expect("serializes to YAML")),
        }
    }
}

/// A table column's width: its widest cell, and at least `min` (the header's width).
pub fn column_width(cells: impl Iterator<Item = usize>, min: usize) -> usize {
    cells.max().unwrap_or(min).max(min)
}
