//! Context labels, the agent's side (design: docs/labels.md). The label
//! sets applications make with `OxProfiler.context` are named here by
//! small ids, once each: a set is interned when Java first uses it, and a
//! thread then only writes the id into its slot (`sampling::label_slots`),
//! which every sample of that thread stores with its stack. At most
//! [`labels::MAX_SETS`] sets exist at a time, and a set first seen past
//! that is the visible over-limit set, so memory stays bounded.
//!
//! Continuous profiling (`loop=`) recycles ids, so per-request labels
//! (trace ids) work for weeks: at the end of an interval whose table is
//! over a quarter full ([`recycle`]), every id no thread has in its slot
//! retires: it keeps its name, and Java, told by a new generation number,
//! asks for its sets again (getting a retiring id back makes it live). An
//! id still retired at the next recycle, and in no slot, is free for a new
//! set. A sample carrying an id was taken while some slot held it, so it
//! is read (every store at an interval's end, the JFR logs at their cut)
//! before the id can be given to another set: a whole interval later.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use oxprof_profile::labels::{self, Label};
use oxprof_profile::Frame;

/// No labels.
pub const NONE: u32 = 0;
/// `oxprof=labels over limit`.
pub const OVER_LIMIT: u32 = 1;

struct Table {
    /// By id; 0 is the empty set, 1 the over-limit one (free ids: empty).
    sets: Vec<Vec<Label>>,
    ids: HashMap<Vec<Label>, u32>,
    /// Ids in no slot at the last recycle and not asked for since.
    retiring: HashSet<u32>,
    /// Ids given back, for new sets.
    free: Vec<u32>,
    /// Bumped by every recycle (Java drops the ids it cached before).
    generation: u32,
    /// Ids freed by recycles so far.
    recycled: u64,
}

/// A table fuller than this is recycled at an interval's end.
const RECYCLE_AT: usize = labels::MAX_SETS / 4;

impl Table {
    fn new() -> Table {
        let over: Vec<Label> = vec![(labels::RESERVED_KEY.into(), labels::OVER_LIMIT.into())];
        Table {
            sets: vec![Vec::new(), over.clone()],
            ids: [(Vec::new(), NONE), (over, OVER_LIMIT)].into_iter().collect(),
            retiring: HashSet::new(),
            free: Vec::new(),
            generation: 0,
            recycled: 0,
        }
    }

    /// Sets that exist (live or retiring), the applications' only.
    fn named(&self) -> usize {
        self.sets.len() - 2 - self.free.len()
    }

    /// The id of the set `own` (checked keys, bounded values) makes inside
    /// set `parent`; a retiring id asked for is live again.
    fn intern(&mut self, parent: u32, own: &[Label]) -> u32 {
        let outer = self.sets.get(parent as usize).cloned().unwrap_or_default();
        let set = labels::merge(&outer, own);
        if let Some(&id) = self.ids.get(&set) {
            self.retiring.remove(&id);
            return id;
        }
        if self.named() >= labels::MAX_SETS {
            // Not counted here: Java stops asking once refused (until a
            // recycle) and counts each context it opens with this set.
            return OVER_LIMIT;
        }
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(slot) = self.sets.get_mut(id as usize) {
                    *slot = set.clone();
                }
                id
            }
            None => {
                self.sets.push(set.clone());
                (self.sets.len() - 1) as u32
            }
        };
        self.ids.insert(set, id);
        id
    }

    /// See [`recycle`]. A free id's set is empty, which no named set is
    /// (the empty set is [`NONE`]).
    fn recycle(&mut self, in_slots: &HashSet<u32>) -> Option<(usize, usize)> {
        if self.named() <= RECYCLE_AT && self.retiring.is_empty() {
            return None;
        }
        let to_free: Vec<u32> = self.retiring.iter().copied().filter(|id| !in_slots.contains(id)).collect();
        for &id in &to_free {
            if let Some(set) = self.sets.get_mut(id as usize) {
                self.ids.remove(set);
                set.clear();
            }
            self.free.push(id);
        }
        self.recycled += to_free.len() as u64;
        let sets = &self.sets;
        self.retiring =
            (OVER_LIMIT + 1..sets.len() as u32).filter(|&id| !in_slots.contains(&id) && sets.get(id as usize).is_some_and(|s| !s.is_empty())).collect();
        self.generation = self.generation.wrapping_add(1);
        Some((self.retiring.len(), to_free.len()))
    }
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

fn table() -> MutexGuard<'static, Option<Table>> {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if t.is_none() {
        *t = Some(Table::new());
    }
    t
}

/// The id of the set `own` makes inside set `parent` (see
/// [`labels::merge`]): keys must be valid ([`labels::valid_key`], not the
/// reserved one), values are cut at [`labels::MAX_VALUE_CHARS`]. `Err` names
/// a bad key; past the limit the over-limit set's id.
pub fn intern(parent: u32, own: &[Label]) -> Result<u32, String> {
    for (k, _) in own {
        if !labels::valid_key(k) || k == labels::RESERVED_KEY {
            return Err(format!("'{k}' is not a label key: 1 to {} of A-Z a-z 0-9 _ . : / - (and not '{}')", labels::MAX_KEY_CHARS, labels::RESERVED_KEY));
        }
    }
    let own: Vec<Label> = own.iter().map(|(k, v)| (k.clone(), labels::bounded_value(v))).collect();
    let mut guard = table();
    let Some(t) = guard.as_mut() else { return Ok(OVER_LIMIT) };
    Ok(t.intern(parent, &own))
}

/// At the end of a continuous-profiling interval, after every store and
/// log was read: frees the ids that retired at the last recycle and are in
/// no slot (`in_slots`) now, retires every other id no slot holds, and
/// starts a new generation (see the module comment). Does nothing while
/// the table is under a quarter full and nothing is retiring. Returns the
/// ids (retired, freed).
pub fn recycle(in_slots: &HashSet<u32>) -> Option<(usize, usize)> {
    let mut guard = table();
    let t = guard.as_mut()?;
    let done = t.recycle(in_slots)?;
    crate::sampling::label_slots::set_generation(t.generation);
    Some(done)
}

/// The labels of set `id`, outermost first (empty for 0 or an unknown id).
pub fn set(id: u32) -> Vec<Label> {
    if id == NONE {
        return Vec::new();
    }
    table().as_ref().and_then(|t| t.sets.get(id as usize).cloned()).unwrap_or_default()
}

/// The root frames of set `id` in a profile.
pub fn frames(id: u32) -> Vec<Frame> {
    labels::frames(&set(id)).collect()
}

/// `label_sets=N limit=M refused=R recycled=C generation=G`: sets named so
/// far (applications'), the limit, how many contexts were opened with a set
/// refused past it (`refused`, counted by Java: once refused, it stops
/// asking the agent until a recycle), the ids recycled and the generation.
pub fn stats(refused: u64) -> String {
    let t = table();
    let (n, recycled, generation) = t.as_ref().map_or((0, 0, 0), |t| (t.named(), t.recycled, t.generation));
    format!("label_sets={n} limit={} refused={refused} recycled={recycled} generation={generation}", labels::MAX_SETS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(k: &str, v: &str) -> Label {
        (k.into(), v.into())
    }

    #[test]
    fn sets_are_named_once_nest_and_stay_bounded() {
        let a = intern(NONE, &[l("endpoint", "GET /x")]).unwrap();
        assert!(a > OVER_LIMIT);
        assert_eq!(intern(NONE, &[l("endpoint", "GET /x")]), Ok(a));
        let b = intern(a, &[l("step", "db")]).unwrap();
        assert_eq!(set(b), [l("endpoint", "GET /x"), l("step", "db")]);
        // The same set reached another way is the same id.
        assert_eq!(intern(NONE, &[l("endpoint", "GET /x"), l("step", "db")]), Ok(b));
        assert!(intern(NONE, &[l("bad key", "v")]).unwrap_err().contains("'bad key'"));
        assert!(intern(NONE, &[l("oxprof", "v")]).is_err());
        let long = intern(NONE, &[l("v", &"x".repeat(1000))]).unwrap();
        assert_eq!(set(long)[0].1.chars().count(), labels::MAX_VALUE_CHARS + 1);
        assert_eq!(frames(a)[0].name, "[endpoint=GET /x]");
        // Past the limit: the over-limit set, and no growth.
        let mut last = 0;
        for i in 0..labels::MAX_SETS + 10 {
            last = intern(NONE, &[l("n", &i.to_string())]).unwrap();
        }
        assert_eq!(last, OVER_LIMIT);
        assert_eq!(set(OVER_LIMIT), [l("oxprof", "labels over limit")]);
        let stats = stats(0);
        assert!(stats.starts_with(&format!("label_sets={} limit={}", labels::MAX_SETS, labels::MAX_SETS)), "{stats}");
        // Known sets still get their own id.
        assert_eq!(intern(NONE, &[l("endpoint", "GET /x")]), Ok(a));
    }

    /// Ids in a slot survive recycles with their names; others retire for
    /// one recycle (named, and live again when asked for) and are then
    /// given to new sets; the table never holds more than the limit.
    #[test]
    fn recycling_frees_only_ids_unused_for_a_whole_interval() {
        let mut t = Table::new();
        let held = t.intern(NONE, &[l("trace_id", "held")]);
        let back = t.intern(NONE, &[l("trace_id", "back")]);
        let gone = t.intern(NONE, &[l("trace_id", "gone")]);
        assert_eq!(t.recycle(&HashSet::from([held])), None, "a table under a quarter full is left alone");
        for i in 0..RECYCLE_AT {
            t.intern(NONE, &[l("trace_id", &i.to_string())]);
        }
        let slots = HashSet::from([held]);
        let (retired, freed) = t.recycle(&slots).unwrap();
        assert_eq!((retired, freed), (RECYCLE_AT + 2, 0), "first recycle: everything but the held id retires");
        assert_eq!(t.generation, 1);
        // A retiring id keeps its name, and asking for its set makes it live.
        assert_eq!(t.sets[back as usize], [l("trace_id", "back")]);
        assert_eq!(t.intern(NONE, &[l("trace_id", "back")]), back);
        let (_, freed) = t.recycle(&slots).unwrap();
        assert_eq!(freed, RECYCLE_AT + 1, "second recycle frees what stayed retired");
        assert!(t.sets[gone as usize].is_empty() && !t.ids.contains_key(&vec![l("trace_id", "gone")]));
        assert_eq!(t.sets[held as usize], [l("trace_id", "held")]);
        assert_eq!(t.sets[back as usize], [l("trace_id", "back")], "asked for again since the first recycle");
        // Freed ids go to new sets; the table does not grow while ids are free.
        let len = t.sets.len();
        let new = t.intern(NONE, &[l("trace_id", "new")]);
        assert!(new < len as u32 && t.sets.len() == len);
        assert_eq!(t.sets[new as usize], [l("trace_id", "new")]);
        // Many more sets than the limit over many intervals: never over it,
        // never refused while each interval makes fewer than half of it
        // (the last interval's ids are still retiring).
        for round in 0..20 {
            for i in 0..labels::MAX_SETS / 2 - 8 {
                assert_ne!(t.intern(NONE, &[l("trace_id", &format!("{round}-{i}"))]), OVER_LIMIT, "round {round}");
            }
            t.recycle(&slots);
            assert!(t.named() <= labels::MAX_SETS);
        }
    }
}
