//! Maps of the state that remember which of their keys changed, so that a
//! state snapshot can be saved as the changes since the last one
//! ([`super::StateDelta`]) instead of whole: the state grows with the log
//! (every case, run and rubric invocation stays in it), and writing it whole
//! every few tens of thousands of entries made the bytes written per entry
//! grow with the log too.
//!
//! A [`Tracked`] map reads like a `BTreeMap` (it dereferences to one) and
//! changes only through its own methods, each of which notes the key it
//! touched while tracking is on. Tracking is off in a state built by a
//! replay (a replay of the whole log would otherwise note every key), and
//! [`super::State::track_changes`] turns it on. The notes are bookkeeping,
//! not state: they are neither serialized nor compared.

use std::collections::{BTreeMap, BTreeSet};

/// A marker that compares equal to any other: bookkeeping kept beside the
/// state, which two equal states may differ in.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mark(pub(crate) Option<u64>);

impl PartialEq for Mark {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Whether the map is empty (for `skip_serializing_if`).
pub(crate) fn is_empty<K, V>(m: &Tracked<K, V>) -> bool {
    m.map.is_empty()
}

/// A `BTreeMap` that notes the keys it changes while tracking.
#[derive(Clone)]
pub struct Tracked<K, V> {
    map: BTreeMap<K, V>,
    /// The keys changed since tracking began or was last taken; `None`
    /// while not tracking.
    changed: Option<BTreeSet<K>>,
}

impl<K, V> Default for Tracked<K, V> {
    fn default() -> Self {
        Tracked {
            map: BTreeMap::new(),
            changed: None,
        }
    }
}

impl<K: Ord + Clone, V> Tracked<K, V> {
    fn note(&mut self, key: &K) {
        if let Some(changed) = &mut self.changed {
            if !changed.contains(key) {
                changed.insert(key.clone());
            }
        }
    }

    /// As `BTreeMap::insert`.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.note(&key);
        self.map.insert(key, value)
    }

    /// As `BTreeMap::remove`.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let (k, v) = self.map.remove_entry(key)?;
        self.note(&k);
        Some(v)
    }

    /// As `BTreeMap::get_mut`: the key counts as changed when it is
    /// present, whether or not the caller changes the value.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        if let Some(changed) = &mut self.changed {
            let (k, _) = self.map.get_key_value(key)?;
            if !changed.contains(key) {
                changed.insert(k.clone());
            }
        }
        self.map.get_mut(key)
    }

    /// Starts noting changed keys, forgetting any noted before.
    pub(crate) fn track(&mut self) {
        self.changed = Some(BTreeSet::new());
    }

    /// Whether changes are being noted.
    pub(crate) fn tracking(&self) -> bool {
        self.changed.is_some()
    }

    /// The changes noted since tracking began or was last taken, each key
    /// with its value now (`None`: no longer present), and tracking goes on
    /// from here. `None` when not tracking.
    pub(crate) fn take_changes(&mut self) -> Option<BTreeMap<K, Option<V>>>
    where
        V: Clone,
    {
        let changed = self.changed.replace(BTreeSet::new())?;
        Some(
            changed
                .into_iter()
                .map(|k| {
                    let v = self.map.get(&k).cloned();
                    (k, v)
                })
                .collect(),
        )
    }

    /// Applies changes taken by [`Tracked::take_changes`] (noting them
    /// when tracking).
    pub(crate) fn apply_changes(&mut self, changes: BTreeMap<K, Option<V>>) {
        for (k, v) in changes {
            self.note(&k);
            match v {
                Some(v) => {
                    self.map.insert(k, v);
                }
                None => {
                    self.map.remove(&k);
                }
            }
        }
    }
}

impl<K, V> std::ops::Deref for Tracked<K, V> {
    type Target = BTreeMap<K, V>;

    fn deref(&self) -> &BTreeMap<K, V> {
        &self.map
    }
}

impl<K, V> From<BTreeMap<K, V>> for Tracked<K, V> {
    fn from(map: BTreeMap<K, V>) -> Self {
        Tracked { map, changed: None }
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for Tracked<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        BTreeMap::from_iter(iter).into()
    }
}

impl<K: PartialEq, V: PartialEq> PartialEq for Tracked<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for Tracked<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.map.fmt(f)
    }
}

impl<K: serde::Serialize, V: serde::Serialize> serde::Serialize for Tracked<K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.map.serialize(s)
    }
}

impl<'de, K, V> serde::Deserialize<'de> for Tracked<K, V>
where
    K: serde::Deserialize<'de> + Ord,
    V: serde::Deserialize<'de>,
{
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::deserialize(d).map(Tracked::from)
    }
}

impl<'a, K, V> IntoIterator for &'a Tracked<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::collections::btree_map::Iter<'a, K, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.map.iter()
    }
}

/// A `BTreeSet` that only grows, and notes what it gains while tracking.
#[derive(Clone)]
pub struct TrackedSet<T> {
    set: BTreeSet<T>,
    added: Option<Vec<T>>,
}

impl<T> Default for TrackedSet<T> {
    fn default() -> Self {
        TrackedSet {
            set: BTreeSet::new(),
            added: None,
        }
    }
}

impl<T: Ord + Clone> TrackedSet<T> {
    /// As `BTreeSet::insert`.
    pub fn insert(&mut self, value: T) -> bool {
        if self.set.contains(&value) {
            return false;
        }
        if let Some(added) = &mut self.added {
            added.push(value.clone());
        }
        self.set.insert(value)
    }

    pub(crate) fn track(&mut self) {
        self.added = Some(Vec::new());
    }

    pub(crate) fn tracking(&self) -> bool {
        self.added.is_some()
    }

    /// What the set gained since tracking began or this was last taken.
    pub(crate) fn take_added(&mut self) -> Option<Vec<T>> {
        self.added.replace(Vec::new())
    }

    pub(crate) fn apply_added(&mut self, added: Vec<T>) {
        for v in added {
            self.insert(v);
        }
    }
}

impl<T> std::ops::Deref for TrackedSet<T> {
    type Target = BTreeSet<T>;

    fn deref(&self) -> &BTreeSet<T> {
        &self.set
    }
}

impl<T: Ord> FromIterator<T> for TrackedSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        TrackedSet {
            set: BTreeSet::from_iter(iter),
            added: None,
        }
    }
}

impl<T: PartialEq> PartialEq for TrackedSet<T> {
    fn eq(&self, other: &Self) -> bool {
        self.set == other.set
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for TrackedSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.set.fmt(f)
    }
}

impl<T: serde::Serialize> serde::Serialize for TrackedSet<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.set.serialize(s)
    }
}

impl<'de, T: serde::Deserialize<'de> + Ord> serde::Deserialize<'de> for TrackedSet<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeSet::deserialize(d).map(|set| TrackedSet { set, added: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_only_while_tracking_and_hands_over_current_values() {
        let mut m: Tracked<String, u32> = Tracked::default();
        m.insert("a".into(), 1);
        assert!(!m.tracking());
        assert_eq!(m.take_changes(), None);
        m.track();
        m.insert("b".into(), 2);
        *m.get_mut("a").expect("present") = 10;
        assert!(m.get_mut("missing").is_none());
        let changes = m.take_changes().expect("tracking");
        assert_eq!(
            changes,
            BTreeMap::from([("a".into(), Some(10)), ("b".into(), Some(2))])
        );
        // Taken: tracking goes on from here, with nothing noted.
        assert_eq!(m.take_changes().expect("tracking"), BTreeMap::new());
        let mut copy: Tracked<String, u32> = BTreeMap::from([("a".into(), 1)]).into();
        copy.apply_changes(changes);
        assert_eq!(copy, m);
        let mut gone = m.clone();
        gone.apply_changes(BTreeMap::from([("a".to_owned(), None)]));
        assert_eq!(gone.len(), 1);
    }

    #[test]
    fn a_tracked_set_hands_over_only_what_it_gained() {
        let mut s: TrackedSet<u32> = [1, 2].into_iter().collect();
        assert_eq!(s.take_added(), None);
        s.track();
        assert!(!s.insert(1));
        assert!(s.insert(3));
        let added = s.take_added().expect("tracking");
        assert_eq!(added, vec![3]);
        let mut copy: TrackedSet<u32> = [1, 2].into_iter().collect();
        copy.apply_added(added);
        assert_eq!(copy, s);
    }
}
