//! A bounded memory of values that never change once known (a stored
//! hash, a checked entry, a leaf's decoding): two generations, the newer
//! taking what is kept or looked up, the older dropped when the newer
//! fills. Emptying one map when it filled made every value cold at once:
//! the next answer read everything again, one slow answer in a few dozen
//! at 10M entries. Here a value still in use is carried into the newer
//! generation when it is looked up, so only values unused for a whole
//! generation are dropped. At most `capacity` values are held.

use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

use rustc_hash::FxHashMap;

/// Values kept by key, at most `capacity` of them (half per generation).
#[derive(Debug)]
pub struct Kept<K, V> {
    generations: Mutex<Generations<K, V>>,
    half: usize,
}

#[derive(Debug)]
struct Generations<K, V> {
    newer: FxHashMap<K, V>,
    older: FxHashMap<K, V>,
}

impl<K: Hash + Eq + Copy, V: Clone> Kept<K, V> {
    /// A memory of at most `capacity` values (at least 2).
    pub fn new(capacity: usize) -> Self {
        Kept {
            generations: Mutex::new(Generations {
                newer: FxHashMap::default(),
                older: FxHashMap::default(),
            }),
            half: (capacity / 2).max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Generations<K, V>> {
        self.generations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value kept for `key`, if any.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut g = self.lock();
        self.get_in(&mut g, key)
    }

    /// [`Kept::get`] for each of `keys`, under one lock.
    pub fn get_many(&self, keys: &[K]) -> Vec<Option<V>> {
        let mut g = self.lock();
        keys.iter().map(|k| self.get_in(&mut g, k)).collect()
    }

    fn get_in(&self, g: &mut Generations<K, V>, key: &K) -> Option<V> {
        if let Some(v) = g.newer.get(key) {
            return Some(v.clone());
        }
        let v = g.older.remove(key)?;
        self.put(g, *key, v.clone());
        Some(v)
    }

    /// The value kept for `key`, or else `make`'s, kept (made without the
    /// lock held: two callers may both make it, and the later one is kept).
    pub fn get_or_try_insert_with<E>(
        &self,
        key: K,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        if let Some(v) = self.get(&key) {
            return Ok(v);
        }
        let v = make()?;
        self.insert(key, v.clone());
        Ok(v)
    }

    /// [`Kept::get_or_try_insert_with`] for a `make` that cannot fail.
    pub fn get_or_insert_with(&self, key: K, make: impl FnOnce() -> V) -> V {
        match self.get_or_try_insert_with(key, || Ok::<V, std::convert::Infallible>(make())) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// Keeps `value` for `key`.
    pub fn insert(&self, key: K, value: V) {
        let mut g = self.lock();
        self.put(&mut g, key, value);
    }

    /// Keeps each of `values`, under one lock.
    pub fn extend(&self, values: impl IntoIterator<Item = (K, V)>) {
        let mut g = self.lock();
        for (k, v) in values {
            self.put(&mut g, k, v);
        }
    }

    fn put(&self, g: &mut Generations<K, V>, key: K, value: V) {
        if g.newer.len() >= self.half && !g.newer.contains_key(&key) {
            g.older = std::mem::take(&mut g.newer);
        }
        g.older.remove(&key);
        g.newer.insert(key, value);
    }

    /// How many values are kept now.
    pub fn len(&self) -> usize {
        let g = self.lock();
        g.newer.len() + g.older.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_more_than_its_capacity_and_what_is_used_stays() {
        let kept: Kept<u64, u64> = Kept::new(8);
        for i in 0..1000u64 {
            kept.insert(i, i * 2);
            // 0 is looked up after every insert: it is never dropped.
            assert_eq!(kept.get(&0), Some(0), "after {i}");
            assert!(kept.len() <= 8, "{} kept", kept.len());
        }
        // Values unused for a whole generation are gone; recent ones stay.
        assert_eq!(kept.get(&1), None);
        assert_eq!(kept.get(&999), Some(1998));
        assert_eq!(kept.get_many(&[998, 5, 0]), vec![Some(1996), None, Some(0)]);
    }

    #[test]
    fn keeping_a_key_again_replaces_its_value_without_growing() {
        let kept: Kept<u8, &str> = Kept::new(4);
        kept.extend([(1, "a"), (2, "b")]);
        kept.insert(1, "c");
        assert_eq!(kept.len(), 2);
        assert_eq!(kept.get(&1), Some("c"));
        assert!(!kept.is_empty());
        assert_eq!(kept.get_or_insert_with(1, || "d"), "c");
        assert_eq!(kept.get_or_insert_with(3, || "d"), "d");
        assert_eq!(
            kept.get_or_try_insert_with(4, || Err::<&str, _>("no")),
            Err("no")
        );
        assert_eq!(kept.get(&4), None);
    }
}
