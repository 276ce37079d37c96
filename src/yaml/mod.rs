//! YAML as this project reads it. `document`: YAML/JSON text as trees of positioned nodes (rule
//! files, workloads, node lists). Below: serde-saphyr errors as this project reports them: the position separately (so that it can be
//! written `file:line:column`, or shifted for a later document of a multi-document file), and the
//! message without the parser's own `error: line L column C: ` prefix.

pub mod document;
mod fast;
mod node;
mod split;

/// 1-based line and column of a parse error; `(0, 0)` when the parser gives none.
pub fn error_position(e: &serde_saphyr::Error) -> (u64, u64) {
    e.location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((0, 0))
}

/// The first line of the parser's message, without its repeated position.
pub fn error_message(e: &serde_saphyr::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let rest = first.strip_prefix("error: ").unwrap_or(first);
    let msg = match rest.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((loc, msg)) if loc.contains(" column ") => msg,
        _ => rest,
    };
    // The parser's advice to its programmer is no help to whoever wrote the file, and its
    // event names are the parser's words, not the author's.
    let msg = msg
        .strip_suffix(", set DuplicateKeyPolicy in Options if acceptable")
        .unwrap_or(msg);
    match msg {
        "expected sequence start" => "expected a list here".to_string(),
        "expected mapping start" => "expected a mapping (key: value) here".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_and_message_are_separate() {
        let e = serde_saphyr::from_str::<serde_json::Value>("a:\n  b: [\n").unwrap_err();
        assert_eq!(error_position(&e).0, 2);
        assert_eq!(error_message(&e), "unclosed bracket '['");
    }

    #[test]
    fn a_wrong_kind_of_node_is_said_in_the_authors_words() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Doc {
            list: Vec<String>,
        }
        let e = serde_saphyr::from_str::<Doc>("list: \"03\"\n").unwrap_err();
        assert_eq!(
            (error_position(&e), error_message(&e)),
            ((1, 7), "expected a list here".to_string())
        );
        let e = serde_saphyr::from_str::<std::collections::BTreeMap<String, String>>("[1]\n")
            .unwrap_err();
        assert_eq!(
            (error_position(&e), error_message(&e)),
            ((1, 1), "expected a mapping (key: value) here".to_string())
        );
    }

    #[test]
    fn a_duplicate_key_is_named_without_the_parsers_advice() {
        let e = serde_saphyr::from_str::<serde_json::Value>("a: 1\na: 2\n").unwrap_err();
        assert_eq!(error_position(&e), (2, 1));
        assert_eq!(error_message(&e), "duplicate mapping key: a");
    }
}
