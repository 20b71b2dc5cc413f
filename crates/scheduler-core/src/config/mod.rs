//! TEMPORARY stub: replaced by the real config module (branch `config`).

#[derive(Clone, Debug, PartialEq)]
pub enum PluginArgs {}
