//! Compact taints and tolerations with upstream `ToleratesTaint` semantics.

use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex};

use k8s_openapi::api::core::v1 as k8s;

use super::interner::Interner;
use super::symbol::Sym;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
    /// Anything else; compared as a string like upstream does.
    Other(String),
}

impl TaintEffect {
    pub fn parse(s: &str) -> Self {
        match s {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            other => TaintEffect::Other(other.to_string()),
        }
    }
    pub fn as_str(&self) -> &str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::Other(s) => s,
        }
    }
}

impl std::fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Keys and values are interned ([`Sym`]): Filter compares them for every node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: Sym,
    pub value: Sym,
    pub effect: TaintEffect,
}

impl Taint {
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Self {
        Taint {
            key: Sym::new(key),
            value: Sym::new(value),
            effect,
        }
    }
    pub fn from_k8s(t: &k8s::Taint) -> Self {
        Taint {
            key: Sym::new(&t.key),
            value: Sym::new(t.value.as_deref().unwrap_or_default()),
            effect: TaintEffect::parse(&t.effect),
        }
    }
}

impl std::fmt::Display for Taint {
    /// `key=value:Effect`, as kubectl and upstream messages print taints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TolerationOperator {
    /// Also what an empty operator means.
    Equal,
    Exists,
    /// Unknown operator: tolerates nothing.
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Empty with `Exists` matches every key.
    pub key: Sym,
    pub operator: TolerationOperator,
    pub value: Sym,
    /// `None` matches every effect.
    pub effect: Option<TaintEffect>,
    pub toleration_seconds: Option<i64>,
}

impl Toleration {
    pub fn from_k8s(t: &k8s::Toleration) -> Self {
        let operator = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => TolerationOperator::Equal,
            Some("Exists") => TolerationOperator::Exists,
            Some(other) => TolerationOperator::Other(other.to_string()),
        };
        Toleration {
            key: Sym::new(t.key.as_deref().unwrap_or_default()),
            operator,
            value: Sym::new(t.value.as_deref().unwrap_or_default()),
            effect: t
                .effect
                .as_deref()
                .filter(|e| !e.is_empty())
                .map(TaintEffect::parse),
            toleration_seconds: t.toleration_seconds,
        }
    }

    pub fn exists(key: &str, effect: Option<TaintEffect>) -> Self {
        Toleration {
            key: Sym::new(key),
            operator: TolerationOperator::Exists,
            value: Sym::default(),
            effect,
            toleration_seconds: None,
        }
    }

    pub fn equal(key: &str, value: &str, effect: Option<TaintEffect>) -> Self {
        Toleration {
            key: Sym::new(key),
            operator: TolerationOperator::Equal,
            value: Sym::new(value),
            effect,
            toleration_seconds: None,
        }
    }

    /// Upstream `ToleratesTaint`: effect and key must match when set, then the operator decides.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = &self.effect
            && *effect != taint.effect
        {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match &self.operator {
            TolerationOperator::Equal => self.value == taint.value,
            TolerationOperator::Exists => true,
            TolerationOperator::Other(_) => false,
        }
    }
}

/// A node's taints, interned: the nodes of one pool carry the same taints and share one
/// allocation. Filter reads every node's taints for every pod; one shared slice stays in
/// cache, where a slice per node was a cache miss per node on a busy machine.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Taints(Arc<[Taint]>);

static TAINTS: LazyLock<Mutex<Interner<Arc<[Taint]>>>> = LazyLock::new(Mutex::default);

/// The empty list, without the interner's lock: placeholders and most nodes have no taints.
static NO_TAINTS: LazyLock<Arc<[Taint]>> = LazyLock::new(|| Arc::from(Vec::new()));

impl Taints {
    pub fn new(taints: Vec<Taint>) -> Taints {
        if taints.is_empty() {
            return Taints(Arc::clone(&NO_TAINTS));
        }
        let mut i = TAINTS.lock().unwrap_or_else(|e| e.into_inner());
        Taints(i.intern(
            taints.as_slice(),
            || taints.clone().into(),
            |a| Arc::strong_count(a) == 1,
        ))
    }

    /// Whether both are the same interned set (equal sets always are).
    pub fn same(&self, other: &Taints) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for Taints {
    fn default() -> Taints {
        Taints::new(Vec::new())
    }
}

impl Deref for Taints {
    type Target = [Taint];
    fn deref(&self) -> &[Taint] {
        &self.0
    }
}

impl From<Vec<Taint>> for Taints {
    fn from(v: Vec<Taint>) -> Taints {
        Taints::new(v)
    }
}

impl FromIterator<Taint> for Taints {
    fn from_iter<I: IntoIterator<Item = Taint>>(iter: I) -> Taints {
        Taints::new(iter.into_iter().collect())
    }
}

impl PartialEq<Vec<Taint>> for Taints {
    fn eq(&self, other: &Vec<Taint>) -> bool {
        *self.0 == **other
    }
}

pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// First taint that passes `filter` and that no toleration tolerates.
pub fn find_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|taint| filter(taint) && !tolerations_tolerate_taint(tolerations, taint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaintEffect::*;

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        Toleration::from_k8s(&k8s::Toleration {
            key: Some(key.into()),
            operator: Some(op.into()),
            value: Some(value.into()),
            effect: Some(effect.into()),
            toleration_seconds: None,
        })
    }

    #[test]
    fn equal_taint_lists_share_one_allocation() {
        let a: Taints = vec![Taint::new("pool", "gpu", NoSchedule)].into();
        let b: Taints = [Taint::new("pool", "gpu", NoSchedule)]
            .into_iter()
            .collect();
        assert!(a.same(&b));
        assert_eq!(a, vec![Taint::new("pool", "gpu", NoSchedule)]);
        let c: Taints = vec![Taint::new("pool", "gpu", NoExecute)].into();
        assert!(!a.same(&c));
        assert_ne!(a, c);
        // Order is part of the list, as in the Node object.
        let ab: Taints = vec![
            Taint::new("a", "", NoSchedule),
            Taint::new("b", "", NoSchedule),
        ]
        .into();
        let ba: Taints = vec![
            Taint::new("b", "", NoSchedule),
            Taint::new("a", "", NoSchedule),
        ]
        .into();
        assert_ne!(ab, ba);
        assert!(Taints::default().same(&Taints::default()));
        assert!(Taints::default().is_empty());
    }

    #[test]
    fn toleration_table() {
        let taint = Taint::new("foo", "bar", NoSchedule);
        let cases = [
            (
                "exists, empty key tolerates all",
                tol("", "Exists", "", ""),
                true,
            ),
            (
                "exists, empty key, other effect",
                tol("", "Exists", "", "NoExecute"),
                false,
            ),
            ("exists, same key", tol("foo", "Exists", "", ""), true),
            (
                "exists ignores value",
                tol("foo", "Exists", "zzz", ""),
                true,
            ),
            ("exists, other key", tol("baz", "Exists", "", ""), false),
            (
                "equal, same value",
                tol("foo", "Equal", "bar", "NoSchedule"),
                true,
            ),
            (
                "equal, other value",
                tol("foo", "Equal", "baz", "NoSchedule"),
                false,
            ),
            (
                "empty operator means equal",
                tol("foo", "", "bar", ""),
                true,
            ),
            (
                "equal, other effect",
                tol("foo", "Equal", "bar", "PreferNoSchedule"),
                false,
            ),
            (
                "empty key with equal compares value only",
                tol("", "Equal", "bar", ""),
                true,
            ),
            ("unknown operator", tol("foo", "Gte", "bar", ""), false),
        ];
        for (name, t, want) in cases {
            assert_eq!(t.tolerates(&taint), want, "{name}");
        }
    }

    #[test]
    fn find_untolerated_honours_filter() {
        let taints = vec![
            Taint::new("a", "", PreferNoSchedule),
            Taint::new("b", "", NoSchedule),
        ];
        let tols = vec![tol("a", "Exists", "", "")];
        let hard = |t: &Taint| matches!(t.effect, NoSchedule | NoExecute);
        assert_eq!(
            find_untolerated_taint(&taints, &tols, hard).map(|t| t.key.as_str()),
            Some("b")
        );
        assert_eq!(
            find_untolerated_taint(&taints, &tols, |t| t.key == "a"),
            None
        );
        assert_eq!(
            find_untolerated_taint(&taints, &[], |_| true).map(|t| t.key.as_str()),
            Some("a")
        );
        assert_eq!(taints[0].to_string(), "a:PreferNoSchedule");
    }
}
