//! Rule files as trees of positioned nodes.
//!
//! A rule file is YAML (JSON is read by the same parser) with one or more documents. Every node
//! keeps its line and column so that each problem found later, in any rule of any document, can
//! point at the exact place. Documents are parsed one by one, so a syntax error in one document
//! does not hide the others.

pub use super::node::{Node, Pos, Val};
use super::split::{is_blank_document, split_documents};

/// A document that could not be parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

/// Parses every document of a file. Returns the documents that parsed and the syntax errors
/// of those that did not.
pub fn parse_documents(text: &str) -> (Vec<Node>, Vec<SyntaxError>) {
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    each_document(text, |d| match d {
        Ok(node) => docs.push(node),
        Err(e) => errors.push(e),
    });
    (docs, errors)
}

/// Parses the documents of a file one by one, in order, and hands each to `f` (or its syntax
/// error): a caller that reads each into something smaller holds one document's tree at a time,
/// not the whole file's (1,000 rules: 300 KB of text, about 50,000 nodes).
pub fn each_document(text: &str, mut f: impl FnMut(Result<Node, SyntaxError>)) {
    if looks_like_json(text) {
        // A JSON object followed by `---` and YAML documents: kubectl's YAML-or-JSON decoder
        // reads the first as JSON and the rest as YAML, so the file is split there.
        if let Some((json, rest)) = json_then_yaml(text) {
            each_json_document(json, &mut f);
            let base = u32::try_from(json.matches('\n').count()).unwrap_or(u32::MAX);
            each_yaml_document(rest, base, &mut f);
            return;
        }
        each_json_document(text, &mut f);
        return;
    }
    each_yaml_document(text, 0, &mut f);
}

/// When `text` is one JSON value followed by a line `---` (and YAML documents), the JSON and
/// the rest; `None` for anything else (one JSON value, or JSON followed by anything but `---`,
/// which stays the JSON parser's error).
fn json_then_yaml(text: &str) -> Option<(&str, &str)> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde::de::IgnoredAny>();
    stream.next()?.ok()?;
    let end = stream.byte_offset();
    let rest = &text[end..];
    // The first line with text after the JSON: a document marker at the start of its line.
    let first = rest.lines().find(|l| !l.trim().is_empty())?.trim_end();
    let marker = first == "---" || first.starts_with("--- ") || first.starts_with("---\t");
    marker.then_some((&text[..end], rest))
}

fn each_json_document(text: &str, f: &mut impl FnMut(Result<Node, SyntaxError>)) {
    // JSON is YAML, and the YAML parser gives positions; a JSON file that YAML refuses
    // (tab indentation) is read by serde_json instead, which still names the line of a
    // syntax error.
    f(match serde_saphyr::from_str::<Node>(text) {
        Ok(node) => Ok(node),
        Err(yaml_err) => match serde_json::from_str::<serde_json::Value>(text) {
            // Only tabs and characters YAML does not print (DEL, C1 controls, U+FFFE/F,
            // which JSON strings may hold raw) make valid JSON invalid YAML; anything else
            // (a duplicate key) stays the YAML parser's error.
            Ok(v) if text.chars().any(|c| c == '\t' || !yaml_printable(c)) => Ok(from_json(&v)),
            Ok(_) => Err(saphyr_error(&yaml_err, 0)),
            Err(e) => Err(SyntaxError {
                pos: Pos::new(
                    u32::try_from(e.line()).unwrap_or(0),
                    u32::try_from(e.column()).unwrap_or(0),
                ),
                message: e.to_string(),
            }),
        },
    });
}

/// The YAML documents of `text`, which starts at file line `base + 1`.
fn each_yaml_document(text: &str, base: u32, f: &mut impl FnMut(Result<Node, SyntaxError>)) {
    for (offset, chunk) in split_documents(text) {
        let offset = offset.saturating_add(base);
        if is_blank_document(chunk) {
            continue;
        }
        // The common shape straight from the parser's events; the rest, and every error,
        // through serde-saphyr (src/yaml/fast.rs).
        if let Some(nodes) = super::fast::parse(chunk, offset) {
            nodes.into_iter().for_each(|n| f(Ok(n)));
            continue;
        }
        match serde_saphyr::from_multiple::<Node>(chunk) {
            Ok(nodes) => {
                for mut n in nodes {
                    n.shift(offset);
                    f(Ok(n));
                }
            }
            Err(e) => f(Err(saphyr_error(&e, offset))),
        }
    }
}

fn saphyr_error(e: &serde_saphyr::Error, offset: u32) -> SyntaxError {
    // The parser's position is relative to the document; reported relative to the file.
    let pos = match crate::yaml::error_position(e) {
        (0, _) => Pos::new(offset + 1, 1),
        (line, column) => Pos::new(
            u32::try_from(line).unwrap_or(0).saturating_add(offset),
            u32::try_from(column).unwrap_or(0),
        ),
    };
    SyntaxError {
        pos,
        message: crate::yaml::error_message(e),
    }
}

/// YAML 1.2's `c-printable` (line breaks included).
fn yaml_printable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

/// Whether the text is JSON rather than YAML (it starts with `{` or `[`).
pub fn looks_like_json(text: &str) -> bool {
    text.trim_start().starts_with(['{', '['])
}

/// A JSON value as a tree; its nodes have no position (`0:0`).
pub fn from_json(v: &serde_json::Value) -> Node {
    use serde_json::Value as J;
    let val = match v {
        J::Null => Val::Null,
        J::Bool(b) => Val::Bool(*b),
        J::Number(n) => Val::Num(n.to_string()),
        J::String(s) => Val::Str(s.clone()),
        J::Array(a) => Val::Seq(a.iter().map(from_json).collect()),
        J::Object(m) => Val::Map(
            m.iter()
                .map(|(k, v)| {
                    (
                        Node {
                            pos: Pos::default(),
                            val: Val::Str(k.clone()),
                        },
                        from_json(v),
                    )
                })
                .collect(),
        ),
    };
    Node {
        pos: Pos::default(),
        val,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_get<'a>(n: &'a Node, key: &str) -> &'a Node {
        let Val::Map(entries) = &n.val else {
            panic!("not a map: {n:?}")
        };
        &entries
            .iter()
            .find(|(k, _)| k.key_text().as_deref() == Some(key))
            .unwrap_or_else(|| panic!("no key {key}"))
            .1
    }

    #[test]
    fn positions_of_nested_nodes() {
        let text = "a: 1\nb:\n  c: [x, \"y\"]\n  d: {e: true}\n";
        let (docs, errs) = parse_documents(text);
        assert_eq!(errs, vec![]);
        assert_eq!(docs.len(), 1);
        let b = map_get(&docs[0], "b");
        assert_eq!(b.pos.line, 3);
        let c = map_get(b, "c");
        assert_eq!(c.pos, Pos::new(3, 6));
        let Val::Seq(items) = &c.val else { panic!() };
        assert_eq!(items[1].val, Val::Str("y".into()));
        assert_eq!(items[1].pos, Pos::new(3, 10));
        assert_eq!(map_get(&docs[0], "a").val, Val::Num("1".into()));
        assert_eq!(map_get(map_get(b, "d"), "e").val, Val::Bool(true));
    }

    #[test]
    fn documents_are_independent() {
        let text = "a: 1\n---\nb: [\n---\n# only a comment\n---\nc: 3\n";
        let (docs, errs) = parse_documents(text);
        assert_eq!(docs.len(), 2);
        assert_eq!(map_get(&docs[1], "c").pos.line, 7);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].pos, Pos::new(3, 4), "{errs:?}");
        assert_eq!(errs[0].message, "unclosed bracket '['");
    }

    #[test]
    fn many_documents_each_parsed_alone() {
        let mut text = String::new();
        for i in 0..60 {
            text.push_str(&format!("---\nname: doc-{i}\nitems:\n"));
            for j in 0..40 {
                text.push_str(&format!("  - {{key: k{j}, value: \"v{i}-{j}\"}}\n"));
            }
            if i == 17 || i == 41 {
                text.push_str("broken: [\n");
            }
        }
        let (docs, errs) = parse_documents(&text);
        assert_eq!(docs.len(), 58);
        let lines: Vec<u32> = errs.iter().map(|e| e.pos.line).collect();
        // Each document is 43 lines (marker, name, items, 40 items); the broken line follows
        // document 17 (after 17 * 43 + 43 lines) and document 41 (41 * 43 + 1 + 43).
        assert_eq!(lines, vec![775, 1808], "{errs:?}");
        // The last document's last item, where it is in the file.
        let Val::Seq(items) = &map_get(&docs[57], "items").val else {
            panic!()
        };
        assert_eq!(items[39].pos, Pos::new(60 * 43 + 2, 5));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let (docs, errs) = parse_documents("a: 1\nb: 2\na: 3\n");
        assert!(docs.is_empty());
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].pos.line, 3, "{errs:?}");
    }

    #[test]
    fn json_with_characters_yaml_does_not_print() {
        // JSON strings may hold DEL and C1 controls raw (serde_json writes them so).
        let text = "{\"a\": \"x\u{7f}\u{88}\u{fffe}y\"}";
        let (docs, errs) = parse_documents(text);
        assert_eq!(errs, vec![]);
        assert_eq!(
            map_get(&docs[0], "a").val,
            Val::Str("x\u{7f}\u{88}\u{fffe}y".into())
        );
    }

    #[test]
    fn json_with_tabs() {
        let text = "{\n\t\"a\": {\n\t\t\"b\": [1, \"x\"]\n\t}\n}\n";
        let (docs, errs) = parse_documents(text);
        assert_eq!(errs, vec![]);
        assert_eq!(map_get(map_get(&docs[0], "a"), "b").val.kind(), "list");
        let (_, errs) = parse_documents("{\n  \"a\": [\n}");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].pos.line, 3);
    }
}
