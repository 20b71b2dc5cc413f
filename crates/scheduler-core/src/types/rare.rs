//! [`Rare`]: a part of a view most objects leave empty, stored behind one pointer.
//!
//! Pod (anti-)affinity terms, topology spread constraints and volume sources are empty for
//! the common pod, yet inline they cost ~250 bytes of every `PodInfo`. A `Rare<T>` is one
//! word: `None` for the empty value (reads see a shared static empty `T`), a box otherwise.
//! It dereferences to `T`, so readers are unchanged.

use std::fmt;
use std::ops::Deref;

/// A type with an empty value that can live in a `static`.
pub trait RareEmpty: Sized + 'static {
    /// The shared empty value.
    fn empty() -> &'static Self;
    /// Whether `self` carries nothing (stored as no allocation).
    fn is_empty_value(&self) -> bool;
}

pub struct Rare<T: RareEmpty>(Option<Box<T>>);

impl<T: RareEmpty> Rare<T> {
    pub fn new(value: T) -> Self {
        if value.is_empty_value() {
            Rare(None)
        } else {
            Rare(Some(Box::new(value)))
        }
    }

    /// Whether a value is stored (the part is not empty).
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }
}

impl<T: RareEmpty> Deref for Rare<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self.0.as_deref() {
            Some(t) => t,
            None => T::empty(),
        }
    }
}

impl<T: RareEmpty> Default for Rare<T> {
    fn default() -> Self {
        Rare(None)
    }
}

impl<T: RareEmpty + Clone> Clone for Rare<T> {
    fn clone(&self) -> Self {
        Rare(self.0.clone())
    }
}

impl<T: RareEmpty + PartialEq> PartialEq for Rare<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: RareEmpty + Eq> Eq for Rare<T> {}

impl<T: RareEmpty + fmt::Debug> fmt::Debug for Rare<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: RareEmpty> From<T> for Rare<T> {
    fn from(value: T) -> Self {
        Rare::new(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Terms(Vec<u32>);

    impl RareEmpty for Terms {
        fn empty() -> &'static Self {
            static EMPTY: Terms = Terms(Vec::new());
            &EMPTY
        }
        fn is_empty_value(&self) -> bool {
            self.0.is_empty()
        }
    }

    #[test]
    fn empty_values_take_no_allocation_and_read_the_same() {
        let empty = Rare::new(Terms(vec![]));
        assert!(!empty.is_set());
        assert_eq!(*empty, Terms(vec![]));
        assert_eq!(empty, Rare::default());
        let full = Rare::new(Terms(vec![1, 2]));
        assert!(full.is_set());
        assert_eq!((*full).0, [1, 2]);
        assert_eq!(full.clone(), full);
        assert_ne!(full, empty);
        assert_eq!(format!("{full:?}"), "Terms([1, 2])");
        assert_eq!(std::mem::size_of::<Rare<Terms>>(), 8);
    }
}
