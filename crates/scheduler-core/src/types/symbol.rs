//! Interned strings for the values every node repeats (taint keys and values, toleration
//! keys and values): one shared allocation per distinct string, compared by pointer.
//!
//! Filter runs over hundreds of nodes per pod; comparing a toleration's key with each
//! node's taint key byte by byte reads a separate heap string per node, and on a busy
//! machine those reads are cache misses (they were the largest part of Filter's time
//! against a real API server). A [`Sym`] compares as two words, and 5,000 nodes carrying the
//! same taint hold one string between them.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex};

use super::interner::Interner;

/// An interned string: equal strings are the same allocation, so equality is pointer
/// equality. Ordered by content.
///
/// Backed by `Arc<String>` rather than `Arc<str>` so that label maps built from Syms
/// ([`super::labels::Labels`]) can hand out `&String` like the `BTreeMap<String, String>`
/// they replace; the extra word is paid once per distinct string.
#[derive(Clone)]
pub struct Sym(Arc<String>);

/// The interner's entry: hashed and compared by content, so a `&str` finds it.
#[derive(Clone)]
struct Entry(Arc<String>);

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        *self.0 == *other.0
    }
}

impl Eq for Entry {}

impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.as_str().hash(state)
    }
}

static INTERNER: LazyLock<Mutex<Interner<Entry>>> = LazyLock::new(Mutex::default);

impl Sym {
    pub fn new(s: &str) -> Sym {
        let mut i = INTERNER.lock().unwrap_or_else(|e| e.into_inner());
        let e = i.intern(
            s,
            || Entry(Arc::new(s.to_string())),
            |e| Arc::strong_count(&e.0) == 1,
        );
        Sym(e.0)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The interned string as a `String`, for APIs shaped like `BTreeMap<String, String>`.
    pub fn as_string(&self) -> &String {
        &self.0
    }

    /// Whether both are the same interned string (what `==` does; named for clarity where
    /// the pointer comparison is the point).
    pub fn same(&self, other: &Sym) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for Sym {
    fn default() -> Sym {
        Sym::new("")
    }
}

impl Deref for Sym {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq for Sym {
    fn eq(&self, other: &Sym) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Sym {}

impl PartialEq<str> for Sym {
    fn eq(&self, other: &str) -> bool {
        self.0.as_str() == other
    }
}

impl PartialEq<&str> for Sym {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_str() == *other
    }
}

impl Hash for Sym {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Consistent with pointer equality; content hashing would be too, but costs more.
        std::ptr::hash(Arc::as_ptr(&self.0), state)
    }
}

impl PartialOrd for Sym {
    fn partial_cmp(&self, other: &Sym) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Sym {
    fn cmp(&self, other: &Sym) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Sym {
        Sym::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_allocation_and_compare_equal() {
        let a = Sym::new("node.kubernetes.io/not-ready");
        let b = Sym::new(&String::from("node.kubernetes.io/not-ready"));
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.as_str().as_ptr(), b.as_str().as_ptr()));
        assert_ne!(a, Sym::new("node.kubernetes.io/unreachable"));
        assert_eq!(a, "node.kubernetes.io/not-ready");
        assert!(Sym::new("a") < Sym::new("b"));
        assert_eq!(Sym::default(), "");
        assert_eq!(
            format!("{a} {a:?}"),
            "node.kubernetes.io/not-ready \"node.kubernetes.io/not-ready\""
        );
    }

    #[test]
    fn strings_no_one_holds_are_swept_and_held_ones_stay_unique() {
        let kept = Sym::new("kept-across-sweeps");
        // Enough short-lived strings to force several sweeps.
        for i in 0..10_000 {
            let _ = Sym::new(&format!("transient-{i}"));
        }
        let size = INTERNER.lock().unwrap().len();
        assert!(size < 10_000, "swept: {size}");
        assert_eq!(Sym::new("kept-across-sweeps"), kept);
    }
}
