//! The hash maps of the model, the encoders and the readers: foldhash,
//! seeded once per process. The standard library's SipHash was a tenth of
//! an interval cut's CPU (issue 26) and most of a JFR file's reading time;
//! foldhash is several times faster on short keys and, being seeded, still
//! does not let a crafted input file choose colliding keys.

use std::collections::{HashMap, HashSet};

/// The hasher of [`FastMap`] and [`FastSet`].
pub type FastState = foldhash::fast::RandomState;

/// A `HashMap` with [`FastState`]; make one with `FastMap::default()`.
pub type FastMap<K, V> = HashMap<K, V, FastState>;

/// A `HashSet` with [`FastState`]; make one with `FastSet::default()`.
pub type FastSet<K> = HashSet<K, FastState>;

/// An empty [`FastMap`] with room for `n` entries.
pub fn map_with_capacity<K, V>(n: usize) -> FastMap<K, V> {
    FastMap::with_capacity_and_hasher(n, FastState::default())
}
