//! InterPodAffinity (upstream `plugins/interpodaffinity`).
//!
//! Filtering: the incoming pod's required affinity and anti-affinity terms, and the required
//! anti-affinity terms of pods already running (the symmetric check). PreFilter walks the
//! existing pods once per cycle and counts matches per topology pair (topology key, value);
//! Filter then only looks up the node's topology values, O(terms) per node.
//!
//! Scoring: the incoming pod's preferred terms, and symmetrically the existing pods' preferred
//! terms and required affinity terms (the latter weighted by `hardPodAffinityWeight`), summed
//! per topology pair in PreScore, looked up per node in Score and min-max normalised.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use crate::types::Labels;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::config::{InterPodAffinityArgs, PluginArgs};
use crate::framework::FeasibleNodes;
use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{
    CycleState, FilterPlugin, MAX_NODE_SCORE, NodeScore, Plugin, PluginPoints, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, ScorePlugin, Status,
};
use crate::plugin_points;
use crate::plugins::helper::{PodDelta, apply_pod_delta};
use crate::types::{AffinityTerm, NodeInfo, PodInfo};

use super::names::INTER_POD_AFFINITY;

/// The incoming pod's required affinity is not satisfied (UnschedulableAndUnresolvable).
pub const ERR_REASON_AFFINITY_RULES_NOT_MATCH: &str = "node(s) didn't match pod affinity rules";
/// The incoming pod's required anti-affinity is violated (Unschedulable).
pub const ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't match pod anti-affinity rules";
/// An existing pod's required anti-affinity would be violated (Unschedulable).
pub const ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// Upstream's cycle-state keys, used in "not found" errors only.
const PRE_FILTER_STATE_KEY: &str = "PreFilterInterPodAffinity";
const PRE_SCORE_STATE_KEY: &str = "PreScoreInterPodAffinity";

/// Upstream's bounds for `hardPodAffinityWeight`.
const MIN_HARD_POD_AFFINITY_WEIGHT: i32 = 0;
const MAX_HARD_POD_AFFINITY_WEIGHT: i32 = 100;

pub struct InterPodAffinity {
    hard_pod_affinity_weight: i32,
    ignore_preferred_terms_of_existing_pods: bool,
}

impl InterPodAffinity {
    /// Validates the args as upstream's constructor does.
    pub fn new(args: &InterPodAffinityArgs) -> Result<Self, String> {
        let w = args.hard_pod_affinity_weight;
        if !(MIN_HARD_POD_AFFINITY_WEIGHT..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(&w) {
            return Err(format!(
                "hardPodAffinityWeight: Invalid value: {w}: not in valid range \
                 [{MIN_HARD_POD_AFFINITY_WEIGHT}-{MAX_HARD_POD_AFFINITY_WEIGHT}]"
            ));
        }
        Ok(InterPodAffinity {
            hard_pod_affinity_weight: w,
            ignore_preferred_terms_of_existing_pods: args.ignore_preferred_terms_of_existing_pods,
        })
    }

    /// Registry factory; without args the v1 defaults apply (weight 1, existing pods'
    /// preferred terms considered).
    pub fn factory(args: Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String> {
        let args = match args {
            None => InterPodAffinityArgs {
                hard_pod_affinity_weight: 1,
                ignore_preferred_terms_of_existing_pods: false,
            },
            Some(PluginArgs::InterPodAffinity(a)) => a.clone(),
            Some(other) => {
                return Err(format!(
                    "want args to be of type InterPodAffinityArgs, got {}",
                    other.kind()
                ));
            }
        };
        Ok(Arc::new(InterPodAffinity::new(&args)?))
    }
}

impl Plugin for InterPodAffinity {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        if pod.has_pod_affinity {
            return Some(Signing::Unsignable(
                "pods with pod affinity are not signable",
            ));
        }
        // Existing pods' terms select by namespace and labels. Upstream signs the labels
        // only (none with ignorePreferredTermsOfExistingPods); the namespace too is safer.
        sign::with(vec![(
            "v1.Pod.Labels",
            format!("{}/{:?}", pod.namespace(), pod.labels),
        )])
    }
    fn name(&self) -> &'static str {
        INTER_POD_AFFINITY
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter, pre_score, score)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(
                EventResource::Pod,
                ActionType::ADD | ActionType::UPDATE_POD_LABEL | ActionType::DELETE,
            ),
            // Taints too: upstream's guard for a node added before it was ready.
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL | ActionType::UPDATE_NODE_TAINT,
            ),
        ]
    }

    /// Upstream's hints: a bound pod that now matches the affinity or no longer the
    /// anti-affinity (added, relabelled, gone), or a node carrying a term's topology key.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        hints::hint(pod, objects)
    }
}

// ---------------------------------------------------------------------------------------
// Topology-pair maps

/// A small multiply-rotate hasher for the short label values keyed in the per-cycle maps;
/// SipHash's DoS resistance buys nothing here and costs most of a Filter call.
#[derive(Default, Clone, Copy)]
struct LabelHasher(u64);

impl LabelHasher {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for LabelHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // Fold the well-mixed high bits into the low bits the table indexes with.
        self.0 ^ (self.0 >> 32)
    }
}

type LabelMap<V> = HashMap<String, V, BuildHasherDefault<LabelHasher>>;

/// (topology key, topology value) -> number, stored as key -> value -> number. Terms use very
/// few distinct topology keys, so the outer level is a short list scanned by string compare.
#[derive(Clone, Debug, Default)]
struct TopologyMap {
    by_key: Vec<(String, LabelMap<i64>)>,
}

impl PartialEq for TopologyMap {
    /// Order-insensitive, so a map that went through add-then-remove compares equal.
    fn eq(&self, other: &Self) -> bool {
        self.by_key.len() == other.by_key.len()
            && self
                .by_key
                .iter()
                .all(|(k, v)| other.values(k).is_some_and(|o| o == v))
    }
}

impl TopologyMap {
    fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    #[inline]
    fn values(&self, key: &str) -> Option<&LabelMap<i64>> {
        self.by_key.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    #[inline]
    fn get(&self, key: &str, value: &str) -> i64 {
        self.values(key)
            .and_then(|v| v.get(value))
            .copied()
            .unwrap_or(0)
    }

    fn key_index(&mut self, key: &str) -> usize {
        match self.by_key.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.by_key.push((key.to_string(), LabelMap::default()));
                self.by_key.len() - 1
            }
        }
    }

    /// Adds `delta` to the pair (`key`, the node's value for `key`) if the node has the key.
    /// Entries that reach zero are removed (match counts), so emptiness means "no match".
    #[inline]
    fn count_on_node(&mut self, key: &str, node_labels: &Labels, delta: i64) {
        if delta == 0 {
            return;
        }
        let Some(value) = node_labels.get(key) else {
            return;
        };
        let i = self.key_index(key);
        let values = &mut self.by_key[i].1;
        match values.get_mut(value.as_str()) {
            Some(c) => {
                *c += delta;
                if *c == 0 {
                    values.remove(value.as_str());
                    if values.is_empty() {
                        self.by_key.swap_remove(i);
                    }
                }
            }
            None => {
                values.insert(value.clone(), delta);
            }
        }
    }

    /// Like [`Self::count_on_node`] but keeps zero entries (score sums: upstream keeps them,
    /// and their presence decides whether scoring runs at all).
    #[inline]
    fn sum_on_node(&mut self, key: &str, node_labels: &Labels, delta: i64) {
        let Some(value) = node_labels.get(key) else {
            return;
        };
        let i = self.key_index(key);
        let values = &mut self.by_key[i].1;
        match values.get_mut(value.as_str()) {
            Some(c) => *c += delta,
            None => {
                values.insert(value.clone(), delta);
            }
        }
    }

    /// Whether some pair of the node's labels has a positive count.
    #[inline]
    fn any_positive_on(&self, node_labels: &Labels) -> bool {
        self.by_key.iter().any(|(k, values)| {
            node_labels
                .get(k)
                .and_then(|v| values.get(v.as_str()))
                .is_some_and(|&c| c > 0)
        })
    }

    /// Sum of the node's values over every topology key.
    #[inline]
    fn sum_for(&self, node_labels: &Labels) -> i64 {
        self.by_key
            .iter()
            .filter_map(|(k, values)| node_labels.get(k).and_then(|v| values.get(v.as_str())))
            .sum()
    }
}

// ---------------------------------------------------------------------------------------
// Namespace scope of the incoming pod's terms

/// Which namespaces one of the incoming pod's terms covers this cycle. Upstream resolves the
/// namespace selector of the incoming pod's terms into namespace names once per cycle
/// (`mergeAffinityTermNamespacesIfNotEmpty`), so existing pods' namespaces are never looked up.
#[derive(Clone, Debug)]
enum NsScope {
    /// Only the term's listed namespaces (no namespace selector).
    Listed,
    /// Every namespace (empty namespace selector).
    All,
    /// The listed namespaces plus the existing namespaces the selector matched.
    Also(Arc<HashSet<String, BuildHasherDefault<LabelHasher>>>),
}

impl NsScope {
    fn resolve(term: &AffinityTerm, snapshot: &Snapshot) -> NsScope {
        let sel = &term.namespace_selector;
        if sel.is_nothing() {
            NsScope::Listed
        } else if sel.is_everything() {
            NsScope::All
        } else {
            NsScope::Also(Arc::new(
                snapshot
                    .namespaces()
                    .filter(|(_, labels)| sel.matches(labels))
                    .map(|(name, _)| name.to_string())
                    .collect(),
            ))
        }
    }

    fn resolve_all<'a>(
        terms: impl IntoIterator<Item = &'a AffinityTerm>,
        snapshot: &Snapshot,
    ) -> Vec<NsScope> {
        terms
            .into_iter()
            .map(|t| NsScope::resolve(t, snapshot))
            .collect()
    }

    /// Whether `pod` matches the incoming pod's `term` under this scope.
    #[inline]
    fn matches(&self, term: &AffinityTerm, pod: &PodInfo) -> bool {
        let ns = pod.namespace();
        let in_scope = match self {
            NsScope::Listed => term.lists_namespace(ns),
            NsScope::All => true,
            NsScope::Also(extra) => term.lists_namespace(ns) || extra.contains(ns),
        };
        in_scope && term.selector.matches(&pod.labels)
    }
}

/// `pod` matches every one of `terms` (false for no terms, as upstream).
#[inline]
fn matches_all(terms: &[AffinityTerm], scopes: &[NsScope], pod: &PodInfo) -> bool {
    !terms.is_empty() && terms.iter().zip(scopes).all(|(t, s)| s.matches(t, pod))
}

/// Whether the incoming pod matches an existing pod's term (upstream `AffinityTerm.Matches`
/// with the incoming pod's namespace labels).
#[inline]
fn existing_term_matches(
    term: &AffinityTerm,
    incoming: &PodInfo,
    ns_labels: Option<&BTreeMap<String, String>>,
) -> bool {
    term.matches(incoming.namespace(), &incoming.labels, ns_labels)
}

// ---------------------------------------------------------------------------------------
// PreFilter / Filter

#[derive(Clone, Debug)]
struct PreFilterState {
    /// Pairs where existing pods' required anti-affinity terms match the incoming pod.
    existing_anti_affinity: TopologyMap,
    /// Pairs with existing pods that match all of the incoming pod's required affinity terms.
    affinity: TopologyMap,
    /// Pairs with existing pods that match one of the incoming pod's required anti-affinity terms.
    anti_affinity: TopologyMap,
    scopes: RequiredScopes,
    namespace_labels: Option<Arc<BTreeMap<String, String>>>,
    /// The incoming pod matches all of its own required affinity terms.
    matches_own_affinity: bool,
}

#[derive(Clone, Debug, Default)]
struct RequiredScopes {
    affinity: Vec<NsScope>,
    anti_affinity: Vec<NsScope>,
}

impl PodDelta for PreFilterState {
    /// Upstream `updateWithPod`: accounts for `other` being added (`delta` 1) to or removed
    /// (`delta` -1) from `node`.
    fn update_with_pod(
        &mut self,
        incoming: &PodInfo,
        other: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) {
        let ns_labels = self.namespace_labels.as_deref();
        for t in &other.affinity_terms.required_anti_affinity {
            if existing_term_matches(t, incoming, ns_labels) {
                self.existing_anti_affinity
                    .count_on_node(&t.topology_key, &node.labels, delta);
            }
        }
        let terms = &incoming.affinity_terms;
        if matches_all(&terms.required_affinity, &self.scopes.affinity, other) {
            for t in &terms.required_affinity {
                self.affinity
                    .count_on_node(&t.topology_key, &node.labels, delta);
            }
        }
        for (t, s) in terms
            .required_anti_affinity
            .iter()
            .zip(&self.scopes.anti_affinity)
        {
            if s.matches(t, other) {
                self.anti_affinity
                    .count_on_node(&t.topology_key, &node.labels, delta);
            }
        }
    }
}

impl PreFilterState {
    /// Upstream `satisfyPodAffinity`, including the first-pod-of-a-group exception.
    fn satisfies_affinity(&self, pod: &PodInfo, node: &NodeInfo) -> bool {
        let mut all_present = true;
        for t in &pod.affinity_terms.required_affinity {
            let Some(value) = node.labels.get(&t.topology_key) else {
                // The node must have every topology key, even for the first pod.
                return false;
            };
            if self.affinity.get(&t.topology_key, value) <= 0 {
                all_present = false;
            }
        }
        // No pod anywhere matches the terms yet, but the pod matches them itself: let it
        // start the group instead of waiting forever.
        all_present || (self.affinity.is_empty() && self.matches_own_affinity)
    }

    /// Upstream `satisfyPodAntiAffinity`: a node without the topology key is not constrained.
    fn satisfies_anti_affinity(&self, pod: &PodInfo, node: &NodeInfo) -> bool {
        if self.anti_affinity.is_empty() {
            return true;
        }
        pod.affinity_terms.required_anti_affinity.iter().all(|t| {
            node.labels
                .get(&t.topology_key)
                .is_none_or(|v| self.anti_affinity.get(&t.topology_key, v) <= 0)
        })
    }
}

fn missing_pre_filter_state() -> Status {
    missing_state(PRE_FILTER_STATE_KEY)
}

fn missing_state(key: &str) -> Status {
    Status::error(format!("error reading {key:?} from cycleState: not found"))
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let terms = &pod.affinity_terms;
        if let Some(e) = &terms.parse_error {
            return (None, Status::unresolvable(format!("parsing pod: {e}")));
        }
        let namespace_labels = snapshot.namespace_labels_arc(pod.namespace()).cloned();
        let ns_labels = namespace_labels.as_deref();

        // Symmetric check: only nodes hosting pods with required anti-affinity matter.
        let mut existing_anti_affinity = TopologyMap::default();
        for node in snapshot.have_pods_with_required_anti_affinity() {
            for existing in node.pods_with_required_anti_affinity() {
                for t in &existing.affinity_terms.required_anti_affinity {
                    if existing_term_matches(t, pod, ns_labels) {
                        existing_anti_affinity.count_on_node(&t.topology_key, &node.labels, 1);
                    }
                }
            }
        }

        let required_affinity = &terms.required_affinity;
        let required_anti_affinity = &terms.required_anti_affinity;
        if existing_anti_affinity.is_empty()
            && required_affinity.is_empty()
            && required_anti_affinity.is_empty()
        {
            return (None, Status::skip());
        }

        let scopes = RequiredScopes {
            affinity: NsScope::resolve_all(required_affinity, snapshot),
            anti_affinity: NsScope::resolve_all(required_anti_affinity, snapshot),
        };
        let mut affinity = TopologyMap::default();
        let mut anti_affinity = TopologyMap::default();
        if !required_affinity.is_empty() || !required_anti_affinity.is_empty() {
            // Matches are counted per node first, so each node touches the maps once per term.
            let mut anti_hits = vec![0i64; required_anti_affinity.len()];
            for node in snapshot.node_infos() {
                if node.pods.is_empty() {
                    continue;
                }
                let mut affinity_hits = 0i64;
                anti_hits.fill(0);
                for existing in &node.pods {
                    if matches_all(required_affinity, &scopes.affinity, existing) {
                        affinity_hits += 1;
                    }
                    for (i, (t, s)) in required_anti_affinity
                        .iter()
                        .zip(&scopes.anti_affinity)
                        .enumerate()
                    {
                        if s.matches(t, existing) {
                            anti_hits[i] += 1;
                        }
                    }
                }
                if affinity_hits > 0 {
                    for t in required_affinity {
                        affinity.count_on_node(&t.topology_key, &node.labels, affinity_hits);
                    }
                }
                for (t, &hits) in required_anti_affinity.iter().zip(&anti_hits) {
                    if hits > 0 {
                        anti_affinity.count_on_node(&t.topology_key, &node.labels, hits);
                    }
                }
            }
        }
        let matches_own_affinity = matches_all(required_affinity, &scopes.affinity, pod);
        state.write(PreFilterState {
            existing_anti_affinity,
            affinity,
            anti_affinity,
            scopes,
            namespace_labels,
            matches_own_affinity,
        });
        (None, Status::success())
    }

    fn has_extensions(&self) -> bool {
        true
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        apply_pod_delta::<PreFilterState>(state, pod, to_add, node, 1, missing_pre_filter_state)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        apply_pod_delta::<PreFilterState>(state, pod, to_remove, node, -1, missing_pre_filter_state)
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return missing_state(PRE_FILTER_STATE_KEY);
        };
        if !s.satisfies_affinity(pod, node) {
            return Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH);
        }
        if !s.satisfies_anti_affinity(pod, node) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        if s.existing_anti_affinity.any_positive_on(&node.labels) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH);
        }
        Status::success()
    }
}

// ---------------------------------------------------------------------------------------
// PreScore / Score

#[derive(Clone, Debug)]
struct PreScoreState {
    /// Topology pair -> summed weight.
    scores: TopologyMap,
}

/// The incoming pod's view for scoring one existing pod.
struct ScoreCtx<'a> {
    pod: &'a PodInfo,
    ns_labels: Option<&'a BTreeMap<String, String>>,
    affinity_scopes: &'a [NsScope],
    anti_affinity_scopes: &'a [NsScope],
    hard_weight: i64,
}

impl ScoreCtx<'_> {
    /// Upstream `processExistingPod`.
    fn process_existing_pod(&self, scores: &mut TopologyMap, existing: &PodInfo, node: &NodeInfo) {
        let labels = &node.labels;
        let mine = &self.pod.affinity_terms;
        for (w, s) in mine.preferred_affinity.iter().zip(self.affinity_scopes) {
            if s.matches(&w.term, existing) {
                scores.sum_on_node(&w.term.topology_key, labels, i64::from(w.weight));
            }
        }
        for (w, s) in mine
            .preferred_anti_affinity
            .iter()
            .zip(self.anti_affinity_scopes)
        {
            if s.matches(&w.term, existing) {
                scores.sum_on_node(&w.term.topology_key, labels, -i64::from(w.weight));
            }
        }
        let theirs = &existing.affinity_terms;
        if self.hard_weight > 0 {
            for t in &theirs.required_affinity {
                if existing_term_matches(t, self.pod, self.ns_labels) {
                    scores.sum_on_node(&t.topology_key, labels, self.hard_weight);
                }
            }
        }
        for w in &theirs.preferred_affinity {
            if existing_term_matches(&w.term, self.pod, self.ns_labels) {
                scores.sum_on_node(&w.term.topology_key, labels, i64::from(w.weight));
            }
        }
        for w in &theirs.preferred_anti_affinity {
            if existing_term_matches(&w.term, self.pod, self.ns_labels) {
                scores.sum_on_node(&w.term.topology_key, labels, -i64::from(w.weight));
            }
        }
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        snapshot: &Snapshot,
    ) -> Status {
        if nodes.is_empty() {
            return Status::skip();
        }
        let terms = &pod.affinity_terms;
        if let Some(e) = &terms.parse_error {
            return Status::error(format!("failed to parse pod: {e}"));
        }
        let has_constraints = terms.has_preferred();
        if self.ignore_preferred_terms_of_existing_pods && !has_constraints {
            return Status::skip();
        }
        let affinity_scopes =
            NsScope::resolve_all(terms.preferred_affinity.iter().map(|w| &w.term), snapshot);
        let anti_affinity_scopes = NsScope::resolve_all(
            terms.preferred_anti_affinity.iter().map(|w| &w.term),
            snapshot,
        );
        let ctx = ScoreCtx {
            pod,
            ns_labels: snapshot.namespace_labels(pod.namespace()),
            affinity_scopes: &affinity_scopes,
            anti_affinity_scopes: &anti_affinity_scopes,
            hard_weight: i64::from(self.hard_pod_affinity_weight),
        };
        let mut scores = TopologyMap::default();
        // Without preferred terms of its own, only existing pods with (anti-)affinity can
        // contribute, so only they are visited.
        if has_constraints {
            for node in snapshot.node_infos() {
                if node.labels.is_empty() {
                    continue;
                }
                for existing in &node.pods {
                    ctx.process_existing_pod(&mut scores, existing, node);
                }
            }
        } else {
            for node in snapshot.have_pods_with_affinity() {
                if node.labels.is_empty() {
                    continue;
                }
                for existing in node.pods_with_affinity() {
                    ctx.process_existing_pod(&mut scores, existing, node);
                }
            }
        }
        if scores.is_empty() {
            return Status::skip();
        }
        state.write(PreScoreState { scores });
        Status::success()
    }
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = state
            .read::<PreScoreState>()
            .ok_or_else(|| missing_state(PRE_SCORE_STATE_KEY))?;
        Ok(s.scores.sum_for(&node.labels))
    }

    fn has_score_extensions(&self) -> bool {
        true
    }

    /// Min-max normalisation into `0..=MAX_NODE_SCORE` (negative sums are fine).
    fn normalize_scores(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore],
    ) -> Status {
        let Some(s) = state.read::<PreScoreState>() else {
            return missing_state(PRE_SCORE_STATE_KEY);
        };
        if s.scores.is_empty() {
            return Status::success();
        }
        let min = scores.iter().map(|s| s.score).min().unwrap_or(0);
        let max = scores.iter().map(|s| s.score).max().unwrap_or(0);
        let spread = max - min;
        for ns in scores.iter_mut() {
            ns.score = if spread > 0 {
                // Same float expression as upstream, truncated.
                (MAX_NODE_SCORE as f64 * ((ns.score - min) as f64 / spread as f64)) as i64
            } else {
                0
            };
        }
        Status::success()
    }
}

mod hints;
#[cfg(test)]
mod tests;
