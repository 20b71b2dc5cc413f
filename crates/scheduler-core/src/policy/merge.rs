//! The proposal's Option 1, "smart deep merge", of every policy a service account may use:
//! in alphabetical order of policy name, `required` and `default` take the first value seen
//! for each sub-key (a nodeSelector key, an affinity kind), `allowed` is additive (and
//! "anything", `[]` / `{}`, absorbs lists).

use std::collections::BTreeMap;

use super::{
    AffinityRules, NodeAffinityRules, NodeSelectorRules, PodAffinityRules, PolicySpec,
    SchedulingPolicy,
};

/// The proposal's three merge strategies. ferrosched uses [`MergeStrategy::SmartDeepMerge`]
/// (Option 1); the other two are kept to show, and test, what they would give.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MergeStrategy {
    /// Option 1: `required` and `default` first-seen per sub-key, `allowed` additive.
    #[default]
    SmartDeepMerge,
    /// Option 2: the first policy in alphabetical order, alone.
    FirstSeenWinsEver,
    /// Option 3: first-seen per second-level field (`required.nodeSelectors`, ...), in every
    /// section, `allowed` included.
    SimpleMerge,
}

/// Merges policies (any order in; sorted by name here) with Option 1. No policy gives the
/// empty spec, which allows nothing.
pub fn merge<'a>(policies: impl IntoIterator<Item = &'a SchedulingPolicy>) -> PolicySpec {
    merge_with(MergeStrategy::SmartDeepMerge, policies)
}

pub fn merge_with<'a>(
    strategy: MergeStrategy,
    policies: impl IntoIterator<Item = &'a SchedulingPolicy>,
) -> PolicySpec {
    let mut sorted: Vec<&SchedulingPolicy> = policies.into_iter().collect();
    sorted.sort_by(|a, b| a.name().cmp(b.name()));
    match strategy {
        MergeStrategy::SmartDeepMerge => smart(sorted),
        MergeStrategy::FirstSeenWinsEver => {
            sorted.first().map(|p| p.spec.clone()).unwrap_or_default()
        }
        MergeStrategy::SimpleMerge => simple(sorted),
    }
}

fn simple(sorted: Vec<&SchedulingPolicy>) -> PolicySpec {
    let mut m = PolicySpec::default();
    for p in sorted {
        let s = &p.spec;
        let (r, a, d) = (&mut m.required, &mut m.allowed, &mut m.defaults);
        first(&mut r.scheduler_names, &s.required.scheduler_names);
        first(
            &mut r.priority_class_names,
            &s.required.priority_class_names,
        );
        first(&mut r.node_selectors, &s.required.node_selectors);
        first(&mut r.affinities, &s.required.affinities);
        first(&mut a.scheduler_names, &s.allowed.scheduler_names);
        first(&mut a.priority_class_names, &s.allowed.priority_class_names);
        first(&mut a.node_selectors, &s.allowed.node_selectors);
        first(&mut a.tolerations, &s.allowed.tolerations);
        first(&mut a.affinities, &s.allowed.affinities);
        first(&mut d.scheduler_name, &s.defaults.scheduler_name);
        first(&mut d.priority_class_name, &s.defaults.priority_class_name);
        first(&mut d.node_selector, &s.defaults.node_selector);
        first(&mut d.tolerations, &s.defaults.tolerations);
        first(&mut d.affinity, &s.defaults.affinity);
    }
    m
}

fn smart(sorted: Vec<&SchedulingPolicy>) -> PolicySpec {
    let mut m = PolicySpec::default();
    for p in sorted {
        let s = &p.spec;
        // required: first seen per sub-key.
        first(&mut m.required.scheduler_names, &s.required.scheduler_names);
        first(
            &mut m.required.priority_class_names,
            &s.required.priority_class_names,
        );
        first_per_key(&mut m.required.node_selectors, &s.required.node_selectors);
        if let Some(a) = &s.required.affinities {
            let t = m.required.affinities.get_or_insert_with(Default::default);
            first(&mut t.node_affinities, &a.node_affinities);
            first(&mut t.pod_affinities, &a.pod_affinities);
            first(&mut t.pod_anti_affinities, &a.pod_anti_affinities);
        }
        // default: first seen per sub-key.
        first(&mut m.defaults.scheduler_name, &s.defaults.scheduler_name);
        first(
            &mut m.defaults.priority_class_name,
            &s.defaults.priority_class_name,
        );
        first_per_key(&mut m.defaults.node_selector, &s.defaults.node_selector);
        first(&mut m.defaults.tolerations, &s.defaults.tolerations);
        if let Some(a) = &s.defaults.affinity {
            let t = m.defaults.affinity.get_or_insert_with(Default::default);
            first(&mut t.node_affinity, &a.node_affinity);
            first(&mut t.pod_affinity, &a.pod_affinity);
            first(&mut t.pod_anti_affinity, &a.pod_anti_affinity);
        }
        // allowed: additive.
        union_names(&mut m.allowed.scheduler_names, &s.allowed.scheduler_names);
        union_names(
            &mut m.allowed.priority_class_names,
            &s.allowed.priority_class_names,
        );
        union_selectors(&mut m.allowed.node_selectors, &s.allowed.node_selectors);
        union_list(&mut m.allowed.tolerations, &s.allowed.tolerations);
        union_affinities(&mut m.allowed.affinities, &s.allowed.affinities);
    }
    m
}

/// The merged policy from every policy in `all` whose name is in `usable` (the names the
/// pod's service account may `use`; unknown names are ignored).
pub fn effective_policy(all: &BTreeMap<String, SchedulingPolicy>, usable: &[String]) -> PolicySpec {
    merge(usable.iter().filter_map(|n| all.get(n)))
}

fn first<T: Clone>(into: &mut Option<T>, from: &Option<T>) {
    if into.is_none() {
        into.clone_from(from);
    }
}

fn first_per_key<V: Clone>(
    into: &mut Option<BTreeMap<String, V>>,
    from: &Option<BTreeMap<String, V>>,
) {
    let Some(from) = from else { return };
    let into = into.get_or_insert_with(BTreeMap::new);
    for (k, v) in from {
        into.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// `[]` is "any" and absorbs; otherwise the union in first-seen order.
fn union_list<T: Clone + PartialEq>(into: &mut Option<Vec<T>>, from: &Option<Vec<T>>) {
    let Some(from) = from else { return };
    match into {
        None => *into = Some(from.clone()),
        Some(i) if i.is_empty() => {}
        Some(i) if from.is_empty() => i.clear(),
        Some(i) => {
            for x in from {
                if !i.contains(x) {
                    i.push(x.clone());
                }
            }
        }
    }
}

fn union_names(into: &mut Option<Vec<String>>, from: &Option<Vec<String>>) {
    union_list(into, from);
}

/// `{}` absorbs; per key, value lists are unioned (`[]`, any value, absorbs).
fn union_selectors(
    into: &mut Option<BTreeMap<String, Vec<String>>>,
    from: &Option<BTreeMap<String, Vec<String>>>,
) {
    let Some(from) = from else { return };
    match into {
        None => *into = Some(from.clone()),
        Some(i) if i.is_empty() => {}
        Some(i) if from.is_empty() => i.clear(),
        Some(i) => {
            for (k, vs) in from {
                let mut cur = i.remove(k);
                union_list(&mut cur, &Some(vs.clone()));
                i.insert(k.clone(), cur.unwrap_or_default());
            }
        }
    }
}

fn union_affinities(into: &mut Option<AffinityRules>, from: &Option<AffinityRules>) {
    let Some(from) = from else { return };
    match into {
        None => *into = Some(from.clone()),
        Some(i) if i.is_any() => {}
        Some(i) if from.is_any() => *i = AffinityRules::default(),
        Some(i) => {
            union_node(&mut i.node_affinities, &from.node_affinities);
            union_pod(&mut i.pod_affinities, &from.pod_affinities);
            union_pod(&mut i.pod_anti_affinities, &from.pod_anti_affinities);
        }
    }
}

fn union_node(into: &mut Option<NodeAffinityRules>, from: &Option<NodeAffinityRules>) {
    let Some(from) = from else { return };
    match into {
        None => *into = Some(from.clone()),
        Some(i) if i.is_any() => {}
        Some(i) if from.is_any() => *i = NodeAffinityRules::default(),
        Some(i) => {
            union_terms(
                &mut i.required_during_scheduling_ignored_during_execution,
                &from.required_during_scheduling_ignored_during_execution,
            );
            union_terms(
                &mut i.preferred_during_scheduling_ignored_during_execution,
                &from.preferred_during_scheduling_ignored_during_execution,
            );
        }
    }
}

fn union_terms(into: &mut Option<NodeSelectorRules>, from: &Option<NodeSelectorRules>) {
    let Some(from) = from else { return };
    match into {
        None => *into = Some(from.clone()),
        Some(i) if i.is_any() => {}
        Some(i) if from.is_any() => *i = NodeSelectorRules::default(),
        Some(i) => union_list(&mut i.node_selector_terms, &from.node_selector_terms),
    }
}

fn union_pod(into: &mut Option<PodAffinityRules>, from: &Option<PodAffinityRules>) {
    let Some(from) = from else { return };
    match into {
        None => *into = Some(from.clone()),
        Some(i) if i.is_any() => {}
        Some(i) if from.is_any() => *i = PodAffinityRules::default(),
        Some(i) => {
            first(
                &mut i.required_during_scheduling_ignored_during_execution,
                &from.required_during_scheduling_ignored_during_execution,
            );
            first(
                &mut i.preferred_during_scheduling_ignored_during_execution,
                &from.preferred_during_scheduling_ignored_during_execution,
            );
        }
    }
}
