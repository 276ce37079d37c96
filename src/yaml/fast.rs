//! Rule files of the common shape, read straight from the YAML parser's events.
//!
//! serde-saphyr reads a 300 KB file of 1,000 rules in about 60 ms of CPU: half of it in its event
//! parser (granit-parser), half in its serde layer (a `Spanned` value is a map of its location's
//! fields, every scalar is visited through several layers). This reader builds the same nodes from
//! the same parser's events, configured as serde-saphyr configures it, in one pass.
//!
//! It declines (returns `None`) whatever it could not build exactly as serde-saphyr does, and the
//! caller then parses the chunk with serde-saphyr, so that every error, and every rare form, keeps
//! that parser's behaviour and messages: syntax errors, tags, anchors and aliases, `%YAML`
//! directives, merge keys, keys that are not strings or that repeat, empty or null documents, and
//! anything over serde-saphyr's default budget (depth, nodes, documents). Plain scalars are resolved
//! as serde-saphyr resolves them untyped: one that begins with a letter and is none of YAML's
//! boolean and null words is a string; any other is resolved by serde-saphyr itself, alone (once per
//! distinct text), and declined when alone it would not be the same scalar. The tests below hold
//! the two to the same nodes, positions included, on every YAML file of the repository, on every
//! kind of plain scalar in every place, and on the structures this reader declines.

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle, Span};

use super::node::{Node, Pos, Val};

/// serde-saphyr's default budget (`Budget::default()`); what exceeds it is left to serde-saphyr,
/// which refuses it with its own error.
const MAX_DEPTH: usize = 64;
const MAX_NODES: usize = 250_000;
const MAX_DOCUMENTS: usize = 1_024;

enum Frame {
    Seq(Pos, Vec<Node>),
    Map(Pos, Vec<(Node, Node)>, Option<Node>),
}

/// Every document of `text`, or `None` when serde-saphyr must read it.
/// `lines` is the number of lines before `text` in its file, added to every position.
pub(super) fn parse(text: &str, lines: u32) -> Option<Vec<Node>> {
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut resolved: HashMap<&str, Val> = HashMap::new();
    let mut nodes = 0usize;
    // serde-saphyr's parser options are the parser's defaults; comments are not data.
    let mut options = granit_parser::Options::default();
    options.set_emit_comments(false);
    for event in Parser::new_from_str_with_options(text, options) {
        let (event, span) = event.ok()?;
        let node = match event {
            Event::StreamStart | Event::StreamEnd => continue,
            Event::DocumentStart(_, version) => {
                if version.is_some() || docs.len() >= MAX_DOCUMENTS || !stack.is_empty() {
                    return None;
                }
                continue;
            }
            Event::DocumentEnd => continue,
            Event::Scalar(value, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return None;
                }
                let val = match style {
                    ScalarStyle::Plain => match value {
                        std::borrow::Cow::Borrowed(text) => resolve(text, &mut resolved)?,
                        std::borrow::Cow::Owned(text) => resolve_owned(text)?,
                    },
                    _ => Val::Str(value.into_owned()),
                };
                Node {
                    pos: pos(&span, lines),
                    val,
                }
            }
            Event::SequenceStart(_, anchor, tag) | Event::MappingStart(_, anchor, tag)
                if anchor != 0 || tag.is_some() || stack.len() >= MAX_DEPTH =>
            {
                return None;
            }
            Event::SequenceStart(..) => {
                nodes += 1;
                stack.push(Frame::Seq(pos(&span, lines), Vec::new()));
                continue;
            }
            Event::MappingStart(..) => {
                nodes += 1;
                stack.push(Frame::Map(pos(&span, lines), Vec::new(), None));
                continue;
            }
            Event::SequenceEnd => match stack.pop()? {
                Frame::Seq(pos, items) => Node {
                    pos,
                    val: Val::Seq(items),
                },
                Frame::Map(..) => return None,
            },
            Event::MappingEnd => match stack.pop()? {
                Frame::Map(pos, entries, None) => {
                    if has_duplicate_key(&entries) {
                        return None;
                    }
                    Node {
                        pos,
                        val: Val::Map(entries),
                    }
                }
                _ => return None,
            },
            // Aliases, and whatever else the parser may report, are serde-saphyr's to resolve.
            _ => return None,
        };
        nodes += usize::from(!matches!(node.val, Val::Seq(_) | Val::Map(_)));
        if nodes > MAX_NODES {
            return None;
        }
        match stack.last_mut() {
            None => {
                // serde-saphyr's multi-document reader treats a null document as absent.
                if node.val == Val::Null {
                    return None;
                }
                docs.push(node);
            }
            Some(Frame::Seq(_, items)) => items.push(node),
            Some(Frame::Map(_, entries, pending)) => match pending.take() {
                Some(key) => entries.push((key, node)),
                None => match &node.val {
                    // `<<` is a merge key to serde-saphyr; other keys are strings in rule files.
                    Val::Str(k) if k != "<<" => *pending = Some(node),
                    _ => return None,
                },
            },
        }
    }
    stack.is_empty().then_some(docs)
}

/// serde-saphyr's location of a node: the 1-based line and column of its first character.
fn pos(span: &Span, lines: u32) -> Pos {
    Pos::new(
        u32::try_from(span.start.line())
            .unwrap_or(u32::MAX)
            .saturating_add(lines),
        u32::try_from(span.start.col() + 1).unwrap_or(u32::MAX),
    )
}

fn has_duplicate_key(entries: &[(Node, Node)]) -> bool {
    fn key(n: &Node) -> &str {
        match &n.val {
            Val::Str(s) => s.as_str(),
            _ => "",
        }
    }
    if entries.len() < 16 {
        return entries
            .iter()
            .enumerate()
            .any(|(i, (k, _))| entries[..i].iter().any(|(o, _)| key(o) == key(k)));
    }
    let mut keys: Vec<&str> = entries.iter().map(|(k, _)| key(k)).collect();
    keys.sort_unstable();
    keys.windows(2).any(|w| w[0] == w[1])
}

/// A plain scalar's value, as serde-saphyr's untyped reading gives it.
fn resolve<'a>(text: &'a str, cache: &mut HashMap<&'a str, Val>) -> Option<Val> {
    if let Some(val) = plain_string(text) {
        return Some(val);
    }
    if let Some(val) = cache.get(text) {
        return Some(val.clone());
    }
    let val = resolve_alone(text)?;
    cache.insert(text, val.clone());
    Some(val)
}

fn resolve_owned(text: String) -> Option<Val> {
    match plain_string(&text) {
        Some(_) => Some(Val::Str(text)),
        None => resolve_alone(&text),
    }
}

/// A plain scalar that begins with an ASCII letter and is not one of the words serde-saphyr reads
/// as a boolean (YAML 1.1's, its default) or as null is a string: its integers, floats and
/// non-finite spellings all begin with a digit, a sign or a dot.
fn plain_string(text: &str) -> Option<Val> {
    const WORDS: [&str; 9] = ["true", "yes", "y", "on", "false", "no", "n", "off", "null"];
    let first = text.as_bytes().first()?;
    (first.is_ascii_alphabetic() && !WORDS.iter().any(|w| text.eq_ignore_ascii_case(w)))
        .then(|| Val::Str(text.to_string()))
}

/// A plain scalar resolved by serde-saphyr as a document of its own; `None` when it would not be
/// read back as the same one-line scalar (`---`, `%`, a line break, `a:`).
fn resolve_alone(text: &str) -> Option<Val> {
    let risky = text.starts_with("---")
        || text.starts_with("...")
        || text.starts_with(['%', '#', '@', '`', '&', '*', '!', '|', '>', '\'', '"', '?'])
        || text.contains(['\n', '\r', '\t'])
        || text.ends_with(':')
        || text.trim() != text;
    if risky {
        return None;
    }
    match serde_saphyr::from_str::<Val>(text).ok()? {
        Val::Str(s) if s != text => None,
        Val::Seq(_) | Val::Map(_) => None,
        val => Some(val),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What serde-saphyr makes of `text`: the documents, or its error.
    fn slow(text: &str) -> Result<Vec<Node>, String> {
        serde_saphyr::from_multiple::<Node>(text).map_err(|e| e.to_string())
    }

    /// The fast reader either declines or gives exactly serde-saphyr's documents. Returns
    /// whether it read the text.
    fn same(text: &str) -> bool {
        match parse(text, 0) {
            None => false,
            Some(fast) => {
                assert_eq!(Ok(fast), slow(text), "the fast reader differs on {text:?}");
                true
            }
        }
    }

    fn yaml_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            // Links are not followed: sysfs fixtures link in circles, as the kernel's do.
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                yaml_files(&p, out);
            } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                out.push(p);
            }
        }
    }

    #[test]
    fn fast_and_serde_saphyr_give_the_same_nodes_on_every_yaml_file_of_the_repository() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for dir in ["rules", "deploy", "data", "docs", "tests", "examples"] {
            yaml_files(&root.join(dir), &mut files);
        }
        // A Helm chart's templates are Go templates, YAML only once rendered.
        let templates = root.join("deploy/helm");
        files.retain(|f| {
            !(f.starts_with(&templates) && f.components().any(|c| c.as_os_str() == "templates"))
        });
        assert!(files.len() > 50, "{} YAML files", files.len());
        let (mut read, mut chunks) = (0, 0);
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            for (_, chunk) in super::super::split::split_documents(&text) {
                chunks += 1;
                read += usize::from(same(chunk));
            }
            // The whole file at once too, documents and all.
            same(&text);
        }
        // Every shipped rule file takes the fast path, in every document.
        for f in files.iter().filter(|f| f.starts_with(root.join("rules"))) {
            let text = std::fs::read_to_string(f).unwrap();
            assert!(
                parse(&text, 0).is_some(),
                "{} is not read fast",
                f.display()
            );
        }
        assert!(
            read * 10 > chunks * 9,
            "{read} of {chunks} documents read fast"
        );
    }

    /// Plain scalars of every kind serde-saphyr resolves, in every place a rule file has them.
    const SCALARS: &[&str] = &[
        "8086",
        "10de",
        "0300",
        "0x10",
        "0X10",
        "0o17",
        "0b101",
        "1_000",
        "-1",
        "+1",
        "-0",
        "1.5",
        "1e3",
        "1E3",
        "-1.5e-3",
        ".5",
        "5.",
        ".inf",
        "-.inf",
        "+.Inf",
        ".nan",
        ".NaN",
        "-.nan",
        "inf",
        "Infinity",
        "nan",
        "NaN",
        "1e999",
        "18446744073709551616",
        "-9223372036854775809",
        "true",
        "True",
        "TRUE",
        "false",
        "yes",
        "Yes",
        "no",
        "NO",
        "on",
        "On",
        "off",
        "y",
        "Y",
        "n",
        "null",
        "Null",
        "NULL",
        "nULL",
        "~",
        "1:30",
        "2001-12-14",
        "12:00:00",
        "^3f",
        "^f3[0-3]",
        "a#b",
        "a b",
        "<<",
        "-x",
        "--x",
        "é",
        "_x",
        "$x",
        "/dev/x",
        "x.y.z",
        "pci.device",
        "In",
        "Gt",
        "InRegexp",
        "feature.node.kubernetes.io/x",
        "1-2",
        "1.2.3",
        "v1.2",
        "0.0.0.0",
        "0755",
        "08",
        "-08",
        "+0x1F",
        "0x",
        "1__0",
        "1,000",
        "12.4",
        "4.0",
        "-",
        "?x",
        ":x",
    ];

    #[test]
    fn every_kind_of_plain_scalar_resolves_as_serde_saphyr_resolves_it() {
        let mut read = 0;
        for s in SCALARS {
            let cases = [
                format!("a: {s}\n"),
                format!("a: [{s}]\n"),
                format!("a: [x, {s}, y]\n"),
                format!("a:\n  - {s}\n  - z\n"),
                format!("a: {{k: {s}}}\n"),
                format!("{s}: v\n"),
                format!("{{{s}: v}}\n"),
                format!("a: '{s}'\n"),
                format!("a: \"{s}\"\n"),
                format!("a: {s}\r\nb: {s}\r\n"),
                format!("- {s}\n- {s}\n"),
                format!("{s}\n"),
            ];
            for c in &cases {
                read += usize::from(same(c));
            }
        }
        assert!(read > SCALARS.len() * 8, "{read} cases read fast");
    }

    #[test]
    fn structure_the_fast_reader_reads_or_declines() {
        // (text, whether the fast reader must read it)
        let cases: &[(&str, bool)] = &[
            ("a: 1\nb:\n  c: [x, \"y\"]\n  d: {e: true}\n", true),
            ("a:\nb: ~\n", true),
            ("a: {}\nb: []\nc: ''\n", true),
            ("# c\na: 1 # c\n# c\n", true),
            ("---\na: 1\n...\n---\nb: 2\n", true),
            ("a: |\n  x\n  y\nb: >-\n  x\n  y\n\nc: |+\n  z\n\n", true),
            ("a: this is\n  a long\n  plain scalar\n", true),
            ("a: {k: v,\n  l: [1,\n  2]}\n", true),
            (
                "matchExpressions:\n  vendor: {op: In, value: [\"8086\"]}\n",
                true,
            ),
            ("\u{feff}a: 1\n", true),
            ("a: &x 1\nb: *x\n", false),
            ("a: !!str 1\n", false),
            ("a: !custom x\n", false),
            ("base: &b {x: 1}\nc:\n  <<: *b\n", false),
            ("<<: {x: 1}\n", false),
            ("a: 1\na: 2\n", false),
            ("a: 1\n'a': 2\n", false),
            ("? [x]\n: 1\n", false),
            ("1: x\n", false),
            ("%YAML 1.2\n---\na: 1\n", false),
            ("~\n", false),
            ("a: [\n", false),
            ("a: b: c\n", false),
            ("\ta: 1\n", true),
        ];
        for (text, fast) in cases {
            assert_eq!(same(text), *fast, "{text:?}");
        }
        // Deeper than serde-saphyr's budget: left to it (it refuses).
        let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
        assert!(!same(&deep));
        let ok = format!("{}1{}", "[".repeat(30), "]".repeat(30));
        assert!(same(&ok));
        // Many keys: duplicates are found past the small-map scan.
        let mut many: String = (0..40).map(|i| format!("k{i}: {i}\n")).collect();
        assert!(same(&many));
        many.push_str("k7: again\n");
        assert!(!same(&many));
    }
}
