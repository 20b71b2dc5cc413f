//! Label maps of the compact views: a sorted, shared slice of interned (key, value) pairs.
//!
//! A `BTreeMap<String, String>` with three labels costs a ~540-byte B-tree leaf plus six
//! strings; every node and pod has one, and a node's copy-on-write clone (when a pod is
//! assumed onto it while a snapshot holds it) copied all of it. Here keys and values are
//! [`Sym`]s (each distinct string stored once for the process: `kubernetes.io/os=linux` on
//! 5,000 nodes is one string), the pairs sit in one `Arc<[_]>` that clones by reference
//! count, and an empty map allocates nothing. Lookups keep `BTreeMap`'s shape (`get` gives
//! `Option<&String>`, `iter` yields pairs in key order) so plugins read it as before.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::symbol::Sym;

/// Anything label selectors can be matched against: the views' [`Labels`] and the plain
/// maps other objects (namespaces, tests) keep.
pub trait LabelSet {
    /// The value of `key`, if the label is set.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelSet for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelSet for Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<T: LabelSet + ?Sized> LabelSet for &T {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }
}

impl<T: LabelSet + ?Sized> LabelSet for Arc<T> {
    fn label(&self, key: &str) -> Option<&str> {
        (**self).label(key)
    }
}

/// Immutable-by-sharing label map; sorted by key, keys unique.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Labels(Option<Arc<[(Sym, Sym)]>>);

impl Labels {
    pub fn new() -> Self {
        Labels(None)
    }

    /// Builds from pairs in any order; a repeated key keeps the last value, as collecting
    /// into a `BTreeMap` would.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut v: Vec<(Sym, Sym)> = pairs
            .into_iter()
            .map(|(k, v)| (Sym::new(k.as_ref()), Sym::new(v.as_ref())))
            .collect();
        // A stable sort keeps equal keys in input order, so the last of a run wins below.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Sym, Sym)> = Vec::with_capacity(v.len());
        for pair in v {
            match out.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => out.push(pair),
            }
        }
        Self::from_sorted(out)
    }

    fn from_sorted(v: Vec<(Sym, Sym)>) -> Self {
        if v.is_empty() {
            Labels(None)
        } else {
            Labels(Some(Arc::from(v)))
        }
    }

    fn pairs(&self) -> &[(Sym, Sym)] {
        self.0.as_deref().unwrap_or(&[])
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.pairs().binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn get(&self, key: &str) -> Option<&String> {
        let i = self.position(key).ok()?;
        Some(self.pairs()[i].1.as_string())
    }

    /// The value under an interned key, compared by pointer (no string reads).
    pub fn get_sym(&self, key: &Sym) -> Option<&Sym> {
        self.pairs().iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Whether every pair of this set is in `other` (a nodeSelector against node labels),
    /// by pointer: no string is read.
    pub fn is_subset_of(&self, other: &Labels) -> bool {
        self.pairs()
            .iter()
            .all(|(k, v)| other.get_sym(k) == Some(v))
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key`, returning the previous value. Rebuilds the shared slice: meant for
    /// building and tests, not for hot paths.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        let mut v = self.pairs().to_vec();
        let pair = (Sym::new(&key), Sym::new(&value));
        let old = match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut v[i], pair).1.as_str().to_string()),
            Err(i) => {
                v.insert(i, pair);
                None
            }
        };
        *self = Self::from_sorted(v);
        old
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.position(key).ok()?;
        let mut v = self.pairs().to_vec();
        let (_, old) = v.remove(i);
        *self = Self::from_sorted(v);
        Some(old.as_str().to_string())
    }

    /// Pairs in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &String)> + ExactSizeIterator {
        self.pairs()
            .iter()
            .map(|(k, v)| (k.as_string(), v.as_string()))
    }

    /// Interned pairs in key order.
    pub fn iter_syms(&self) -> impl ExactSizeIterator<Item = &(Sym, Sym)> {
        self.pairs().iter()
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl Iterator<Item = &String> {
        self.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.pairs().len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// A plain map copy, for APIs that still take one.
    pub fn to_btree(&self) -> BTreeMap<String, String> {
        self.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

impl std::ops::Index<&str> for Labels {
    type Output = String;
    fn index(&self, key: &str) -> &String {
        self.get(key).expect("no label with this key")
    }
}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a String, &'a String);
    type IntoIter = Box<dyn Iterator<Item = (&'a String, &'a String)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl FromIterator<(String, String)> for Labels {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        Labels::from_pairs(iter)
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for Labels {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(iter: I) -> Self {
        Labels::from_pairs(iter)
    }
}

impl From<&BTreeMap<String, String>> for Labels {
    fn from(m: &BTreeMap<String, String>) -> Self {
        // Already sorted and unique.
        Labels::from_sorted(m.iter().map(|(k, v)| (Sym::new(k), Sym::new(v))).collect())
    }
}

impl From<BTreeMap<String, String>> for Labels {
    fn from(m: BTreeMap<String, String>) -> Self {
        Labels::from(&m)
    }
}

impl From<Option<&BTreeMap<String, String>>> for Labels {
    fn from(m: Option<&BTreeMap<String, String>>) -> Self {
        m.map(Labels::from).unwrap_or_default()
    }
}

impl PartialEq<BTreeMap<String, String>> for Labels {
    fn eq(&self, other: &BTreeMap<String, String>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b)
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_node_selector_is_a_subset_when_every_pair_is_on_the_node() {
        let node = Labels::from_pairs([("zone", "a"), ("disk", "ssd"), ("os", "linux")]);
        let sel = |kv: &[(&str, &str)]| Labels::from_pairs(kv.iter().copied());
        assert!(
            sel(&[]).is_subset_of(&node),
            "an empty selector matches every node"
        );
        assert!(sel(&[("zone", "a"), ("os", "linux")]).is_subset_of(&node));
        assert!(!sel(&[("zone", "b")]).is_subset_of(&node), "other value");
        assert!(
            !sel(&[("zone", "a"), ("gpu", "")]).is_subset_of(&node),
            "missing key"
        );
        assert!(
            !sel(&[("disk", "")]).is_subset_of(&node),
            "empty value is a value"
        );
        assert!(!sel(&[("zone", "a")]).is_subset_of(&Labels::new()));
    }

    #[test]
    fn lookups_match_a_btreemap() {
        let m = map(&[("zone", "a"), ("app", "web"), ("kubernetes.io/os", "linux")]);
        let l = Labels::from(&m);
        assert_eq!(l, m);
        for key in ["zone", "app", "kubernetes.io/os", "missing", ""] {
            assert_eq!(l.get(key), m.get(key), "{key}");
            assert_eq!(l.contains_key(key), m.contains_key(key), "{key}");
            assert_eq!(l.label(key), m.label(key), "{key}");
        }
        assert!(l.iter().eq(m.iter()), "same pairs in the same order");
        assert!(l.keys().eq(m.keys()));
        assert_eq!(l["app"], "web");
        assert_eq!(l.len(), 3);
        assert_eq!(l.to_btree(), m);
        assert_eq!(format!("{l:?}"), format!("{m:?}"));
    }

    #[test]
    fn built_in_any_order_with_the_last_duplicate_winning() {
        let l = Labels::from_pairs([("b", "1"), ("a", "1"), ("b", "2"), ("c", "3"), ("b", "3")]);
        let m: BTreeMap<String, String> =
            [("b", "1"), ("a", "1"), ("b", "2"), ("c", "3"), ("b", "3")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        assert_eq!(l, m);
        assert_eq!(l.get("b").map(String::as_str), Some("3"));
    }

    #[test]
    fn insert_and_remove_keep_order_and_report_old_values() {
        let mut l = Labels::new();
        assert!(l.is_empty());
        assert_eq!(l.insert("b".into(), "1".into()), None);
        assert_eq!(l.insert("a".into(), "2".into()), None);
        assert_eq!(l.insert("b".into(), "3".into()), Some("1".into()));
        assert_eq!(l, map(&[("a", "2"), ("b", "3")]));
        assert_eq!(l.remove("a"), Some("2".into()));
        assert_eq!(l.remove("a"), None);
        assert_eq!(l.remove("b"), Some("3".into()));
        assert!(l.is_empty(), "an emptied map holds no allocation");
        assert_eq!(l, Labels::default());
    }

    #[test]
    fn equal_maps_share_interned_strings_and_clones_share_the_slice() {
        let a = Labels::from_pairs([("kubernetes.io/os", "linux")]);
        let b = Labels::from(&map(&[("kubernetes.io/os", "linux")]));
        assert_eq!(a, b);
        let (ka, va) = &a.iter_syms().next().unwrap();
        let (kb, vb) = &b.iter_syms().next().unwrap();
        assert!(
            ka.same(kb) && va.same(vb),
            "one string per distinct key and value"
        );
        let c = a.clone();
        assert!(std::ptr::eq(a.pairs(), c.pairs()), "a clone is a reference");
        assert_eq!(
            a.get_sym(&Sym::new("kubernetes.io/os")),
            Some(&Sym::new("linux"))
        );
        assert_eq!(a.get_sym(&Sym::new("kubernetes.io/arch")), None);
        assert_ne!(a, Labels::from_pairs([("kubernetes.io/os", "windows")]));
    }

    #[test]
    fn small_inline() {
        assert_eq!(std::mem::size_of::<Labels>(), 16);
    }
}
