//! The tree a YAML or JSON document is read into: nodes that keep their line and column, and how
//! serde builds them (`yaml::document` parses, `yaml::fast` reads the common shape directly).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A 1-based line and column; `0:0` when unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub column: u32,
}

impl Pos {
    pub fn new(line: u32, column: u32) -> Pos {
        Pos { line, column }
    }

    pub fn is_known(&self) -> bool {
        self.line > 0
    }
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One YAML node and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub val: Val,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Bool(bool),
    /// A number, kept as written by the parser's conversion (`10`, `1.5`).
    Num(String),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Val {
    /// What the value is, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Val::Null => "null",
            Val::Bool(_) => "boolean",
            Val::Num(_) => "number",
            Val::Str(_) => "string",
            Val::Seq(_) => "list",
            Val::Map(_) => "map",
        }
    }
}

impl Node {
    /// The text of a scalar used as a map key (Kubernetes turns YAML keys into strings).
    pub fn key_text(&self) -> Option<String> {
        match &self.val {
            Val::Str(s) | Val::Num(s) => Some(s.clone()),
            Val::Bool(b) => Some(b.to_string()),
            Val::Null => Some("null".to_string()),
            Val::Seq(_) | Val::Map(_) => None,
        }
    }

    pub(super) fn shift(&mut self, lines: u32) {
        if self.pos.is_known() {
            self.pos.line += lines;
        }
        match &mut self.val {
            Val::Seq(items) => items.iter_mut().for_each(|n| n.shift(lines)),
            Val::Map(entries) => entries.iter_mut().for_each(|(k, v)| {
                k.shift(lines);
                v.shift(lines);
            }),
            _ => {}
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<Val>::deserialize(d)?;
        let loc = spanned.referenced;
        Ok(Node {
            pos: Pos::new(
                u32::try_from(loc.line()).unwrap_or(u32::MAX),
                u32::try_from(loc.column()).unwrap_or(u32::MAX),
            ),
            val: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Val {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValVisitor)
    }
}

struct ValVisitor;

impl<'de> Visitor<'de> for ValVisitor {
    type Value = Val;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Val, E> {
        Ok(Val::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Val, E> {
        Ok(Val::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Val, D::Error> {
        Val::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Val, E> {
        Ok(Val::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Val, E> {
        Ok(Val::Num(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Val, E> {
        Ok(Val::Num(v.to_string()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Val, E> {
        Ok(Val::Num(v.to_string()))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Val, E> {
        Ok(Val::Num(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Val, E> {
        Ok(Val::Num(v.to_string()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Val, E> {
        Ok(Val::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Val, E> {
        Ok(Val::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Val, E> {
        Ok(Val::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Val, A::Error> {
        let mut items = Vec::new();
        while let Some(n) = seq.next_element::<Node>()? {
            items.push(n);
        }
        Ok(Val::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Val, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<Node>()? {
            let v = map.next_value::<Node>()?;
            entries.push((k, v));
        }
        Ok(Val::Map(entries))
    }
}
