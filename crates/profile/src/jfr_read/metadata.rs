//! A chunk's metadata event, read generically: the type definitions (class
//! name, fields with their type, constant-pool flag and array dimension)
//! that every other event and constant pool of the chunk is decoded with,
//! and [`Value`], the generic decoded form of one value.

use std::rc::Rc;

use super::bytes::{capacity, Cursor, JfrString, Result};
use super::FastMap;

/// How deep types may nest inline; deeper means corrupt metadata.
const MAX_DEPTH: usize = 24;

/// A primitive type, decoded directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    Bool,
    Byte,
    Char,
    Short,
    Int,
    Long,
    Float,
    Double,
    Str,
}

impl Prim {
    fn from_name(name: &str) -> Option<Prim> {
        Some(match name {
            "boolean" => Prim::Bool,
            "byte" => Prim::Byte,
            "char" => Prim::Char,
            "short" => Prim::Short,
            "int" => Prim::Int,
            "long" => Prim::Long,
            "float" => Prim::Float,
            "double" => Prim::Double,
            "java.lang.String" => Prim::Str,
            _ => return None,
        })
    }
}

/// One field of a type. Names are shared with the metadata's string table:
/// corrupt metadata naming thousands of fields with one long string costs
/// the string once.
#[derive(Clone, Debug)]
pub struct Field {
    pub name: Rc<str>,
    pub type_id: i64,
    /// Stored as a constant-pool key rather than inline.
    pub pooled: bool,
    pub array: bool,
}

/// One type (an event type, a pooled type or an inline struct).
#[derive(Clone, Debug, Default)]
pub struct Type {
    pub name: Rc<str>,
    pub fields: Vec<Field>,
    pub prim: Option<Prim>,
}

impl Type {
    /// Index of the named field.
    pub fn field(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| &*f.name == name)
    }
}

/// A decoded value. Pooled fields hold their key; the field's type says which pool.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Str(JfrString),
    Ref(i64),
    Obj(Vec<Value>),
    Array(Vec<Value>),
}

impl Value {
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) | Value::Ref(v) => Some(*v),
            Value::Float(f) => Some(*f as i64),
            _ => None,
        }
    }
}

/// All types of a chunk by id.
#[derive(Debug, Default)]
pub struct Metadata {
    pub types: FastMap<i64, Type>,
    /// The id of `java.lang.String` (its pool holds pooled strings).
    pub string_type: Option<i64>,
}

/// One element of the metadata tree; names and attributes are indexes into
/// the metadata's string table (not copies: a corrupt tree repeating one
/// long string costs its index each time).
struct Element {
    name: usize,
    attrs: Vec<(usize, usize)>,
    children: Vec<Element>,
}

impl Element {
    fn attr<'s>(&self, strings: &'s [Rc<str>], key: &str) -> Option<&'s Rc<str>> {
        self.attrs.iter().find(|&&(k, _)| &*strings[k] == key).map(|&(_, v)| &strings[v])
    }
}

impl Metadata {
    /// Reads the metadata event at the cursor (its size and type id first).
    pub fn read(c: &mut Cursor) -> Result<Metadata> {
        let start = c.pos;
        let size = c.i32()?;
        let kind = c.i64()?;
        if kind != 0 || size <= 0 {
            return Err(format!("no metadata event at byte {start} (type {kind})"));
        }
        let _start_time = c.i64()?;
        let _duration = c.i64()?;
        let _id = c.i64()?;
        let n = c.count("metadata string")?;
        let mut strings: Vec<Rc<str>> = Vec::with_capacity(capacity(n));
        for _ in 0..n {
            strings.push(match c.string()? {
                JfrString::Inline(s) => s.into(),
                JfrString::Null => "".into(),
                JfrString::Pool(_) => return Err("metadata string refers to a constant pool".into()),
            });
        }
        let root = read_element(c, strings.len(), 0)?;
        let mut meta = Metadata::default();
        meta.collect(&root, &strings);
        meta.drop_empty_fields();
        meta.string_type = meta.type_id("java.lang.String");
        Ok(meta)
    }

    /// Removes the fields whose values take no bytes (inline structs whose
    /// fields are all such structs, however nested; the JDK writes none):
    /// they carry nothing, and corrupt metadata full of them made a few
    /// bytes decode into billions of values. A type left without fields
    /// then takes no bytes ([`Metadata::is_empty_type`]).
    fn drop_empty_fields(&mut self) {
        // Worklist over the fields that can be empty (inline, not arrays):
        // a type is empty once all of them are of empty types.
        let mut pending: FastMap<i64, usize> = FastMap::default();
        let mut users: FastMap<i64, Vec<i64>> = FastMap::default();
        let mut todo: Vec<i64> = Vec::new();
        for (&id, t) in &self.types {
            if t.prim.is_some() || t.fields.iter().any(|f| f.array || f.pooled) {
                continue;
            }
            pending.insert(id, t.fields.len());
            if t.fields.is_empty() {
                todo.push(id);
            }
            for f in &t.fields {
                users.entry(f.type_id).or_default().push(id);
            }
        }
        let mut empty: crate::hash::FastSet<i64> = Default::default();
        while let Some(id) = todo.pop() {
            empty.insert(id);
            for user in users.remove(&id).unwrap_or_default() {
                if let Some(n) = pending.get_mut(&user) {
                    *n -= 1;
                    if *n == 0 {
                        todo.push(user);
                    }
                }
            }
        }
        for t in self.types.values_mut() {
            t.fields.retain(|f| f.array || f.pooled || !empty.contains(&f.type_id));
        }
    }

    /// Whether values of this type take no bytes (a struct without fields).
    pub fn is_empty_type(&self, type_id: i64) -> bool {
        self.types.get(&type_id).is_some_and(|t| t.prim.is_none() && t.fields.is_empty())
    }

    fn collect(&mut self, e: &Element, strings: &[Rc<str>]) {
        if &*strings[e.name] == "class" {
            if let (Some(id), Some(name)) = (e.attr(strings, "id").and_then(|v| v.parse().ok()), e.attr(strings, "name")) {
                let fields = e
                    .children
                    .iter()
                    .filter(|f| &*strings[f.name] == "field")
                    .filter_map(|f| {
                        Some(Field {
                            name: f.attr(strings, "name")?.clone(),
                            type_id: f.attr(strings, "class")?.parse().ok()?,
                            pooled: f.attr(strings, "constantPool").is_some_and(|v| &**v == "true"),
                            array: f.attr(strings, "dimension").is_some_and(|d| &**d != "0"),
                        })
                    })
                    .collect();
                self.types.insert(id, Type { name: name.clone(), fields, prim: Prim::from_name(name) });
            }
            return;
        }
        for child in &e.children {
            self.collect(child, strings);
        }
    }

    /// The id of the type with this name.
    pub fn type_id(&self, name: &str) -> Option<i64> {
        self.types.iter().find(|(_, t)| &*t.name == name).map(|(&id, _)| id)
    }

    /// Reads one value of a type (inline, not as a pool key).
    pub fn read_value(&self, c: &mut Cursor, type_id: i64, depth: usize) -> Result<Value> {
        let t = self.types.get(&type_id).ok_or_else(|| format!("unknown type id {type_id} at byte {}", c.pos))?;
        if let Some(p) = t.prim {
            return Ok(match p {
                Prim::Bool | Prim::Byte => Value::Int(c.u8()? as i8 as i64),
                Prim::Char | Prim::Short => Value::Int(c.i16()? as i64),
                Prim::Int => Value::Int(c.i32()? as i64),
                Prim::Long => Value::Int(c.i64()?),
                Prim::Float => Value::Float(c.f32()? as f64),
                Prim::Double => Value::Float(c.f64()?),
                Prim::Str => Value::Str(c.string()?),
            });
        }
        if depth > MAX_DEPTH {
            return Err(format!("types nest deeper than {MAX_DEPTH} (type {:?})", t.name));
        }
        let mut fields = Vec::with_capacity(t.fields.len());
        for f in &t.fields {
            fields.push(self.read_field(c, f, depth + 1)?);
        }
        Ok(Value::Obj(fields))
    }

    /// Moves past one value of a type without building it.
    pub fn skip_value(&self, c: &mut Cursor, type_id: i64, depth: usize) -> Result<()> {
        let t = self.types.get(&type_id).ok_or_else(|| format!("unknown type id {type_id} at byte {}", c.pos))?;
        if let Some(p) = t.prim {
            match p {
                Prim::Bool | Prim::Byte => c.u8().map(drop)?,
                Prim::Char | Prim::Short => c.i16().map(drop)?,
                Prim::Int => c.i32().map(drop)?,
                Prim::Long => c.i64().map(drop)?,
                Prim::Float => c.f32().map(drop)?,
                Prim::Double => c.f64().map(drop)?,
                Prim::Str => c.skip_string()?,
            }
            return Ok(());
        }
        if depth > MAX_DEPTH {
            return Err(format!("types nest deeper than {MAX_DEPTH} (type {:?})", t.name));
        }
        for f in &t.fields {
            let n = if f.array { c.count("array")? } else { 1 };
            if !f.pooled && self.is_empty_type(f.type_id) {
                continue;
            }
            for _ in 0..n {
                if f.pooled {
                    c.i64()?;
                } else {
                    self.skip_value(c, f.type_id, depth + 1)?;
                }
            }
        }
        Ok(())
    }

    /// Calls `found(type, key)` for every pool reference inside a value of a type.
    pub fn refs(&self, v: &Value, type_id: i64, found: &mut dyn FnMut(i64, i64)) {
        let (Some(t), Value::Obj(fields)) = (self.types.get(&type_id), v) else { return };
        for (f, v) in t.fields.iter().zip(fields) {
            let items = match v {
                Value::Array(items) => &items[..],
                v => std::slice::from_ref(v),
            };
            for item in items {
                match item {
                    Value::Ref(key) if f.pooled => found(f.type_id, *key),
                    Value::Obj(_) => self.refs(item, f.type_id, found),
                    Value::Str(JfrString::Pool(key)) => {
                        if let Some(id) = self.string_type {
                            found(id, *key)
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Reads one field: a pool key or an inline value, or an array of them.
    pub fn read_field(&self, c: &mut Cursor, f: &Field, depth: usize) -> Result<Value> {
        if f.array {
            let n = c.count("array")?;
            if !f.pooled && self.is_empty_type(f.type_id) {
                // Elements that take no bytes: the count is all there is.
                return Ok(Value::Array(Vec::new()));
            }
            let mut items = Vec::with_capacity(capacity(n));
            for _ in 0..n {
                items.push(self.read_single(c, f, depth)?);
            }
            return Ok(Value::Array(items));
        }
        self.read_single(c, f, depth)
    }

    fn read_single(&self, c: &mut Cursor, f: &Field, depth: usize) -> Result<Value> {
        if f.pooled {
            Ok(Value::Ref(c.i64()?))
        } else {
            self.read_value(c, f.type_id, depth)
        }
    }
}

/// An element of the tree whose string table holds `strings` strings.
fn read_element(c: &mut Cursor, strings: usize, depth: usize) -> Result<Element> {
    if depth > MAX_DEPTH {
        return Err("metadata elements nest too deep".into());
    }
    let s = |i: i32| usize::try_from(i).ok().filter(|&i| i < strings).ok_or_else(|| format!("metadata string index {i} out of range"));
    let name = s(c.i32()?)?;
    let n = c.count("metadata attribute")?;
    let mut attrs = Vec::with_capacity(capacity(n));
    for _ in 0..n {
        attrs.push((s(c.i32()?)?, s(c.i32()?)?));
    }
    let n = c.count("metadata element")?;
    let mut children = Vec::with_capacity(capacity(n));
    for _ in 0..n {
        children.push(read_element(c, strings, depth + 1)?);
    }
    Ok(Element { name, attrs, children })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A field of a test class: name, type id, pooled, array.
    pub(crate) type TestField<'a> = (&'a str, i64, bool, bool);

    /// Encodes a metadata event: strings, then root > metadata > class elements.
    pub(crate) fn metadata_bytes(classes: &[(i64, &str, &[TestField<'_>])]) -> Vec<u8> {
        let mut strings: Vec<String> = Vec::new();
        let idx = |s: &str, strings: &mut Vec<String>| -> u8 {
            if let Some(i) = strings.iter().position(|x| x == s) {
                return i as u8;
            }
            strings.push(s.to_string());
            (strings.len() - 1) as u8
        };
        let mut tree = Vec::new();
        // root: no attributes, one child "metadata" with the classes.
        tree.push(idx("root", &mut strings));
        tree.extend([0, 1]);
        tree.push(idx("metadata", &mut strings));
        tree.extend([0, classes.len() as u8]);
        for (id, name, fields) in classes {
            tree.push(idx("class", &mut strings));
            tree.push(2);
            tree.extend([idx("id", &mut strings), idx(&id.to_string(), &mut strings)]);
            tree.extend([idx("name", &mut strings), idx(name, &mut strings)]);
            tree.push(fields.len() as u8);
            for (fname, ty, pooled, array) in *fields {
                tree.push(idx("field", &mut strings));
                let mut attrs = vec![(idx("name", &mut strings), idx(fname, &mut strings)), (idx("class", &mut strings), idx(&ty.to_string(), &mut strings))];
                if *pooled {
                    attrs.push((idx("constantPool", &mut strings), idx("true", &mut strings)));
                }
                if *array {
                    attrs.push((idx("dimension", &mut strings), idx("1", &mut strings)));
                }
                tree.push(attrs.len() as u8);
                for (k, v) in attrs {
                    tree.extend([k, v]);
                }
                tree.push(0);
            }
        }
        let mut body = vec![0u8, 0, 0, 0, strings.len() as u8];
        for s in &strings {
            body.push(3);
            let mut n = s.len();
            while n >= 0x80 {
                body.push((n & 0x7f) as u8 | 0x80);
                n >>= 7;
            }
            body.push(n as u8);
            body.extend(s.as_bytes());
        }
        body.extend(tree);
        let mut out = vec![0x80, 0x80, 0x80, 0];
        out.extend(body);
        let size = out.len();
        out[0] = 0x80 | (size & 0x7f) as u8;
        out[1] = 0x80 | ((size >> 7) & 0x7f) as u8;
        out[2] = 0x80 | ((size >> 14) & 0x7f) as u8;
        out[3] = (size >> 21) as u8;
        out
    }

    #[test]
    fn reads_types_and_decodes_values_by_them() {
        let bytes = metadata_bytes(&[
            (1, "long", &[]),
            (2, "java.lang.String", &[]),
            (3, "Pair", &[("a", 1, false, false), ("s", 2, false, false)]),
            (4, "Ev", &[("pairs", 3, false, true), ("ref", 5, true, false)]),
            (5, "Pooled", &[]),
        ]);
        let meta = Metadata::read(&mut Cursor::new(&bytes, 0, true)).unwrap();
        assert_eq!(meta.types.len(), 5);
        assert_eq!(meta.type_id("Ev"), Some(4));
        let ev = &meta.types[&4];
        assert!(ev.fields[0].array && ev.fields[1].pooled);
        assert_eq!(ev.field("ref"), Some(1));
        // Ev { pairs: [ {a: 300, s: "x"} ], ref: 7 }
        let data = [1, 0xac, 0x02, 3, 1, b'x', 7];
        let v = meta.read_value(&mut Cursor::new(&data, 0, true), 4, 0).unwrap();
        assert_eq!(v, Value::Obj(vec![Value::Array(vec![Value::Obj(vec![Value::Int(300), Value::Str(JfrString::Inline("x".into()))])]), Value::Ref(7)]));
        assert!(meta.read_value(&mut Cursor::new(&data[..4], 0, true), 4, 0).is_err());
    }

    /// Found while writing the fuzzing seeds: in a chunk without compressed
    /// integers, skipping an int or a short moved 8 bytes, so every pool
    /// entry after one was misread.
    #[test]
    fn skipping_fixed_width_integers_moves_their_width() {
        let bytes = metadata_bytes(&[
            (1, "int", &[]),
            (2, "short", &[]),
            (3, "long", &[]),
            (4, "S", &[("i", 1, false, false), ("s", 2, false, false), ("l", 3, false, false)]),
        ]);
        let meta = Metadata::read(&mut Cursor::new(&bytes, 0, true)).unwrap();
        let data = [0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9, 0xff];
        let mut c = Cursor::new(&data, 0, false);
        meta.skip_value(&mut c, 4, 0).unwrap();
        assert_eq!(c.pos, 14);
        let mut c = Cursor::new(&data, 0, false);
        assert_eq!(meta.read_value(&mut c, 4, 0).unwrap(), Value::Obj(vec![Value::Int(7), Value::Int(8), Value::Int(9)]));
        assert_eq!(c.pos, 14);
    }

    /// Review finding (jfr_read): structs whose fields take no bytes, 8
    /// fields of 8 fields eight deep, decoded into 8^8 values from no bytes
    /// at all, and every array of them into as many values as its count
    /// said, however many arrays: gigabytes and minutes from a small file.
    #[test]
    fn fields_that_take_no_bytes_are_dropped() {
        let names: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
        let levels: Vec<Vec<TestField>> = (1..=8i64).map(|inner| names.iter().map(|n| (n.as_str(), inner, false, false)).collect()).collect();
        // 1 is "E" (no fields); 2..=9 have 8 fields of the type before; 10
        // is an event with the deepest, an array of E and a byte.
        let mut classes: Vec<(i64, &str, &[TestField])> = vec![(1, "E", &[]), (11, "byte", &[])];
        let level_names: Vec<String> = (2..=9).map(|i| format!("L{i}")).collect();
        for (i, fields) in levels.iter().enumerate() {
            classes.push((i as i64 + 2, level_names[i].as_str(), fields.as_slice()));
        }
        let ev: &[TestField] = &[("deep", 9, false, false), ("xs", 1, false, true), ("b", 11, false, false)];
        classes.push((10, "Ev", ev));
        let meta = Metadata::read(&mut Cursor::new(&metadata_bytes(&classes), 0, true)).unwrap();
        assert!(meta.is_empty_type(1) && meta.is_empty_type(9) && !meta.is_empty_type(11) && !meta.is_empty_type(10));
        let kept: Vec<&str> = meta.types[&10].fields.iter().map(|f| &*f.name).collect();
        assert_eq!(kept, ["xs", "b"]);
        // xs: 3 elements that take no bytes, then b = 42.
        let data = [3, 42, 0, 0];
        let mut c = Cursor::new(&data, 0, true);
        assert_eq!(meta.read_value(&mut c, 10, 0).unwrap(), Value::Obj(vec![Value::Array(Vec::new()), Value::Int(42)]));
        assert_eq!(c.pos, 2);
        let mut c = Cursor::new(&data, 0, true);
        meta.skip_value(&mut c, 10, 0).unwrap();
        assert_eq!(c.pos, 2);
        // A struct containing itself is not empty: reading it stays an error.
        let meta = Metadata::read(&mut Cursor::new(&metadata_bytes(&[(1, "Loop", &[("me", 1, false, false)])]), 0, true)).unwrap();
        assert!(!meta.is_empty_type(1));
        assert!(meta.read_value(&mut Cursor::new(&[0; 64], 0, true), 1, 0).is_err());
    }

    /// Review finding (jfr_read): every element and field copied its names
    /// out of the string table, so metadata naming many fields with one
    /// long string grew with fields × length.
    #[test]
    fn names_are_shared_with_the_string_table() {
        let long = "n".repeat(10_000);
        let fields: Vec<TestField> = (0..100).map(|_| (long.as_str(), 1, false, false)).collect();
        let meta = Metadata::read(&mut Cursor::new(&metadata_bytes(&[(1, "long", &[]), (2, long.as_str(), &fields)]), 0, true)).unwrap();
        let t = &meta.types[&2];
        assert_eq!(t.fields.len(), 100);
        assert!(t.fields.iter().all(|f| Rc::ptr_eq(&f.name, &t.name)));
    }

    /// A type name quoted in an error keeps the error on one line.
    #[test]
    fn errors_quote_type_names() {
        let meta = Metadata::read(&mut Cursor::new(&metadata_bytes(&[(1, "Lo\nop", &[("me", 1, false, false)])]), 0, true)).unwrap();
        let err = meta.skip_value(&mut Cursor::new(&[0; 64], 0, true), 1, 0).unwrap_err();
        assert!(err.contains(r#"(type "Lo\nop")"#), "{err}");
    }

    #[test]
    fn self_containing_types_are_an_error_not_a_stack_overflow() {
        let bytes = metadata_bytes(&[(1, "Loop", &[("me", 1, false, false)])]);
        let meta = Metadata::read(&mut Cursor::new(&bytes, 0, true)).unwrap();
        let err = meta.read_value(&mut Cursor::new(&[0; 64], 0, true), 1, 0).unwrap_err();
        assert!(err.contains("nest deeper"), "{err}");
    }
}
