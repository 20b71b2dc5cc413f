//! Opportunistic batching (upstream `framework/runtime/batch.go`, KEP-5598, on by default
//! since 1.35): consecutive pods with the same scheduling signature reuse the previous pod's
//! filtered and scored node list.
//!
//! After a pod is placed, the other scored nodes are kept in score order. The next pod with
//! the same signature gets the best remaining node as a hint, but only when the node the
//! previous pod took now rejects it (so that node's score need not be recomputed: pods go
//! one per node), the previous attempt of this scheduler was that placement, and the list
//! is younger than [`MAX_BATCH_AGE`]. The hint is then filtered like a nominated node; if it
//! passes, it is chosen without scoring.
//!
//! A pod is signable when every PreFilter, Filter, PreScore and Score plugin of its profile
//! signs it ([`Plugin::sign_pod`](super::Plugin::sign_pod)); pods with inter-pod affinity,
//! topology spread constraints (their own or the profile's defaults) or DRA claims never are.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a kept node list may be reused (upstream `maxBatchAge`).
pub const MAX_BATCH_AGE: Duration = Duration::from_millis(500);

/// One plugin's part of a signature: a key naming what of the pod it looked at, and that
/// part's value.
pub type SignFragment = (&'static str, String);

/// A plugin's answer to "sign this pod".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signing {
    /// What of the pod the plugin's answers depend on (may be empty).
    Fragments(Vec<SignFragment>),
    /// The plugin's answers for this pod depend on more than the pod (other pods, other
    /// nodes): it cannot be batched.
    Unsignable(&'static str),
}

/// The scheduling signature: two pods with equal signatures get the same filter and score
/// results on the same cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSignature(pub(crate) BTreeMap<&'static str, String>);

/// Upstream's `scheduler_batch_attempts_total` results.
pub const HINT_USED: &str = "hint_used";
pub const HINT_NOT_USED: &str = "hint_not_used";
pub const NO_HINT: &str = "no_hint";

/// Why a kept list was dropped (upstream's `scheduler_batch_cache_flushed_total` reasons).
pub mod flush {
    /// Another attempt (another profile's pod, or a failure) came in between.
    pub const POD_SKIPPED: &str = "pod_skipped";
    pub const POD_INCOMPATIBLE: &str = "pod_incompatible";
    pub const EXPIRED: &str = "expired";
    pub const NODE_MISSING: &str = "node_missing";
    /// The node the previous pod took still accepts this one.
    pub const NODE_NOT_FULL: &str = "node_not_full";
    pub const POD_NOT_BATCHABLE: &str = "pod_not_batchable";
    pub const EMPTY_LIST: &str = "empty_list";
}

/// Counters for metrics and benches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Attempts by result: [`HINT_USED`], [`HINT_NOT_USED`], [`NO_HINT`].
    pub attempts: BTreeMap<&'static str, u64>,
    /// Dropped lists by [`flush`] reason.
    pub flushed: BTreeMap<&'static str, u64>,
}

impl BatchStats {
    pub fn hints_used(&self) -> u64 {
        self.attempts.get(HINT_USED).copied().unwrap_or(0)
    }
}

#[derive(Clone, Debug)]
struct Kept {
    profile: String,
    signature: PodSignature,
    /// Remaining nodes, worst first: the best is popped from the end.
    nodes: Vec<String>,
    created: Instant,
}

/// The previous placement: which attempt, on which node.
#[derive(Clone, Debug)]
struct LastPlacement {
    attempt: u64,
    node: String,
}

/// The batching state one scheduler keeps between attempts.
#[derive(Clone, Debug, Default)]
pub struct OpportunisticBatch {
    kept: Option<Kept>,
    last: Option<LastPlacement>,
    /// Attempts started, counting every profile's.
    attempt: u64,
    pub stats: BatchStats,
}

impl OpportunisticBatch {
    /// Starts an attempt; returns its number.
    pub(crate) fn begin_attempt(&mut self) -> u64 {
        self.attempt += 1;
        self.attempt
    }

    fn flush(&mut self, reason: &'static str) {
        self.kept = None;
        *self.stats.flushed.entry(reason).or_default() += 1;
    }

    fn count(&mut self, result: &'static str) {
        *self.stats.attempts.entry(result).or_default() += 1;
    }

    /// The hint for attempt `attempt` of a pod signed `signature` in `profile`, or `None`.
    /// `last_node_rejects` filters the pod on the node the previous pod took (`None`: the
    /// node is gone).
    pub(crate) fn node_hint(
        &mut self,
        profile: &str,
        attempt: u64,
        signature: Option<&PodSignature>,
        last_node_rejects: impl FnOnce(&str) -> Option<bool>,
    ) -> Option<String> {
        let hint = self.compatible(profile, attempt, signature, last_node_rejects);
        match hint {
            true => self.kept.as_mut().and_then(|k| k.nodes.pop()),
            false => {
                self.count(NO_HINT);
                None
            }
        }
    }

    fn compatible(
        &mut self,
        profile: &str,
        attempt: u64,
        signature: Option<&PodSignature>,
        last_node_rejects: impl FnOnce(&str) -> Option<bool>,
    ) -> bool {
        let Some(kept) = &self.kept else {
            return false;
        };
        if kept.nodes.is_empty() {
            return false;
        }
        let last = self.last.as_ref();
        if kept.profile != profile || last.is_none_or(|l| l.attempt + 1 != attempt) {
            self.flush(flush::POD_SKIPPED);
            return false;
        }
        if signature != Some(&kept.signature) {
            self.flush(flush::POD_INCOMPATIBLE);
            return false;
        }
        if kept.created.elapsed() > MAX_BATCH_AGE {
            self.flush(flush::EXPIRED);
            return false;
        }
        let node = last.map(|l| l.node.clone()).unwrap_or_default();
        match last_node_rejects(&node) {
            None => {
                self.flush(flush::NODE_MISSING);
                false
            }
            Some(false) => {
                self.flush(flush::NODE_NOT_FULL);
                false
            }
            Some(true) => true,
        }
    }

    /// Records a placement: `chosen` for attempt `attempt`, given `hint`; `others` are the
    /// remaining scored nodes, worst first (`None` when only one node was feasible).
    pub(crate) fn store(
        &mut self,
        profile: &str,
        attempt: u64,
        signature: Option<PodSignature>,
        hint: Option<&str>,
        chosen: &str,
        others: Option<Vec<String>>,
    ) {
        self.last = Some(LastPlacement {
            attempt,
            node: chosen.to_string(),
        });
        if hint == Some(chosen) {
            // The kept list already lost this node when it was handed out.
            self.count(HINT_USED);
            return;
        }
        if hint.is_some() {
            self.count(HINT_NOT_USED);
        }
        match (signature, others) {
            (Some(signature), Some(nodes)) if !nodes.is_empty() => {
                self.kept = Some(Kept {
                    profile: profile.to_string(),
                    signature,
                    nodes,
                    created: Instant::now(),
                });
            }
            (signature, _) => self.flush(if signature.is_none() {
                flush::POD_NOT_BATCHABLE
            } else {
                flush::EMPTY_LIST
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(v: &str) -> PodSignature {
        PodSignature([("k", v.to_string())].into())
    }

    fn kept(b: &mut OpportunisticBatch, nodes: &[&str]) -> u64 {
        let a = b.begin_attempt();
        let others = nodes.iter().map(|n| n.to_string()).collect();
        b.store("p", a, Some(sig("a")), None, "n0", Some(others));
        a
    }

    /// Upstream's `TestBatchBasic` cases, in our words: when a hint is given and when the
    /// kept list is dropped, and why.
    #[test]
    fn hints_follow_upstream_rules() {
        // Same signature, next attempt, the chosen node full: the best remaining node.
        let mut b = OpportunisticBatch::default();
        kept(&mut b, &["n3", "n2", "n1"]);
        let a = b.begin_attempt();
        assert_eq!(
            b.node_hint("p", a, Some(&sig("a")), |n| {
                assert_eq!(n, "n0");
                Some(true)
            }),
            Some("n1".to_string())
        );
        b.store("p", a, Some(sig("a")), Some("n1"), "n1", None);
        assert_eq!(b.stats.hints_used(), 1);
        // The list survives a used hint.
        let a = b.begin_attempt();
        assert_eq!(
            b.node_hint("p", a, Some(&sig("a")), |n| {
                assert_eq!(n, "n1");
                Some(true)
            }),
            Some("n2".to_string())
        );

        type Case = (
            &'static str,
            &'static str,
            Option<PodSignature>,
            Option<bool>,
            bool,
        );
        let cases: [Case; 5] = [
            ("another profile", "q", Some(sig("a")), Some(true), false),
            ("another signature", "p", Some(sig("b")), Some(true), false),
            ("unsignable pod", "p", None, Some(true), false),
            (
                "chosen node still fits",
                "p",
                Some(sig("a")),
                Some(false),
                false,
            ),
            ("chosen node gone", "p", Some(sig("a")), None, false),
        ];
        let reasons = [
            flush::POD_SKIPPED,
            flush::POD_INCOMPATIBLE,
            flush::POD_INCOMPATIBLE,
            flush::NODE_NOT_FULL,
            flush::NODE_MISSING,
        ];
        for ((name, profile, s, rejects, _), reason) in cases.into_iter().zip(reasons) {
            let mut b = OpportunisticBatch::default();
            kept(&mut b, &["n1"]);
            let a = b.begin_attempt();
            assert_eq!(
                b.node_hint(profile, a, s.as_ref(), |_| rejects),
                None,
                "{name}"
            );
            assert_eq!(b.stats.flushed.get(reason), Some(&1), "{name}");
            assert_eq!(b.stats.attempts.get(NO_HINT), Some(&1), "{name}");
        }

        // An attempt in between (a failure, another profile's pod) breaks the chain.
        let mut b = OpportunisticBatch::default();
        kept(&mut b, &["n1"]);
        b.begin_attempt();
        let a = b.begin_attempt();
        assert_eq!(b.node_hint("p", a, Some(&sig("a")), |_| Some(true)), None);
        assert_eq!(b.stats.flushed.get(flush::POD_SKIPPED), Some(&1));
    }

    #[test]
    fn store_keeps_or_drops_the_list() {
        let mut b = OpportunisticBatch::default();
        let a = b.begin_attempt();
        b.store("p", a, None, None, "n0", Some(vec!["n1".into()]));
        assert_eq!(b.stats.flushed.get(flush::POD_NOT_BATCHABLE), Some(&1));
        let a = b.begin_attempt();
        b.store("p", a, Some(sig("a")), None, "n0", None);
        assert_eq!(b.stats.flushed.get(flush::EMPTY_LIST), Some(&1));
        // A hint that was not used: counted, and the new list replaces the old.
        kept(&mut b, &["n1"]);
        let a = b.begin_attempt();
        let hint = b.node_hint("p", a, Some(&sig("a")), |_| Some(true));
        assert_eq!(hint.as_deref(), Some("n1"));
        b.store(
            "p",
            a,
            Some(sig("a")),
            hint.as_deref(),
            "n9",
            Some(vec!["n8".into()]),
        );
        assert_eq!(b.stats.attempts.get(HINT_NOT_USED), Some(&1));
        let a = b.begin_attempt();
        let hint = b.node_hint("p", a, Some(&sig("a")), |n| {
            assert_eq!(n, "n9");
            Some(true)
        });
        assert_eq!(hint.as_deref(), Some("n8"));
    }
}
