//! Kubernetes objects as the commands read them from files: YAML or JSON documents kept with
//! their lines and columns, read field by field by a `Reader` whose every error names the file,
//! line and column and the field's path (`ObjectError`), and resource quantities. Shared by
//! `match`'s workloads and Nodes (`scheduling`) and the DRA objects (`dra`).

use std::collections::BTreeMap;

use crate::validate;
use crate::yaml::document::{self, Node, Pos, Val};

/// The order of two resourceVersions of one resource, as Kubernetes defines it since 1.35
/// (KEP-5504, apimachinery's `CompareResourceVersion`): each a positive decimal integer of any
/// length without leading zeros, compared by length and then digit by digit. `None` when either
/// is not such an integer: an opaque version (an older or another storage), equal or not.
pub fn compare_resource_versions(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    let valid =
        |v: &str| !v.is_empty() && !v.starts_with('0') && v.bytes().all(|c| c.is_ascii_digit());
    (valid(a) && valid(b)).then(|| a.len().cmp(&b.len()).then_with(|| a.cmp(b)))
}

/// A problem in an input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectError {
    pub source: String,
    pub pos: Pos,
    /// Where in the object, e.g. `spec.template.spec.tolerations[0].effect`.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ObjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.source)?;
        if self.pos.is_known() {
            write!(f, ":{}", self.pos)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// A resource quantity: its value in thousandths and the text it was written as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    pub milli: i128,
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.milli % 1000 == 0 {
            write!(f, "{}", self.milli / 1000)
        } else {
            write!(f, "{}m", self.milli)
        }
    }
}

/// Reads a tree with a source name for its errors.
pub struct Reader<'a> {
    pub source: &'a str,
}

pub type Res<T> = Result<T, ObjectError>;

impl Reader<'_> {
    /// The object's `kind`: a document without one is not a Kubernetes object.
    pub fn kind(&self, doc: &Node, path: &str) -> Res<String> {
        self.map(doc, path)?;
        match self.field(doc, path, "kind")? {
            Some(k) => self.string(k, &join(path, "kind")),
            None => Err(self.err(doc, path, "no kind: not a Kubernetes object")),
        }
    }

    pub fn err(&self, node: &Node, path: &str, message: impl Into<String>) -> ObjectError {
        ObjectError {
            source: self.source.to_string(),
            pos: node.pos,
            path: path.to_string(),
            message: message.into(),
        }
    }

    pub fn map<'n>(&self, node: &'n Node, path: &str) -> Res<&'n [(Node, Node)]> {
        match &node.val {
            Val::Map(entries) => Ok(entries),
            other => Err(self.err(
                node,
                path,
                format!("expected a map, found {}", other.kind()),
            )),
        }
    }

    pub fn seq<'n>(&self, node: &'n Node, path: &str) -> Res<&'n [Node]> {
        match &node.val {
            Val::Seq(items) => Ok(items),
            other => Err(self.err(
                node,
                path,
                format!("expected a list, found {}", other.kind()),
            )),
        }
    }

    /// A string, as the API server takes it: a number or a boolean must be quoted.
    pub fn string(&self, node: &Node, path: &str) -> Res<String> {
        match &node.val {
            Val::Str(s) => Ok(s.clone()),
            Val::Num(n) => Err(self.err(
                node,
                path,
                format!("expected a string, found number {n} (quote it: \"{n}\")"),
            )),
            Val::Bool(b) => Err(self.err(
                node,
                path,
                format!("expected a string, found boolean {b} (quote it: \"{b}\")"),
            )),
            other => Err(self.err(
                node,
                path,
                format!("expected a string, found {}", other.kind()),
            )),
        }
    }

    /// A field of a map; a null value counts as absent, as in Kubernetes.
    pub fn field<'n>(&self, node: &'n Node, path: &str, key: &str) -> Res<Option<&'n Node>> {
        let entries = self.map(node, path)?;
        Ok(entries
            .iter()
            .find(|(k, _)| k.key_text().as_deref() == Some(key))
            .map(|(_, v)| v)
            .filter(|v| v.val != Val::Null))
    }

    pub fn opt_string(&self, node: &Node, path: &str, key: &str) -> Res<Option<String>> {
        match self.field(node, path, key)? {
            Some(v) => self.string(v, &join(path, key)).map(Some),
            None => Ok(None),
        }
    }

    /// A map of strings (`labels`, `nodeSelector`).
    pub fn string_map(&self, node: &Node, path: &str) -> Res<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (k, v) in self.map(node, path)? {
            let key = k
                .key_text()
                .ok_or_else(|| self.err(k, path, "a key must be a string"))?;
            let value = self.string(v, &join(path, &key))?;
            out.push((key, value));
        }
        Ok(out)
    }

    /// A map of quantities (`requests`, `allocatable`): numbers or strings.
    pub fn quantities(&self, node: &Node, path: &str) -> Res<BTreeMap<String, Quantity>> {
        let mut out = BTreeMap::new();
        for (k, v) in self.map(node, path)? {
            let key = k
                .key_text()
                .ok_or_else(|| self.err(k, path, "a key must be a string"))?;
            let here = join(path, &key);
            let text = match &v.val {
                Val::Str(s) | Val::Num(s) => s.clone(),
                other => {
                    return Err(self.err(
                        v,
                        &here,
                        format!("expected a quantity, found {}", other.kind()),
                    ));
                }
            };
            let milli = validate::quantity_milli(&text)
                .map_err(|e| self.err(v, &here, format!("{text:?}: {e}")))?;
            out.insert(key, Quantity { milli });
        }
        Ok(out)
    }
}

pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Parses a file's documents; a syntax error is the first error.
pub fn documents(source: &str, text: &str) -> Res<Vec<Node>> {
    let (docs, errors) = document::parse_documents(text);
    if let Some(e) = errors.into_iter().next() {
        return Err(ObjectError {
            source: source.to_string(),
            pos: e.pos,
            path: String::new(),
            message: e.message,
        });
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::compare_resource_versions;

    /// KEP-5504's rules: by length, then digit by digit, past any integer type's range; a
    /// version that is not a positive integer without leading zeros is opaque.
    #[test]
    fn resource_versions_compare_as_kubernetes_defines() {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let cases = [
            ("9", "10", Some(Less)),
            ("10", "9", Some(Greater)),
            ("123", "123", Some(Equal)),
            ("18446744073709551616", "18446744073709551617", Some(Less)),
            (
                "99999999999999999999999",
                "100000000000000000000000",
                Some(Less),
            ),
            ("0", "1", None),
            ("007", "7", None),
            ("", "1", None),
            ("a1b2", "a1b3", None),
            ("-1", "1", None),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(a, b, _)| (*a, *b, compare_resource_versions(a, b)))
            .collect();
        let want: Vec<_> = cases.iter().map(|(a, b, o)| (*a, *b, *o)).collect();
        assert_eq!(got, want);
    }
}
