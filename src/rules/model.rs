//! NodeFeatureRule objects, read from positioned YAML nodes the way NFD's API server admits them.
//!
//! The checks here are the CRD's structural schema plus strict field validation (what
//! `kubectl apply` enforces): known fields only, the right types, required fields present, `op`
//! one of NFD's operators. A `null` optional field counts as absent (the API server prunes it).
//! An object with any such problem is refused as a whole, as the API server would refuse it;
//! every problem of every rule is reported, each with its position.

use crate::yaml::document::{Node, Pos, Val};

/// The operators a NodeFeatureRule admits (the CRD's enum).
pub const OPS: [&str; 13] = [
    "In",
    "NotIn",
    "InRegexp",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Ge",
    "Lt",
    "Le",
    "GtLt",
    "GeLe",
    "IsTrue",
    "IsFalse",
];

pub const API_VERSION: &str = "nfd.k8s-sigs.io/v1alpha1";
pub const KIND: &str = "NodeFeatureRule";

/// One problem found while reading an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub pos: Pos,
    pub object: Option<String>,
    pub rule: Option<String>,
    pub message: String,
}

/// A `NodeFeatureRule` object.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectSpec {
    pub name: String,
    pub pos: Pos,
    /// What could be read, also of a refused object (`rules check` looks at it all).
    pub rules: Vec<RuleSpec>,
    /// False when the object has problems: the API server would refuse it.
    pub admitted: bool,
}

/// One rule of `spec.rules`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleSpec {
    pub name: String,
    pub pos: Pos,
    pub labels: Vec<Entry>,
    pub labels_template: Option<Text>,
    pub annotations: Vec<Entry>,
    pub vars: Vec<Entry>,
    pub vars_template: Option<Text>,
    pub taints: Vec<TaintSpec>,
    pub extended_resources: Vec<Entry>,
    pub match_features: Vec<TermSpec>,
    pub match_any: Vec<MatchAnySpec>,
}

/// A key-value pair of `labels`, `annotations`, `vars` or `extendedResources`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub value: String,
    pub pos: Pos,
}

/// A template and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    pub text: String,
    pub pos: Pos,
    /// Where the text stands in the file, for errors inside it (set by the loader, which has
    /// the file).
    pub origin: Option<super::template::Origin>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaintSpec {
    pub key: String,
    pub value: String,
    pub effect: String,
    pub pos: Pos,
}

/// One element of `matchAny`.
#[derive(Debug, Clone, PartialEq)]
pub struct MatchAnySpec {
    pub pos: Pos,
    pub terms: Vec<TermSpec>,
}

/// One term of `matchFeatures`.
#[derive(Debug, Clone, PartialEq)]
pub struct TermSpec {
    pub feature: String,
    pub pos: Pos,
    /// `None` when absent; `Some(vec![])` for `matchExpressions: {}`.
    pub match_expressions: Option<Vec<ExprSpec>>,
    pub match_name: Option<ExprSpec>,
}

/// One match expression, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ExprSpec {
    /// The element it applies to (the `matchExpressions` key); empty for `matchName`.
    pub key: String,
    pub pos: Pos,
    pub op: String,
    pub op_pos: Pos,
    pub values: Vec<(String, Pos)>,
    pub value_type: String,
    pub type_pos: Pos,
}

/// The error for `matchExpressions` written as a list (Kubernetes' nodeSelector shape, `- key:
/// vendor`, `operator`/`op`, `values`/`value`): NFD's is a map of element name to expression,
/// and the message shows the same expressions in that shape.
fn expressions_as_list(path: &str, items: &[Node]) -> String {
    let text = |n: &Node| match &n.val {
        Val::Str(t) | Val::Num(t) => Some(t.clone()),
        Val::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let field = |item: &Node, names: &[&str]| -> Option<Node> {
        match &item.val {
            Val::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.key_text().is_some_and(|t| names.contains(&t.as_str())))
                .map(|(_, v)| v.clone()),
            _ => None,
        }
    };
    let example: Vec<String> = items
        .iter()
        .filter_map(|item| {
            let key = text(&field(item, &["key"])?)?;
            let op = field(item, &["op", "operator"])
                .and_then(|o| text(&o))
                .unwrap_or_else(|| "Exists".into());
            let values = field(item, &["value", "values"])
                .map(|v| match &v.val {
                    Val::Seq(vs) => vs
                        .iter()
                        .filter_map(text)
                        .map(|t| format!("{t:?}"))
                        .collect::<Vec<_>>(),
                    _ => text(&v).map(|t| format!("{t:?}")).into_iter().collect(),
                })
                .unwrap_or_default();
            Some(if values.is_empty() {
                format!("{key}: {{op: {op}}}")
            } else {
                format!("{key}: {{op: {op}, value: [{}]}}", values.join(", "))
            })
        })
        .collect();
    let shape = if example.is_empty() {
        "matchExpressions: {vendor: {op: In, value: [\"10de\"]}}".to_string()
    } else {
        format!("matchExpressions: {{{}}}", example.join(", "))
    };
    format!(
        "{path} must be a map of element name to expression, got a list (the shape of a nodeSelector's matchExpressions, not NFD's); write: {shape}"
    )
}

struct Cx {
    problems: Vec<Problem>,
    object: Option<String>,
    rule: Option<String>,
}

impl Cx {
    fn err(&mut self, pos: Pos, message: impl Into<String>) {
        self.problems.push(Problem {
            pos,
            object: self.object.clone(),
            rule: self.rule.clone(),
            message: message.into(),
        });
    }

    /// The entries of a map node, or an error naming what was expected.
    fn map<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n [(Node, Node)]> {
        match &node.val {
            Val::Map(entries) => Some(entries),
            other => {
                self.err(
                    node.pos,
                    format!("{path} must be a map, got {}", other.kind()),
                );
                None
            }
        }
    }

    fn seq<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n [Node]> {
        match &node.val {
            Val::Seq(items) => Some(items),
            other => {
                self.err(
                    node.pos,
                    format!("{path} must be a list, got {}", other.kind()),
                );
                None
            }
        }
    }

    fn string(&mut self, node: &Node, path: &str) -> Option<String> {
        match &node.val {
            Val::Str(s) => Some(s.clone()),
            Val::Num(s) => {
                self.err(
                    node.pos,
                    format!("{path} must be a string, got number {s} (quote it: \"{s}\")"),
                );
                None
            }
            Val::Bool(b) => {
                self.err(
                    node.pos,
                    format!("{path} must be a string, got boolean {b} (quote the value: YAML reads unquoted true/false, yes/no, on/off, y/n as booleans)"),
                );
                None
            }
            other => {
                self.err(
                    node.pos,
                    format!("{path} must be a string, got {}", other.kind()),
                );
                None
            }
        }
    }

    fn key(&mut self, node: &Node, path: &str) -> Option<String> {
        let k = node.key_text();
        if k.is_none() {
            self.err(node.pos, format!("{path}: a key must be a scalar"));
        }
        k
    }

    fn unknown_field(&mut self, node: &Node, key: &str, path: &str, known: &[&str]) {
        let hint = crate::names::closest(key, known.iter().copied())
            .map(|k| format!(" (did you mean \"{k}\"?)"))
            .unwrap_or_default();
        let known = known.join(", ");
        self.err(
            node.pos,
            format!("unknown field \"{key}\" in {path}{hint}; known fields: {known}"),
        );
    }

    /// A map of strings (`labels`, `vars`, ...).
    fn string_map(&mut self, node: &Node, path: &str) -> Vec<Entry> {
        let mut out = Vec::new();
        if matches!(node.val, Val::Null) {
            return out;
        }
        let Some(entries) = self.map(node, path) else {
            return out;
        };
        for (k, v) in entries {
            let Some(key) = self.key(k, path) else {
                continue;
            };
            if let Some(value) = self.string(v, &format!("{path}.{key}")) {
                out.push(Entry {
                    key,
                    value,
                    pos: k.pos,
                });
            }
        }
        out
    }
}

/// Reads the objects of one document: a `NodeFeatureRule`, or a `List` of them. An object with
/// problems is returned as far as it could be read, not admitted, with its problems.
pub fn read_document(doc: &Node) -> (Vec<ObjectSpec>, Vec<Problem>) {
    let mut cx = Cx {
        problems: Vec::new(),
        object: None,
        rule: None,
    };
    let Some(entries) = cx.map(doc, "a NodeFeatureRule document") else {
        return (Vec::new(), cx.problems);
    };
    let kind = entries
        .iter()
        .find(|(k, _)| k.key_text().as_deref() == Some("kind"))
        .and_then(|(_, v)| match &v.val {
            Val::Str(s) => Some(s.as_str()),
            _ => None,
        });
    if matches!(kind, Some("List" | "NodeFeatureRuleList")) {
        let mut objects = Vec::new();
        let mut problems = Vec::new();
        for (k, v) in entries {
            if k.key_text().as_deref() != Some("items") {
                continue;
            }
            let Some(items) = cx.seq(v, "items") else {
                continue;
            };
            for item in items {
                let (o, p) = read_object(item);
                objects.extend(o);
                problems.extend(p);
            }
        }
        problems.extend(cx.problems);
        return (objects, problems);
    }
    let (o, p) = read_object(doc);
    (o.into_iter().collect(), p)
}

fn read_object(doc: &Node) -> (Option<ObjectSpec>, Vec<Problem>) {
    let mut cx = Cx {
        problems: Vec::new(),
        object: None,
        rule: None,
    };
    let Some(entries) = cx.map(doc, "a NodeFeatureRule object") else {
        return (None, cx.problems);
    };
    // The name first, so that every later problem can name the object.
    let mut name = None;
    let mut name_pos = None;
    let mut metadata_pos = None;
    for (k, v) in entries {
        if k.key_text().as_deref() == Some("metadata") {
            metadata_pos = Some(k.pos);
            if let Some(meta) = cx.map(v, "metadata") {
                for (mk, mv) in meta {
                    if mk.key_text().as_deref() == Some("name") {
                        name = cx.string(mv, "metadata.name");
                        name_pos = Some(mv.pos);
                    }
                }
            }
        }
    }
    cx.object = name.clone();
    let mut api_version = None;
    let mut kind = None;
    let mut rules = Vec::new();
    let mut spec_seen = false;
    const TOP: [&str; 4] = ["apiVersion", "kind", "metadata", "spec"];
    for (k, v) in entries {
        let Some(key) = cx.key(k, "the object") else {
            continue;
        };
        match key.as_str() {
            "apiVersion" => api_version = cx.string(v, "apiVersion").map(|s| (s, v.pos)),
            "kind" => kind = cx.string(v, "kind").map(|s| (s, v.pos)),
            "metadata" => {}
            "spec" => {
                spec_seen = true;
                rules = read_spec(&mut cx, v);
            }
            _ => cx.unknown_field(k, &key, "the object", &TOP),
        }
    }
    match &api_version {
        None => cx.err(
            doc.pos,
            format!("apiVersion is required (\"{API_VERSION}\")"),
        ),
        Some((v, pos)) if v != API_VERSION => cx.err(
            *pos,
            format!("unsupported apiVersion \"{v}\" (expected \"{API_VERSION}\")"),
        ),
        _ => {}
    }
    match &kind {
        None => cx.err(doc.pos, format!("kind is required (\"{KIND}\")")),
        Some((k, pos)) if k != KIND => cx.err(
            *pos,
            format!("unsupported kind \"{k}\" (expected \"{KIND}\")"),
        ),
        _ => {}
    }
    match name.as_deref() {
        None | Some("") => cx.err(metadata_pos.unwrap_or(doc.pos), "metadata.name is required"),
        // The API server admits only a DNS subdomain as the name of an object.
        Some(n) => {
            if let Err(e) = crate::validate::dns_subdomain(n) {
                cx.err(
                    name_pos.unwrap_or(doc.pos),
                    format!("invalid metadata.name {n:?}: {e}"),
                );
            }
        }
    }
    if !spec_seen {
        cx.err(doc.pos, "spec is required");
    }
    let object = ObjectSpec {
        name: name.unwrap_or_default(),
        pos: doc.pos,
        rules,
        admitted: cx.problems.is_empty(),
    };
    (Some(object), cx.problems)
}

fn read_spec(cx: &mut Cx, spec: &Node) -> Vec<RuleSpec> {
    let mut rules = Vec::new();
    let Some(entries) = cx.map(spec, "spec") else {
        return rules;
    };
    let mut seen = false;
    for (k, v) in entries {
        let Some(key) = cx.key(k, "spec") else {
            continue;
        };
        if key != "rules" {
            cx.unknown_field(k, &key, "spec", &["rules"]);
            continue;
        }
        seen = true;
        let Some(items) = cx.seq(v, "spec.rules") else {
            continue;
        };
        for (i, item) in items.iter().enumerate() {
            rules.push(read_rule(cx, item, i));
        }
    }
    if !seen {
        cx.err(spec.pos, "spec.rules is required");
    }
    rules
}

const RULE_FIELDS: [&str; 10] = [
    "name",
    "labels",
    "labelsTemplate",
    "annotations",
    "vars",
    "varsTemplate",
    "taints",
    "extendedResources",
    "matchFeatures",
    "matchAny",
];

fn read_rule(cx: &mut Cx, node: &Node, index: usize) -> RuleSpec {
    let mut rule = RuleSpec {
        pos: node.pos,
        ..RuleSpec::default()
    };
    let path = format!("spec.rules[{index}]");
    let Some(entries) = cx.map(node, &path) else {
        return rule;
    };
    let mut name = None;
    for (k, v) in entries {
        if k.key_text().as_deref() == Some("name") {
            name = cx.string(v, &format!("{path}.name"));
        }
    }
    cx.rule = Some(name.clone().unwrap_or_else(|| format!("#{}", index + 1)));
    if name.is_none() {
        cx.err(node.pos, format!("{path}.name is required"));
    }
    rule.name = name.unwrap_or_default();
    for (k, v) in entries {
        let Some(key) = cx.key(k, &path) else {
            continue;
        };
        let null = matches!(v.val, Val::Null);
        match key.as_str() {
            "name" => {}
            "labels" => rule.labels = cx.string_map(v, "labels"),
            "annotations" => rule.annotations = cx.string_map(v, "annotations"),
            "vars" => rule.vars = cx.string_map(v, "vars"),
            "extendedResources" => rule.extended_resources = cx.string_map(v, "extendedResources"),
            "labelsTemplate" if !null => {
                rule.labels_template = cx.string(v, "labelsTemplate").map(|text| Text {
                    text,
                    pos: v.pos,
                    origin: None,
                })
            }
            "varsTemplate" if !null => {
                rule.vars_template = cx.string(v, "varsTemplate").map(|text| Text {
                    text,
                    pos: v.pos,
                    origin: None,
                })
            }
            "labelsTemplate" | "varsTemplate" => {}
            "taints" if !null => rule.taints = read_taints(cx, v),
            "matchFeatures" if !null => rule.match_features = read_terms(cx, v, "matchFeatures"),
            "matchAny" if !null => rule.match_any = read_match_any(cx, v),
            "taints" | "matchFeatures" | "matchAny" => {}
            _ => cx.unknown_field(k, &key, "a rule", &RULE_FIELDS),
        }
    }
    cx.rule = None;
    rule
}

fn read_taints(cx: &mut Cx, node: &Node) -> Vec<TaintSpec> {
    let mut out = Vec::new();
    let Some(items) = cx.seq(node, "taints") else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let path = format!("taints[{i}]");
        let Some(entries) = cx.map(item, &path) else {
            continue;
        };
        let (mut key, mut value, mut effect) = (None, String::new(), None);
        for (k, v) in entries {
            let Some(f) = cx.key(k, &path) else {
                continue;
            };
            if matches!(v.val, Val::Null) {
                continue;
            }
            match f.as_str() {
                "key" => key = cx.string(v, &format!("{path}.key")),
                "value" => value = cx.string(v, &format!("{path}.value")).unwrap_or_default(),
                "effect" => effect = cx.string(v, &format!("{path}.effect")),
                "timeAdded" => {
                    cx.string(v, &format!("{path}.timeAdded"));
                }
                _ => cx.unknown_field(k, &f, &path, &["key", "value", "effect", "timeAdded"]),
            }
        }
        if key.is_none() {
            cx.err(item.pos, format!("{path}.key is required"));
        }
        if effect.is_none() {
            cx.err(item.pos, format!("{path}.effect is required"));
        }
        if let (Some(key), Some(effect)) = (key, effect) {
            out.push(TaintSpec {
                key,
                value,
                effect,
                pos: item.pos,
            });
        }
    }
    out
}

fn read_match_any(cx: &mut Cx, node: &Node) -> Vec<MatchAnySpec> {
    let mut out = Vec::new();
    let Some(items) = cx.seq(node, "matchAny") else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let path = format!("matchAny[{i}]");
        let Some(entries) = cx.map(item, &path) else {
            continue;
        };
        let mut terms = None;
        for (k, v) in entries {
            let Some(f) = cx.key(k, &path) else {
                continue;
            };
            if f == "matchFeatures" {
                terms = Some(if matches!(v.val, Val::Null) {
                    Vec::new()
                } else {
                    read_terms(cx, v, &format!("{path}.matchFeatures"))
                });
            } else {
                cx.unknown_field(k, &f, &path, &["matchFeatures"]);
            }
        }
        match terms {
            Some(terms) => out.push(MatchAnySpec {
                pos: item.pos,
                terms,
            }),
            None => cx.err(item.pos, format!("{path}.matchFeatures is required")),
        }
    }
    out
}

fn read_terms(cx: &mut Cx, node: &Node, path: &str) -> Vec<TermSpec> {
    let mut out = Vec::new();
    let Some(items) = cx.seq(node, path) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let path = format!("{path}[{i}]");
        let Some(entries) = cx.map(item, &path) else {
            continue;
        };
        let mut feature = None;
        let mut match_expressions = None;
        let mut match_name = None;
        for (k, v) in entries {
            let Some(f) = cx.key(k, &path) else {
                continue;
            };
            let null = matches!(v.val, Val::Null);
            match f.as_str() {
                "feature" => feature = cx.string(v, &format!("{path}.feature")),
                "matchExpressions" if null => {}
                "matchExpressions" => {
                    let p = format!("{path}.matchExpressions");
                    let mut exprs = Vec::new();
                    // Written as a nodeSelector's list of {key, operator, values}: say how NFD
                    // writes it, from what was written.
                    if let Val::Seq(items) = &v.val {
                        cx.err(v.pos, expressions_as_list(&p, items));
                    } else if let Some(es) = cx.map(v, &p) {
                        for (ek, ev) in es {
                            let Some(key) = cx.key(ek, &p) else {
                                continue;
                            };
                            if let Some(e) = read_expr(cx, ev, ek.pos, &key, &format!("{p}.{key}"))
                            {
                                exprs.push(e);
                            }
                        }
                    }
                    match_expressions = Some(exprs);
                }
                "matchName" if null => {}
                "matchName" => {
                    match_name = read_expr(cx, v, v.pos, "", &format!("{path}.matchName"))
                }
                _ => cx.unknown_field(
                    k,
                    &f,
                    "a matchFeatures term",
                    &["feature", "matchExpressions", "matchName"],
                ),
            }
        }
        match feature {
            Some(feature) => out.push(TermSpec {
                feature,
                pos: item.pos,
                match_expressions,
                match_name,
            }),
            None => cx.err(item.pos, format!("{path}.feature is required")),
        }
    }
    out
}

/// The operator meant by a name from another language (Kubernetes' `GreaterThan`, SQL's
/// `Equals`), too far from NFD's by spelling for `names::closest` to find it.
fn op_synonym(op: &str) -> Option<&'static str> {
    let squashed: String = op
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    Some(match squashed.as_str() {
        "greaterthan" | "greater" | "gt" | "above" => "Gt",
        "greaterthanorequal" | "greaterorequal" | "greaterthanorequalto" | "gte" | "atleast" => {
            "Ge"
        }
        "lessthan" | "less" | "below" => "Lt",
        "lessthanorequal" | "lessorequal" | "lessthanorequalto" | "lte" | "atmost" => "Le",
        "equals" | "equal" | "eq" | "is" | "oneof" => "In",
        "notequals" | "notequal" | "ne" | "neq" | "isnot" | "notoneof" => "NotIn",
        "regex" | "regexp" | "matches" | "match" | "inregex" => "InRegexp",
        "between" | "range" | "inrange" => "GtLt",
        "exist" | "present" | "has" => "Exists",
        "notexists" | "doesnotexists" | "absent" | "notpresent" => "DoesNotExist",
        "true" => "IsTrue",
        "false" => "IsFalse",
        _ => return None,
    })
}

fn read_expr(cx: &mut Cx, node: &Node, pos: Pos, key: &str, path: &str) -> Option<ExprSpec> {
    if matches!(node.val, Val::Null) {
        cx.err(pos, format!("{path}: an expression needs at least an op"));
        return None;
    }
    let entries = cx.map(node, path)?;
    let mut op = None;
    let mut values = Vec::new();
    let mut value_type = (String::new(), Pos::default());
    let mut ok = true;
    for (k, v) in entries {
        let Some(f) = cx.key(k, path) else {
            ok = false;
            continue;
        };
        if matches!(v.val, Val::Null) {
            continue;
        }
        match f.as_str() {
            "op" => op = cx.string(v, &format!("{path}.op")).map(|s| (s, v.pos)),
            "value" => match &v.val {
                Val::Seq(items) => {
                    for (i, item) in items.iter().enumerate() {
                        match cx.string(item, &format!("{path}.value[{i}]")) {
                            Some(s) => values.push((s, item.pos)),
                            None => ok = false,
                        }
                    }
                }
                other => {
                    let hint = match other {
                        Val::Str(s) => format!(" (write value: [\"{s}\"])"),
                        Val::Num(s) => format!(" (write value: [\"{s}\"])"),
                        _ => String::new(),
                    };
                    cx.err(
                        v.pos,
                        format!(
                            "{path}.value must be a list of strings, got {}{hint}",
                            other.kind()
                        ),
                    );
                    ok = false;
                }
            },
            "type" => match cx.string(v, &format!("{path}.type")) {
                Some(t) => value_type = (t, v.pos),
                None => ok = false,
            },
            _ => {
                cx.unknown_field(k, &f, "an expression", &["op", "value", "type"]);
                ok = false;
            }
        }
    }
    let Some((op, op_pos)) = op else {
        cx.err(node.pos, format!("{path}.op is required"));
        return None;
    };
    if !OPS.contains(&op.as_str()) {
        let hint = OPS
            .iter()
            .find(|o| o.eq_ignore_ascii_case(&op))
            .copied()
            .or_else(|| crate::names::closest(&op, OPS.iter().copied()))
            .or_else(|| op_synonym(&op))
            .map(|o| format!(" (did you mean \"{o}\"?)"))
            .unwrap_or_default();
        cx.err(
            op_pos,
            format!(
                "{path}.op: unknown operator \"{op}\"{hint}; supported: {}",
                OPS.join(", ")
            ),
        );
        return None;
    }
    ok.then(|| ExprSpec {
        key: key.to_string(),
        pos,
        op,
        op_pos,
        values,
        value_type: value_type.0,
        type_pos: value_type.1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::document::parse_documents;

    fn read(text: &str) -> (Vec<ObjectSpec>, Vec<Problem>) {
        let (docs, errs) = parse_documents(text);
        assert_eq!(errs, vec![]);
        let mut objects = Vec::new();
        let mut problems = Vec::new();
        for d in &docs {
            let (o, p) = read_document(d);
            objects.extend(o);
            problems.extend(p);
        }
        (objects, problems)
    }

    fn messages(p: &[Problem]) -> Vec<String> {
        p.iter()
            .map(|p| {
                format!(
                    "{}: {}: {}",
                    p.pos,
                    p.rule.clone().unwrap_or_default(),
                    p.message
                )
            })
            .collect()
    }

    #[test]
    fn reads_a_full_rule() {
        let text = r#"apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata:
  name: obj
spec:
  rules:
    - name: r1
      labels: {a: "1"}
      labelsTemplate: "x=y"
      vars: {v: "2"}
      annotations: {n: "3"}
      extendedResources: {e: "4"}
      taints: [{key: k/x, effect: NoSchedule}]
      matchFeatures:
        - feature: pci.device
          matchExpressions:
            vendor: {op: In, value: ["10de"]}
            class: {op: Gt, value: ["1"], type: version}
          matchName: {op: Exists}
      matchAny:
        - matchFeatures:
          - feature: kernel.loadedmodule
            matchExpressions: {}
"#;
        let (objects, problems) = read(text);
        assert_eq!(messages(&problems), Vec::<String>::new());
        assert!(objects[0].admitted);
        let r = &objects[0].rules[0];
        assert_eq!(objects[0].name, "obj");
        assert_eq!(r.name, "r1");
        assert_eq!(r.pos, Pos::new(7, 7));
        assert_eq!(
            r.labels,
            vec![Entry {
                key: "a".into(),
                value: "1".into(),
                pos: Pos::new(8, 16)
            }]
        );
        let t = &r.match_features[0];
        assert_eq!(t.feature, "pci.device");
        let e = &t.match_expressions.as_ref().unwrap()[1];
        assert_eq!(
            (e.key.as_str(), e.op.as_str(), e.value_type.as_str()),
            ("class", "Gt", "version")
        );
        assert_eq!(e.pos, Pos::new(18, 13));
        assert_eq!(t.match_name.as_ref().unwrap().op, "Exists");
        assert_eq!(r.match_any[0].terms[0].match_expressions, Some(vec![]));
        assert_eq!(r.taints[0].key, "k/x");
    }

    #[test]
    fn all_problems_with_positions() {
        let text = r#"apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata:
  name: obj
spec:
  rules:
    - name: r1
      lables: {a: "1"}
      matchFeatures:
        - feature: pci.device
          matchExpressions:
            vendor: {op: Equals, value: ["10de"]}
            class: {op: in, value: "0300"}
            device: {op: Gt, value: [10]}
    - name: r2
      labels: {a: true}
      matchFeatures:
        - matchExpressions: {}
"#;
        let (objects, problems) = read(text);
        assert!(!objects[0].admitted);
        assert_eq!(objects[0].rules.len(), 2);
        assert_eq!(
            messages(&problems),
            vec![
                "8:7: r1: unknown field \"lables\" in a rule (did you mean \"labels\"?); known fields: name, labels, labelsTemplate, annotations, vars, varsTemplate, taints, extendedResources, matchFeatures, matchAny",
                "12:26: r1: matchFeatures[0].matchExpressions.vendor.op: unknown operator \"Equals\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse",
                "13:36: r1: matchFeatures[0].matchExpressions.class.value must be a list of strings, got string (write value: [\"0300\"])",
                "13:25: r1: matchFeatures[0].matchExpressions.class.op: unknown operator \"in\" (did you mean \"In\"?); supported: In, NotIn, InRegexp, Exists, DoesNotExist, Gt, Ge, Lt, Le, GtLt, GeLe, IsTrue, IsFalse",
                "14:38: r1: matchFeatures[0].matchExpressions.device.value[0] must be a string, got number 10 (quote it: \"10\")",
                "16:19: r2: labels.a must be a string, got boolean true (quote the value: YAML reads unquoted true/false, yes/no, on/off, y/n as booleans)",
                "18:11: r2: matchFeatures[0].feature is required",
            ]
        );
    }

    /// `matchExpressions` in a nodeSelector's shape gets NFD's shape back, from what was written.
    #[test]
    fn expressions_written_as_a_list_get_the_map_they_mean() {
        let text = r#"apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata:
  name: obj
spec:
  rules:
    - name: r1
      labels: {a: "1"}
      matchFeatures:
        - feature: pci.device
          matchExpressions:
            - key: vendor
              operator: In
              values: ["10de", "1002"]
            - {key: class}
"#;
        let (_, problems) = read(text);
        assert_eq!(
            messages(&problems),
            vec![
                "12:13: r1: matchFeatures[0].matchExpressions must be a map of element name to expression, got a list (the shape of a nodeSelector's matchExpressions, not NFD's); write: matchExpressions: {vendor: {op: In, value: [\"10de\", \"1002\"]}, class: {op: Exists}}",
            ]
        );
    }

    #[test]
    fn object_level_problems() {
        let (o, p) = read("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {}\n");
        assert!(!o[0].admitted);
        assert_eq!(
            messages(&p),
            vec![
                "4:1: : unknown field \"data\" in the object; known fields: apiVersion, kind, metadata, spec",
                "1:13: : unsupported apiVersion \"v1\" (expected \"nfd.k8s-sigs.io/v1alpha1\")",
                "2:7: : unsupported kind \"ConfigMap\" (expected \"NodeFeatureRule\")",
                "1:1: : spec is required",
            ]
        );
        let (o, p) = read(
            "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nspec:\n  rules: []\n",
        );
        assert!(!o[0].admitted);
        assert_eq!(messages(&p), vec!["1:1: : metadata.name is required"]);
    }

    #[test]
    fn nulls_are_absent_and_lists_are_read() {
        let text = r#"apiVersion: v1
kind: List
items:
- apiVersion: nfd.k8s-sigs.io/v1alpha1
  kind: NodeFeatureRule
  metadata: {name: a}
  spec:
    rules:
    - name: static
      extendedResources: {x: "1"}
      matchFeatures:
      labelsTemplate:
"#;
        let (o, p) = read(text);
        assert_eq!(messages(&p), Vec::<String>::new());
        assert_eq!(o[0].rules[0].match_features, vec![]);
        assert_eq!(o[0].rules[0].labels_template, None);
    }
}
