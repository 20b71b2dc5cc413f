//! The one set of YAML limits every reader of user files applies: cluster dumps
//! (`simulate::load`), scheduler configs (`config::source`) and ConfigMaps (`ferrosched
//! config validate`). They are serde-saphyr's [`Budget`], which counts the events of the
//! parser and of alias replay, so an alias bomb ("billion laughs": a few hundred bytes that
//! expand to 9^9 strings) or one anchor referenced thousands of times stops at a limit
//! instead of expanding until memory runs out.
//!
//! The limits grow with the input: a file without aliases never reaches them however
//! large it is (a 5,000-node dump is millions of YAML nodes), while what aliases can add
//! is at most [`BASE_NODES`] nodes and [`BASE_SCALAR_BYTES`] bytes of text, whatever the
//! file's size. Real scheduler configs (< 100 KB) are far below both.

use serde_saphyr::budget::{Budget, BudgetBreach};
use serde_saphyr::{DuplicateKeyPolicy, MergeKeyPolicy, Options};

/// Nodes (scalars, lists, mappings) aliases may add beyond one per byte of input.
pub const BASE_NODES: usize = 250_000;
/// Bytes of scalar text aliases may add beyond the input's own.
pub const BASE_SCALAR_BYTES: usize = 16 * 1024 * 1024;

/// What to do about a breach caused by aliases.
pub const ALIAS_FIX: &str = "write the values out instead of using YAML anchors and aliases (&name / *name), or remove the aliases";

/// The budget for a text of `len` bytes.
pub fn budget(len: usize) -> Budget {
    let mut b = Budget::default();
    // One node needs at least two bytes of text ("1\n", "- "), one event per node start
    // and end: text without aliases stays under these, whatever its size.
    b.max_nodes = BASE_NODES.saturating_add(len);
    b.max_events = (4 * BASE_NODES).saturating_add(len.saturating_mul(2));
    b.max_total_scalar_bytes = BASE_SCALAR_BYTES.saturating_add(len);
    b.max_recorded_anchor_bytes = BASE_SCALAR_BYTES.saturating_add(len);
    b.max_recorded_anchor_events = BASE_NODES.saturating_add(len);
    // Documents cannot be made by aliases; a document separator is at least four bytes.
    b.max_documents = 1024usize.saturating_add(len / 4);
    b
}

/// Options for reading Kubernetes objects from `text`: YAML 1.2 booleans (a label value `no`
/// stays a string, as the API server reads it) and [`budget`].
pub fn options(text: &str) -> Options {
    let mut o = Options::default();
    o.strict_booleans = true;
    o.budget = Some(budget(text.len()));
    o.alias_limits.max_total_replayed_events = BASE_NODES.saturating_add(text.len());
    o
}

/// A refusal by the budget, as one line for the user (`None`: some other error).
pub fn explain(e: &serde_saphyr::Error) -> Option<Refusal> {
    // The reader wraps the error with a snippet of the text, and with the alias's place.
    let mut inner = e;
    while let serde_saphyr::Error::WithSnippet { error, .. }
    | serde_saphyr::Error::AliasError { error, .. } = inner
    {
        inner = error;
    }
    let (message, fix) = match inner {
        serde_saphyr::Error::Budget { breach, .. } => describe(breach, None)?,
        serde_saphyr::Error::AliasReplayLimitExceeded {
            max_total_replayed_events,
            ..
        } => (
            format!(
                "YAML aliases expand to more than {} nodes",
                thousands(*max_total_replayed_events)
            ),
            ALIAS_FIX.to_string(),
        ),
        serde_saphyr::Error::AliasReplayStackDepthExceeded { max_depth, .. } => (
            format!("YAML aliases nest more than {max_depth} deep"),
            ALIAS_FIX.to_string(),
        ),
        serde_saphyr::Error::AliasExpansionLimitExceeded {
            max_expansions_per_anchor,
            ..
        } => (
            format!(
                "a YAML anchor is referenced more than {} times",
                thousands(*max_expansions_per_anchor)
            ),
            ALIAS_FIX.to_string(),
        ),
        _ => return None,
    };
    let at = e.location();
    Some(Refusal {
        line: at.map(|l| l.line() as u32).filter(|l| *l > 0),
        column: at.map(|l| l.column() as u32).filter(|c| *c > 0),
        message,
        fix,
    })
}

/// Why a text was refused, where, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub message: String,
    pub fix: String,
}

/// Checks `text` against [`budget`] with alias replay, building nothing. For readers that
/// build their own tree from the parser's events (the config loader keeps every position).
/// Errors other than a refusal (syntax, tags) are left to the reader, which words them.
pub fn check(text: &str) -> Result<(), Refusal> {
    let mut o = options(text);
    // Nothing is built: keys are not compared and `<<` is replayed like any other value,
    // so the walk goes through the whole text whatever it holds.
    o.duplicate_keys = DuplicateKeyPolicy::PassThrough;
    o.merge_keys = MergeKeyPolicy::AsOrdinary;
    match serde_saphyr::from_str_multiple_with_options::<serde::de::IgnoredAny, Vec<_>>(text, o) {
        Ok(_) => Ok(()),
        Err(e) => explain(&e).map_or(Ok(()), Err),
    }
}

/// The limits of [`budget`] a tree builder enforces itself on what it holds, aliases
/// expanded (the backstop behind [`check`] when it stopped early on an error of its own).
pub fn tree_limits(len: usize) -> (usize, usize) {
    let b = budget(len);
    (b.max_nodes, b.max_total_scalar_bytes)
}

/// The message and fix for a tree that crossed [`tree_limits`]: `nodes` says whether the
/// node limit (or else the text limit) was crossed.
pub fn tree_breach(nodes: bool, limit: usize) -> (String, String) {
    let what = if nodes { "nodes" } else { "bytes of text" };
    (
        format!(
            "YAML aliases expand to more than {} {what}",
            thousands(limit)
        ),
        ALIAS_FIX.to_string(),
    )
}

fn describe(breach: &BudgetBreach, limit: Option<usize>) -> Option<(String, String)> {
    let over = |n: usize| thousands(limit.unwrap_or(n.saturating_sub(1)));
    let alias = |what: String| Some((what, ALIAS_FIX.to_string()));
    match breach {
        BudgetBreach::Nodes { nodes } => alias(format!(
            "YAML aliases expand to more than {} nodes",
            over(*nodes)
        )),
        BudgetBreach::Events { events } => alias(format!(
            "YAML aliases expand to more than {} parser events",
            over(*events)
        )),
        BudgetBreach::ScalarBytes { total_scalar_bytes } => alias(format!(
            "YAML aliases expand to more than {} bytes of text",
            over(*total_scalar_bytes)
        )),
        BudgetBreach::RecordedAnchorEvents {
            recorded_anchor_events,
        } => alias(format!(
            "YAML aliases expand to more than {} nodes",
            over(*recorded_anchor_events)
        )),
        BudgetBreach::RecordedAnchorBytes {
            recorded_anchor_bytes,
        } => alias(format!(
            "YAML aliases expand to more than {} bytes of text",
            over(*recorded_anchor_bytes)
        )),
        BudgetBreach::Aliases { aliases } => alias(format!(
            "the file has more than {} YAML aliases",
            over(*aliases)
        )),
        BudgetBreach::Anchors { anchors } => alias(format!(
            "the file has more than {} YAML anchors",
            over(*anchors)
        )),
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => alias(format!(
            "{} YAML aliases refer to {} anchor(s): more than 10 per anchor",
            thousands(*aliases),
            thousands(*anchors)
        )),
        BudgetBreach::MergeKeys { merge_keys } => alias(format!(
            "the file has more than {} YAML merge keys (<<)",
            over(*merge_keys)
        )),
        BudgetBreach::Depth { depth } => Some((
            format!("lists and mappings nest {depth} deep, deeper than YAML readers here allow"),
            "flatten the structure".to_string(),
        )),
        BudgetBreach::Documents { documents } => Some((
            format!("the file has more than {} documents", over(*documents)),
            "split it into several files".to_string(),
        )),
        _ => Some((
            "the file exceeds a limit of the YAML reader".to_string(),
            "write the file without anchors and aliases, or split it".to_string(),
        )),
    }
}

/// 1234567 -> "1,234,567".
fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(250_402), "250,402");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
