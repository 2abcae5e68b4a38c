//! Context labels, the agent's side (design: docs/labels.md). The label
//! sets applications make with `OxProfiler.context` are named here by
//! small ids, once each: a set is interned when Java first uses it, and a
//! thread then only writes the id into its slot (`sampling::label_slots`),
//! which every sample of that thread stores with its stack. Ids live for
//! the process's life (JFR recordings refer to them across chunks); at most
//! [`labels::MAX_SETS`] sets exist, and a set first seen after that is the
//! visible over-limit set, so memory stays bounded.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use oxprof_profile::labels::{self, Label};
use oxprof_profile::Frame;

/// No labels.
pub const NONE: u32 = 0;
/// `oxprof=labels over limit`.
pub const OVER_LIMIT: u32 = 1;

struct Table {
    /// By id; 0 is the empty set, 1 the over-limit one.
    sets: Vec<Vec<Label>>,
    ids: HashMap<Vec<Label>, u32>,
    /// Sets asked for after the limit was reached.
    refused: u64,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

fn table() -> MutexGuard<'static, Option<Table>> {
    let mut t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if t.is_none() {
        let over: Vec<Label> = vec![(labels::RESERVED_KEY.into(), labels::OVER_LIMIT.into())];
        *t = Some(Table { sets: vec![Vec::new(), over.clone()], ids: [(Vec::new(), NONE), (over, OVER_LIMIT)].into_iter().collect(), refused: 0 });
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
    let outer = t.sets.get(parent as usize).cloned().unwrap_or_default();
    let set = labels::merge(&outer, &own);
    if let Some(&id) = t.ids.get(&set) {
        return Ok(id);
    }
    // Two sets beside the applications': none and over-limit.
    if t.sets.len() >= labels::MAX_SETS + 2 {
        t.refused += 1;
        return Ok(OVER_LIMIT);
    }
    let id = t.sets.len() as u32;
    t.sets.push(set.clone());
    t.ids.insert(set, id);
    Ok(id)
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

/// `label_sets=N limit=M refused=R`: sets named so far (applications'),
/// the limit, and how many more were asked for past it.
pub fn stats() -> String {
    let t = table();
    let (n, refused) = t.as_ref().map_or((0, 0), |t| (t.sets.len() - 2, t.refused));
    format!("label_sets={n} limit={} refused={refused}", labels::MAX_SETS)
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
        let stats = stats();
        assert!(stats.starts_with(&format!("label_sets={} limit={}", labels::MAX_SETS, labels::MAX_SETS)), "{stats}");
        // Known sets still get their own id.
        assert_eq!(intern(NONE, &[l("endpoint", "GET /x")]), Ok(a));
    }
}
