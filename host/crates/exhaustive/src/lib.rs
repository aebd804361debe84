//! The tests' proof that a list names every variant of an enum. A state
//! machine's table is walked over `all()` of its inputs; [`variants!`]
//! checks that list against the enum with an exhaustive `match`, so an
//! input added to the enum does not compile until it is named there, and
//! the machine's test fails until `all()` lists it.
//!
//! It owns only that check. It must never be compiled into the product
//! (it is only ever a dev-dependency) nor list a value itself: the lists
//! are the tests'.

#![warn(missing_docs)]

use std::collections::BTreeSet;
use std::fmt::Debug;

/// The variants of an enum, by the name of the pattern matching each.
pub struct Variants<T: 'static> {
    /// Every variant's pattern, as written.
    pub names: &'static [&'static str],
    /// The pattern a value matches (an exhaustive `match`).
    pub name: fn(&T) -> &'static str,
}

/// `variants!(Type; Type::A { .. }, Type::B(_), Type::C)`: one pattern per
/// variant of `Type`, matched exhaustively (a variant left out, or added
/// to the enum later, is a compile error).
#[macro_export]
macro_rules! variants {
    ($ty:ty; $($p:pat),+ $(,)?) => {
        $crate::Variants::<$ty> {
            names: &[$(stringify!($p)),+],
            name: |v: &$ty| match v {
                $($p => stringify!($p),)+
            },
        }
    };
}

impl<T: Debug + PartialEq> Variants<T> {
    /// Panics unless `all` holds every variant (at least one value of
    /// each) and no value twice.
    pub fn assert_listed(&self, all: &[T]) {
        let seen: BTreeSet<&str> = all.iter().map(self.name).collect();
        let missing: Vec<&&str> = self.names.iter().filter(|n| !seen.contains(**n)).collect();
        assert!(missing.is_empty(), "all() leaves out {missing:?}");
        for (i, v) in all.iter().enumerate() {
            assert!(!all[..i].contains(v), "all() lists {v:?} twice");
        }
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, PartialEq)]
    enum Three {
        A,
        B(bool),
        C { n: u8 },
    }

    fn three() -> super::Variants<Three> {
        variants!(Three; Three::A, Three::B(_), Three::C { .. })
    }

    #[test]
    fn a_list_with_every_variant_passes() {
        three().assert_listed(&[Three::A, Three::B(true), Three::B(false), Three::C { n: 1 }]);
    }

    #[test]
    #[should_panic(expected = "leaves out")]
    fn a_list_missing_a_variant_fails() {
        three().assert_listed(&[Three::A, Three::B(true)]);
    }

    #[test]
    #[should_panic(expected = "twice")]
    fn a_list_with_a_value_twice_fails() {
        three().assert_listed(&[Three::A, Three::A, Three::B(true), Three::C { n: 1 }]);
    }
}
