//! Go's text/template as NFD runs it: a template parsed with Sprig's function map (less `env`,
//! `expandenv`, `getHostByName`), its parameter counts and the bounds of `limits`; an execution
//! error as Go words it, at the position Go gives; and the lexical scans `rules check` warns
//! with (actions that can write far more than labels carry, functions this engine refuses).

use gtmpl_ng::{ExecError, ParseError, StructuredError, Template};

use super::limits::{MAX_FUNCTION_OUTPUT, MAX_TEMPLATE_OUTPUT, MAX_TEMPLATE_SIZE};
use super::sprig;

/// A template's parse error: where in the template (line, byte column), and what.
#[derive(Debug, Clone)]
pub struct Failure {
    pub at: Option<(usize, usize)>,
    /// `invalid template: ` for a syntax error, empty for a template refused outright.
    pub kind: &'static str,
    pub message: String,
}

/// The template `source`, parsed with the Sprig functions and this project's bounds.
pub fn parse(source: &str) -> Result<Template, Failure> {
    if source.len() > MAX_TEMPLATE_SIZE {
        return Err(Failure {
            at: None,
            kind: "",
            message: format!(
                "template exceeds maximum allowed size: {} bytes > {MAX_TEMPLATE_SIZE} limit",
                source.len()
            ),
        });
    }
    let mut tmpl = Template::with_limits(
        gtmpl_ng::Limits::default()
            .with_output_bytes(MAX_TEMPLATE_OUTPUT)
            .with_function_output(MAX_FUNCTION_OUTPUT),
    );
    for (name, func) in sprig::registry() {
        tmpl.add_func(name, func);
    }
    tmpl.set_arities(sprig::arities());
    tmpl.parse(source).map_err(|e| match &e {
        ParseError::WithContext(ctx, msg) => Failure {
            at: Some((ctx.line, ctx.col)),
            kind: "invalid template: ",
            message: msg.to_string(),
        },
        other => Failure {
            at: None,
            kind: "invalid template: ",
            message: other.to_string(),
        },
    })?;
    Ok(tmpl)
}

/// Where in the template (line, byte column) and what, from the engine's error chain.
pub fn exec_message(e: &ExecError) -> (Option<(usize, usize)>, String) {
    match e {
        ExecError::Structured(s) => structured_message(s),
        other => (None, other.to_string()),
    }
}

/// The engine's chain is the failing action's own message, then one "while evaluating" per
/// enclosing action (`range`, `if`, `with`): the position already says where, so those go.
fn structured_message(s: &StructuredError) -> (Option<(usize, usize)>, String) {
    let messages: Vec<&str> = s
        .chain()
        .map(|c| c.message.trim())
        .filter(|m| !m.is_empty() && *m != "while evaluating")
        .collect();
    (Some((s.context.line, s.context.col)), messages.join(": "))
}

/// The actions of `source` that can write far more than labels carry: a count above 1,000 given
/// to a function that multiplies (`repeat`, `until`, `untilStep`, `seq`) or to `range`. Their
/// output is cut at `MAX_TEMPLATE_OUTPUT` (the rule then fails); `rules check` warns.
pub fn heavy_actions(source: &str) -> Vec<String> {
    const MULTIPLIERS: [&str; 5] = ["repeat", "until", "untilStep", "seq", "range"];
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").unwrap_or(after.len());
        let action = after[..end].trim_matches(|c: char| c == '-' || c.is_whitespace());
        rest = &after[end..];
        let words: Vec<&str> = action
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == '|')
            .filter(|w| !w.is_empty())
            .collect();
        let multiplies = words.iter().any(|w| MULTIPLIERS.contains(w));
        let large = words
            .iter()
            .any(|w| w.parse::<u64>().is_ok_and(|n| n > 1000));
        if multiplies && large {
            found.push(action.to_string());
        }
    }
    found
}

/// Template functions Sprig has that this engine does not implement, used in `source`
/// (a lexical scan of the actions; for `rules check` warnings).
pub fn unsupported_functions(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").unwrap_or(after.len());
        let action = &after[..end];
        rest = &after[end..];
        let mut in_str: Option<char> = None;
        let mut word = String::new();
        let mut prev = ' ';
        let mut word_prev = ' ';
        for c in action.chars().chain(std::iter::once(' ')) {
            if let Some(q) = in_str {
                if c == q && prev != '\\' {
                    in_str = None;
                }
                prev = c;
                continue;
            }
            if c.is_ascii_alphanumeric() || c == '_' {
                if word.is_empty() {
                    word_prev = prev;
                }
                word.push(c);
            } else {
                if !word.is_empty()
                    && word_prev != '.'
                    && word_prev != '$'
                    && sprig::UNSUPPORTED.contains(&word.as_str())
                    && !found.contains(&word)
                {
                    found.push(word.clone());
                }
                word.clear();
                if c == '"' || c == '`' || c == '\'' {
                    in_str = Some(c);
                }
            }
            prev = c;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_unsupported_functions() {
        assert_eq!(
            unsupported_functions(
                "{{ now | date \"x\" }} {{ .date }} {{ \"uuidv4\" }} {{ upper .x }}"
            ),
            vec!["now".to_string(), "date".to_string()]
        );
    }
}
