//! Paths to GC roots: the chain of references from a GC root to given
//! objects (one sampled instance per leak suspect), found with JVMTI
//! `FollowReferences` within a time budget.
//!
//! The walk runs in a JVMTI environment of its own, so its tags (one per
//! object reached: its node number) never mix with the allocation
//! profiler's class tags, and disposing of the environment drops them all
//! at once. Each node remembers the node it was first reached from and the
//! kind of reference, which gives a path from a root to every node. The
//! JVM is stopped while the walk runs (it is a VM operation), so the walk
//! gives up at its deadline or once every target is found. Field names are
//! found afterwards, by reading the referrer's fields with JNI and comparing
//! them with the referee, which does not depend on JVMTI's field numbering.
//!
//! A path must say what keeps the object alive, so the walk tells strong
//! references from the referent of a `java.lang.ref.Reference` (weak, soft,
//! phantom, final), which FollowReferences reports as an ordinary field. The
//! classes of references are tagged before the walk (the callback sees the
//! referrer's class tag), and the referent's JVMTI field index is its
//! position among `Reference`'s declared fields: JVMTI numbers a
//! superclass's fields before a subclass's, and `Reference` extends
//! `Object`, which has none, and implements no interface. An object first
//! reached through a referent (or under one) is moved under a strong
//! referrer when one shows up, and the walk does not stop early for a
//! target it has only reached that way. Without that, every object reached
//! from a class that a lambda's `MethodType` names came out under
//! `MethodType.internTable`'s weak entries (measured on JDK 17, 21 and 25:
//! `GC root (system class): class java.lang.invoke.MethodType`, eleven steps
//! before the static field that really held the leak).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use jvmti_sys::*;

use crate::jvmti::{Jni, Jvmti};
use crate::symbols::class_name_from_signature;

/// Tags of targets before the walk: this bit plus the target's index.
const TARGET_TAG: jlong = 1 << 48;
/// Set, before the walk, on the classes of `java.lang.ref.Reference`
/// objects, and kept beside their node number when the walk reaches them.
const REFERENCE_CLASS_TAG: jlong = 1 << 49;
/// The node number (plus one) in a tag.
const ID_MASK: jlong = TARGET_TAG - 1;
const NO_PARENT: u32 = u32::MAX;
/// At most this many objects are numbered (about 16 bytes each).
const MAX_NODES: usize = 50_000_000;
/// Steps printed per path; longer chains keep the root and the last steps.
const MAX_STEPS: usize = 24;
const ACC_STATIC: jint = 0x0008;

#[derive(Clone, Copy)]
struct Node {
    parent: u32,
    kind: jvmtiHeapReferenceKind,
    index: jint,
    /// Reached through the referent of a `java.lang.ref.Reference`, or
    /// under a node that was, when it was numbered.
    weak: bool,
    /// This node's own edge is the referent of a `java.lang.ref.Reference`.
    weak_edge: bool,
}

struct Walk {
    nodes: Vec<Node>,
    found: Vec<Option<u32>>,
    /// Whether a target's node was reached through strong references only.
    strong: Vec<bool>,
    remaining: usize,
    /// JVMTI's index of `Reference.referent` in a reference object, if known.
    referent_index: Option<jint>,
    deadline: Instant,
    calls: u64,
    timed_out: bool,
}

/// The outcome: a path (root first) per target, and a note when some are
/// missing.
pub struct Paths {
    pub paths: Vec<Option<Vec<String>>>,
    pub note: Option<String>,
}

/// The node a tag names, if it names one.
fn node_of(tag: jlong) -> Option<u32> {
    (tag & TARGET_TAG == 0 && tag & ID_MASK != 0).then(|| ((tag & ID_MASK) - 1) as u32)
}

unsafe extern "C" fn on_reference(
    kind: jvmtiHeapReferenceKind,
    info: *const jvmtiHeapReferenceInfo,
    _class_tag: jlong,
    referrer_class_tag: jlong,
    _size: jlong,
    tag_ptr: *mut jlong,
    referrer_tag_ptr: *mut jlong,
    _length: jint,
    user_data: *mut std::ffi::c_void,
) -> jint {
    let abort = JVMTI_VISIT_ABORT as jint;
    catch_unwind(AssertUnwindSafe(|| {
        if tag_ptr.is_null() || user_data.is_null() {
            return 0;
        }
        // SAFETY: user_data is the &mut Walk passed to FollowReferences,
        // used by this callback only while the walk runs.
        let walk = unsafe { &mut *(user_data as *mut Walk) };
        walk.calls += 1;
        if walk.calls % 4096 == 0 && Instant::now() > walk.deadline {
            walk.timed_out = true;
            return abort;
        }
        // SAFETY: the JVM passes valid tag pointers for the callback's duration.
        let tag = unsafe { *tag_ptr };
        let index = if info.is_null() {
            -1
        } else {
            // SAFETY: the union's first member is an index for field, array
            // element and constant pool references; other kinds ignore it.
            unsafe { (*info).field.index }
        };
        let through_referent = kind == JVMTI_HEAP_REFERENCE_FIELD && referrer_class_tag & REFERENCE_CLASS_TAG != 0 && Some(index) == walk.referent_index;
        let parent = if referrer_tag_ptr.is_null() {
            NO_PARENT
        } else {
            // SAFETY: as above; the referrer was numbered when it was reached.
            node_of(unsafe { *referrer_tag_ptr }).unwrap_or(NO_PARENT)
        };
        if let Some(id) = node_of(tag) {
            // Reached before: keep its first path, unless that was a thread's
            // stack and this is a heap reference (see `prefer_heap_path`),
            // or it was a weak one and this is strong (`prefer_strong_path`).
            let edge = Node { parent, kind, index, weak: through_referent, weak_edge: through_referent };
            if prefer_strong_path(walk, id, edge) || prefer_heap_path(walk, id, edge) {
                return if walk.remaining == 0 { abort } else { 0 };
            }
            return 0;
        }
        if walk.nodes.len() >= MAX_NODES {
            walk.timed_out = true;
            return abort;
        }
        let weak = through_referent || walk.nodes.get(parent as usize).is_some_and(|p| p.weak);
        let id = walk.nodes.len() as u32;
        walk.nodes.push(Node { parent, kind, index, weak, weak_edge: through_referent });
        // SAFETY: writing the object's tag in our own environment; a
        // reference class keeps its mark.
        unsafe { *tag_ptr = (tag & REFERENCE_CLASS_TAG) | (id as jlong + 1) };
        if tag & TARGET_TAG != 0 {
            let target = (tag & ID_MASK) as usize;
            if let Some(slot) = walk.found.get_mut(target) {
                if slot.is_none() {
                    *slot = Some(id);
                    if !weak {
                        walk.strong[target] = true;
                        walk.remaining = walk.remaining.saturating_sub(1);
                        if walk.remaining == 0 {
                            return abort; // all found: stop early
                        }
                    }
                }
            }
        }
        JVMTI_VISIT_OBJECTS as jint
    }))
    .unwrap_or(abort)
}

/// A reference held by a running method (stack or JNI local, thread) says
/// less about a leak than the heap path that keeps the object alive after
/// the method returns: roots are reported before the heap is walked, so
/// an object first reached from a stack is moved under a heap referrer when
/// one shows up, unless that referrer is reachable only through the object
/// itself (which would make a cycle).
///
/// Only a strong referrer is taken (a weak one would not keep the object
/// alive after the method returns either). Returns whether it moved it.
fn prefer_heap_path(walk: &mut Walk, id: u32, edge: Node) -> bool {
    let transient =
        |k| matches!(k, JVMTI_HEAP_REFERENCE_STACK_LOCAL | JVMTI_HEAP_REFERENCE_JNI_LOCAL | JVMTI_HEAP_REFERENCE_THREAD | JVMTI_HEAP_REFERENCE_OTHER);
    let Some(node) = walk.nodes.get(id as usize) else { return false };
    if node.parent != NO_PARENT || !transient(node.kind) || edge.parent == NO_PARENT || edge.weak {
        return false;
    }
    if walk.nodes.get(edge.parent as usize).is_none_or(|p| p.weak) {
        return false;
    }
    let mut up = edge.parent;
    for _ in 0..walk.nodes.len() {
        if up == id {
            return false;
        }
        match walk.nodes.get(up as usize) {
            Some(n) if n.parent != NO_PARENT => up = n.parent,
            _ => break,
        }
    }
    walk.nodes[id as usize] = Node { weak: false, ..edge };
    true
}

/// An object first reached through the referent of a reference (or under
/// one) is moved under a strong referrer when one shows up: that is what
/// keeps it alive. No cycle can arise: a node marked strong is never moved
/// by this, so its chain holds only nodes marked strong (a root that
/// `prefer_heap_path` moves goes under a strong node too, and that
/// function checks for cycles itself), and `id`, marked weak, is not in
/// the new referrer's chain. The nodes numbered under `id` keep their weak
/// mark although their chain now runs through a strong `id`, so the
/// targets found that way are checked along their whole chain (the walk
/// stops early once every one is held strongly). Returns whether it moved it.
fn prefer_strong_path(walk: &mut Walk, id: u32, edge: Node) -> bool {
    if edge.weak || !walk.nodes.get(id as usize).is_some_and(|n| n.weak) {
        return false;
    }
    if edge.parent != NO_PARENT && walk.nodes.get(edge.parent as usize).is_none_or(|p| p.weak) {
        return false;
    }
    walk.nodes[id as usize] = edge;
    for target in 0..walk.found.len() {
        if let (Some(node), false) = (walk.found[target], walk.strong[target]) {
            if strong_chain(&walk.nodes, node) {
                walk.strong[target] = true;
                walk.remaining = walk.remaining.saturating_sub(1);
            }
        }
    }
    true
}

/// Whether no edge on the chain from a root to `id` is a referent.
fn strong_chain(nodes: &[Node], mut id: u32) -> bool {
    for _ in 0..nodes.len() {
        match nodes.get(id as usize) {
            Some(n) if n.weak_edge => return false,
            Some(n) if n.parent != NO_PARENT => id = n.parent,
            _ => return true,
        }
    }
    false
}

/// Finds a path from a GC root to each target within `budget`. Targets are
/// local references, which this deletes (null ones are skipped); the caller
/// must hold no other references to objects of interest.
///
/// # Safety
/// Each target must be null or a local reference of the current local frame
/// that is not used afterwards.
pub unsafe fn find(jni: Jni, targets: &[jobject], budget: Duration) -> Paths {
    let none = |note: String| Paths { paths: targets.iter().map(|_| None).collect(), note: Some(note) };
    let Some(vm) = jni.java_vm() else {
        return none("no JavaVM for the heap walk".into());
    };
    // SAFETY: `vm` is the process's JavaVM, which JNI just gave us.
    let env = match unsafe { Jvmti::from_vm(vm) } {
        Ok(e) => e,
        Err(e) => return none(format!("no JVMTI environment for the heap walk ({e})")),
    };
    // SAFETY: the targets are local references (this function's contract).
    let result = unsafe { walk_in(env, jni, targets, budget) };
    env.dispose();
    result.unwrap_or_else(none)
}

/// # Safety
/// As [`find`]'s targets.
unsafe fn walk_in(env: Jvmti, jni: Jni, targets: &[jobject], budget: Duration) -> Result<Paths, String> {
    // SAFETY: all-zero capabilities are valid; we set the one we need.
    let mut caps: jvmtiCapabilities = unsafe { std::mem::zeroed() };
    caps.set_can_tag_objects(1);
    env.add_capabilities(&caps).map_err(|e| format!("this JVM cannot tag objects for a heap walk ({e})"))?;
    // Before the targets' tags, which take precedence on a class object.
    let referent_index = tag_reference_classes(env, jni);
    let mut wanted = 0;
    for (i, &t) in targets.iter().enumerate() {
        // SAFETY: `t` is a live local reference (this function's contract).
        if !t.is_null() && unsafe { env.set_tag(t, TARGET_TAG | i as jlong) }.is_ok() {
            wanted += 1;
        }
        // Our own reference would be the shortest path (a JNI local root):
        // drop it; the tag finds the object.
        // SAFETY: as above, and not used afterwards.
        unsafe { jni.delete_local(t) };
    }
    let started = Instant::now();
    let mut walk = Walk {
        nodes: Vec::new(),
        found: vec![None; targets.len()],
        strong: vec![false; targets.len()],
        remaining: wanted,
        referent_index,
        deadline: started + budget,
        calls: 0,
        timed_out: false,
    };
    // SAFETY: an all-null callback table is valid; we set the reference callback.
    let mut callbacks: jvmtiHeapCallbacks = unsafe { std::mem::zeroed() };
    callbacks.heap_reference_callback = Some(on_reference);
    // SAFETY: on_reference takes its user data as the `Walk` it is here,
    // which outlives the call.
    unsafe { env.follow_references(&callbacks, &mut walk as *mut Walk as *const std::ffi::c_void) }.map_err(|e| format!("FollowReferences failed ({e})"))?;
    let found = walk.found.iter().filter(|f| f.is_some()).count();
    let strong = walk.strong.iter().filter(|s| **s).count();
    crate::log::debug(&format!(
        "gcroots: {} objects numbered, {found} of {wanted} targets found ({strong} through strong references) in {:?}; referent index {:?}",
        walk.nodes.len(),
        started.elapsed(),
        walk.referent_index
    ));
    let mut paths = Vec::with_capacity(targets.len());
    for f in &walk.found {
        paths.push(f.map(|id| describe(env, jni, &walk.nodes, id)));
    }
    let note = if found < wanted {
        let why = if walk.timed_out {
            format!("the walk stopped at its {:.1} s budget (gcroots=DURATION raises it)", budget.as_secs_f64())
        } else {
            "the others were not reachable from a root".into()
        };
        Some(format!("found for {found} of {wanted} suspects; {why}"))
    } else {
        None
    };
    Ok(Paths { paths, note })
}

/// Marks the loaded classes of `java.lang.ref.Reference` objects with
/// [`REFERENCE_CLASS_TAG`] and returns JVMTI's field index of
/// `Reference.referent` (see the module doc), or None when either fails
/// (then referents count as strong references, as before).
fn tag_reference_classes(env: Jvmti, jni: Jni) -> Option<jint> {
    if !jni.push_frame(16) {
        return None;
    }
    let result = (|| {
        let reference = jni.find_class(c"java/lang/ref/Reference");
        if reference.is_null() {
            jni.clear_exception();
            return None;
        }
        // SAFETY: `reference` is the live local reference FindClass returned.
        let fields = unsafe { env.class_fields(reference) }.ok()?;
        let index = fields.iter().position(|&f| {
            // SAFETY: as above, and `f` is one of its fields.
            unsafe { env.field_info(reference, f) }.is_ok_and(|(name, _, _)| name == "referent")
        })? as jint;
        let classes = env.loaded_classes().ok()?;
        // GetLoadedClasses made a local reference per class.
        jni.ensure_local_capacity(classes.len() + 16);
        let mut tagged = 0usize;
        for &class in &classes {
            // SAFETY: `class` is a live local reference from GetLoadedClasses;
            // each superclass reference is deleted after its last use.
            let mut up = unsafe { jni.superclass(class) };
            let mut is_reference = false;
            while !up.is_null() {
                // SAFETY: `up` and `reference` are live local references.
                is_reference = unsafe { jni.is_same(up, reference) };
                // SAFETY: `up` is a live local reference to a class.
                let next = if is_reference { std::ptr::null_mut() } else { unsafe { jni.superclass(up) } };
                // SAFETY: `up` is not used afterwards.
                unsafe { jni.delete_local(up) };
                up = next;
            }
            // SAFETY: `class` is live (see above); the tag is in our own environment.
            if is_reference && unsafe { env.set_tag(class, REFERENCE_CLASS_TAG) }.is_ok() {
                tagged += 1;
            }
            // SAFETY: `class` is not used afterwards.
            unsafe { jni.delete_local(class) };
        }
        crate::log::debug(&format!("gcroots: {tagged} reference classes of {} loaded", classes.len()));
        Some(index)
    })();
    jni.pop_frame();
    result
}

/// Node ids from the root to `id`.
fn chain(nodes: &[Node], mut id: u32) -> Vec<u32> {
    let mut out = vec![id];
    while let Some(n) = nodes.get(id as usize) {
        if n.parent == NO_PARENT || out.len() > nodes.len() {
            break;
        }
        id = n.parent;
        out.push(id);
    }
    out.reverse();
    out
}

fn root_kind(kind: jvmtiHeapReferenceKind) -> &'static str {
    match kind {
        JVMTI_HEAP_REFERENCE_JNI_GLOBAL => "JNI global",
        JVMTI_HEAP_REFERENCE_SYSTEM_CLASS => "system class",
        JVMTI_HEAP_REFERENCE_MONITOR => "monitor",
        JVMTI_HEAP_REFERENCE_STACK_LOCAL => "stack local",
        JVMTI_HEAP_REFERENCE_JNI_LOCAL => "JNI local",
        JVMTI_HEAP_REFERENCE_THREAD => "thread",
        _ => "other",
    }
}

/// The steps of the path to `id`, each `edge -> object`, the first naming the root.
fn describe(env: Jvmti, jni: Jni, nodes: &[Node], id: u32) -> Vec<String> {
    let ids = chain(nodes, id);
    // A reference class's tag carries its mark beside the number.
    let tags: Vec<jlong> = ids.iter().flat_map(|&i| [i as jlong + 1, REFERENCE_CLASS_TAG | (i as jlong + 1)]).collect();
    if !jni.push_frame(2 * tags.len() as jint + 16) {
        return vec!["(no room for local references)".into()];
    }
    let objects = env.objects_with_tags(&tags).unwrap_or_default();
    let object = |tag: jlong| objects.iter().find(|(_, t)| *t & ID_MASK == tag).map(|(o, _)| *o).unwrap_or(std::ptr::null_mut());
    let mut steps = Vec::with_capacity(ids.len());
    for (pos, &i) in ids.iter().enumerate() {
        let Some(node) = nodes.get(i as usize) else { break };
        let obj = object(i as jlong + 1);
        // SAFETY: `obj` is null or a local reference GetObjectsWithTags
        // returned in the frame pushed above, live until pop_frame below.
        let what = unsafe { object_name(env, jni, obj) };
        if pos == 0 {
            steps.push(format!("GC root ({}): {what}", root_kind(node.kind)));
            continue;
        }
        let parent = if pos > 0 { object(ids[pos - 1] as jlong + 1) } else { std::ptr::null_mut() };
        let edge = match node.kind {
            // SAFETY: `parent` and `obj` as above; for a static field
            // reference, the parent node is a class.
            JVMTI_HEAP_REFERENCE_STATIC_FIELD => {
                format!("static field {}", unsafe { static_field_name(env, jni, parent, obj) }.unwrap_or_else(|| format!("#{}", node.index)))
            }
            // SAFETY: `parent` and `obj` as above.
            JVMTI_HEAP_REFERENCE_FIELD => match unsafe { instance_field_name(env, jni, parent, obj) } {
                // FollowReferences follows weak and soft referents too.
                Some(f) if f == "java.lang.ref.Reference.referent" => format!("field {f} (weak or soft: does not keep it alive)"),
                Some(f) => format!("field {f}"),
                None => format!("field #{}", node.index),
            },
            JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT => format!("element [{}]", node.index),
            JVMTI_HEAP_REFERENCE_CLASS => "class".into(),
            JVMTI_HEAP_REFERENCE_CLASS_LOADER => "class loader".into(),
            JVMTI_HEAP_REFERENCE_CONSTANT_POOL => "constant pool".into(),
            JVMTI_HEAP_REFERENCE_SUPERCLASS => "superclass".into(),
            JVMTI_HEAP_REFERENCE_INTERFACE => "interface".into(),
            JVMTI_HEAP_REFERENCE_PROTECTION_DOMAIN => "protection domain".into(),
            JVMTI_HEAP_REFERENCE_SIGNERS => "signers".into(),
            k => format!("reference kind {k}"),
        };
        steps.push(format!("{edge} -> {what}"));
    }
    jni.pop_frame();
    if steps.len() > MAX_STEPS {
        let cut = steps.len() - (MAX_STEPS - 1);
        let mut short = vec![steps[0].clone(), format!("... {} steps ...", cut - 1)];
        short.extend(steps.drain(cut..));
        return short;
    }
    steps
}

/// # Safety
/// `class` must be a live JNI reference to a class.
unsafe fn class_name(env: Jvmti, class: jclass) -> String {
    // SAFETY: `class` is live (this function's contract).
    unsafe { env.class_signature(class) }.map(|s| class_name_from_signature(&s)).unwrap_or_else(|_| "?".into())
}

/// `java.util.ArrayList`, or `class Foo` for a class object.
///
/// # Safety
/// `obj` must be null or a live JNI reference.
unsafe fn object_name(env: Jvmti, jni: Jni, obj: jobject) -> String {
    if obj.is_null() {
        return "(object gone)".into();
    }
    // SAFETY: `obj` is live and not null (this function's contract).
    let class = unsafe { jni.object_class(obj) };
    // SAFETY: `class` is the local reference GetObjectClass just returned,
    // deleted after its last use.
    let name = unsafe { class_name(env, class) };
    // SAFETY: as above.
    unsafe { jni.delete_local(class) };
    if name == "java.lang.Class" {
        // SAFETY: `obj` is live, and a class object.
        format!("class {}", unsafe { class_name(env, obj as jclass) })
    } else {
        name
    }
}

fn is_reference(sig: &str) -> bool {
    sig.starts_with('L') || sig.starts_with('[')
}

/// The static field of `class` that holds `value`.
///
/// # Safety
/// `class` must be null or a live JNI reference to a class, `value` null or
/// a live JNI reference.
unsafe fn static_field_name(env: Jvmti, jni: Jni, class: jobject, value: jobject) -> Option<String> {
    if class.is_null() || value.is_null() {
        return None;
    }
    let class = class as jclass;
    // SAFETY: `class` is live (this function's contract).
    for f in unsafe { env.class_fields(class) }.ok()? {
        // SAFETY: as above, and `f` is one of its fields.
        let Ok((name, sig, modifiers)) = (unsafe { env.field_info(class, f) }) else { continue };
        if modifiers & ACC_STATIC == 0 || !is_reference(&sig) {
            continue;
        }
        // SAFETY: `f` is a static field of `class` of a reference type.
        let v = unsafe { jni.static_object_field(class, f) };
        // SAFETY: `v` is null or the local reference just returned, `value`
        // live (this function's contract); `v` is deleted after its last use.
        let same = !v.is_null() && unsafe { jni.is_same(v, value) };
        // SAFETY: as above.
        unsafe { jni.delete_local(v) };
        if same {
            // SAFETY: `class` is live (this function's contract).
            return Some(format!("{}.{name}", unsafe { class_name(env, class) }));
        }
    }
    None
}

/// The instance field of `obj` (or of a superclass) that holds `value`.
///
/// # Safety
/// `obj` and `value` must each be null or a live JNI reference.
unsafe fn instance_field_name(env: Jvmti, jni: Jni, obj: jobject, value: jobject) -> Option<String> {
    if obj.is_null() || value.is_null() {
        return None;
    }
    // SAFETY: `obj` is live and not null (this function's contract).
    let mut class = unsafe { jni.object_class(obj) };
    // `class` is always a local reference returned by GetObjectClass or
    // GetSuperclass in this call, deleted only when replaced or on return.
    while !class.is_null() {
        // SAFETY: `class` is live (see above).
        for f in unsafe { env.class_fields(class) }.unwrap_or_default() {
            // SAFETY: as above, and `f` is one of its fields.
            let Ok((name, sig, modifiers)) = (unsafe { env.field_info(class, f) }) else { continue };
            if modifiers & ACC_STATIC != 0 || !is_reference(&sig) {
                continue;
            }
            // SAFETY: `f` is an instance field of a reference type of `obj`'s
            // class or one of its superclasses; `obj` is live.
            let v = unsafe { jni.object_field(obj, f) };
            // SAFETY: `v` is null or the local reference just returned,
            // `value` live (this function's contract); `v` is deleted after
            // its last use.
            let same = !v.is_null() && unsafe { jni.is_same(v, value) };
            // SAFETY: as above.
            unsafe { jni.delete_local(v) };
            if same {
                // SAFETY: `class` is live (see above), deleted after its last use.
                let owner = unsafe { class_name(env, class) };
                // SAFETY: as above.
                unsafe { jni.delete_local(class) };
                return Some(format!("{owner}.{name}"));
            }
        }
        // SAFETY: `class` is live (see above); it is replaced by `next`
        // after its deletion.
        let next = unsafe { jni.superclass(class) };
        // SAFETY: as above.
        unsafe { jni.delete_local(class) };
        class = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_run_from_the_root() {
        let n = |parent| Node { parent, kind: 0, index: 0, weak: false, weak_edge: false };
        let nodes = vec![n(NO_PARENT), n(0), n(1), n(NO_PARENT), n(3)];
        assert_eq!(chain(&nodes, 2), vec![0, 1, 2]);
        assert_eq!(chain(&nodes, 4), vec![3, 4]);
        assert_eq!(chain(&nodes, 0), vec![0]);
    }

    fn walk(nodes: Vec<Node>, found: Vec<Option<u32>>) -> Walk {
        let n = found.len();
        Walk { nodes, found, strong: vec![false; n], remaining: n, referent_index: Some(0), deadline: Instant::now(), calls: 0, timed_out: false }
    }

    #[test]
    fn a_weakly_reached_object_moves_under_a_strong_referrer() {
        let field = JVMTI_HEAP_REFERENCE_FIELD;
        let n = |parent, weak| Node { parent, kind: field, index: 0, weak, weak_edge: false };
        // 0 root; 1 a weak reference object; 2 its referent (weak); 3 under 2
        // (weak); 4 a strong object under the root; 5 the target, under 3;
        // 6 another target, under 2.
        let referent = Node { weak_edge: true, ..n(1, true) };
        let mut w = walk(vec![n(NO_PARENT, false), n(0, false), referent, n(2, true), n(0, false), n(3, true), n(2, true)], vec![Some(5), Some(6)]);
        w.remaining = 2;
        // A weak edge, or one from a weak node, does not move it.
        assert!(!prefer_strong_path(&mut w, 2, referent));
        assert!(!prefer_strong_path(&mut w, 2, n(3, false)));
        // A strong node is never moved.
        assert!(!prefer_strong_path(&mut w, 4, n(0, false)));
        assert_eq!(chain(&w.nodes, 5), vec![0, 1, 2, 3, 5]);
        // From the strong node 4: the chain no longer runs through the referent.
        assert!(prefer_strong_path(&mut w, 3, n(4, false)));
        assert_eq!(chain(&w.nodes, 5), vec![0, 4, 3, 5]);
        assert!(!w.nodes[3].weak && w.nodes[5].weak, "the nodes under it keep their mark");
        // The target's whole chain is strong now; the other's is not.
        assert_eq!((w.strong[0], w.strong[1], w.remaining), (true, false, 1));
        // The other target itself moves under a strong node.
        assert!(prefer_strong_path(&mut w, 6, n(4, false)));
        assert_eq!((w.strong[1], w.remaining), (true, 0));
        assert!(strong_chain(&w.nodes, 6) && !strong_chain(&w.nodes, 2));
    }

    #[test]
    fn a_stack_root_moves_only_under_a_strong_heap_referrer() {
        let n = |parent, kind, weak| Node { parent, kind, index: 0, weak, weak_edge: weak };
        let field = JVMTI_HEAP_REFERENCE_FIELD;
        let mut w = walk(
            vec![
                n(NO_PARENT, JVMTI_HEAP_REFERENCE_STACK_LOCAL, false),
                n(NO_PARENT, JVMTI_HEAP_REFERENCE_SYSTEM_CLASS, false),
                n(1, field, true),
                n(1, field, false),
            ],
            vec![Some(0)],
        );
        assert!(!prefer_heap_path(&mut w, 0, n(2, field, false)), "under a weak node");
        assert!(!prefer_heap_path(&mut w, 0, n(3, field, true)), "through a referent");
        assert!(prefer_heap_path(&mut w, 0, n(3, field, false)));
        assert_eq!(chain(&w.nodes, 0), vec![1, 3, 0]);
    }
}
