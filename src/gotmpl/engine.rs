//! Go's text/template as NFD runs it: a template parsed with Sprig's function map (less `env`,
//! `expandenv`, `getHostByName`), its parameter counts and the bounds of `limits`; an execution
//! error as Go words it, at the position Go gives; and the lexical scans `rules check` warns
//! with (actions that can write far more than labels carry, functions this engine refuses).

use gtmpl_ng::{ExecError, ParseError, StructuredError, Template};

use super::limits::{
    MAX_CONTROL_DEPTH, MAX_EXPRESSION_DEPTH, MAX_FUNCTION_OUTPUT, MAX_TEMPLATE_OUTPUT,
    MAX_TEMPLATE_SIZE,
};
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
    if let Some(f) = nesting_error(source) {
        return Err(f);
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
    tmpl.set_float_params(sprig::FLOAT_PARAMS);
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

/// The first place `source` nests deeper than `MAX_EXPRESSION_DEPTH` parentheses or
/// `MAX_CONTROL_DEPTH` control structures, found by a scan of its actions before the parser
/// sees it: the parser recurses once per level of either, past its own bound for `else if`
/// chains and with none for parentheses, and a stack overflow aborts the process. The scan
/// reads actions as Go's lexer does (comments, quoted, raw and character constants skipped,
/// so a `(` or `}}` inside them counts for nothing); a template it misreads is one the parser
/// refuses anyway.
pub fn nesting_error(source: &str) -> Option<Failure> {
    let b = source.as_bytes();
    let refuse = |at: usize, message: String| {
        let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = source[..at].matches('\n').count() + 1;
        Some(Failure {
            at: Some((line, at - line_start + 1)),
            kind: "invalid template: ",
            message,
        })
    };
    // Per open control, the links of its `else if` / `else with` chain.
    let mut controls: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let find = |from: usize, pat: &[u8]| {
        b.get(from..)?
            .windows(pat.len())
            .position(|w| w == pat)
            .map(|o| from + o)
    };
    while let Some(open) = find(i, b"{{") {
        i = open + 2;
        if b.get(i) == Some(&b'-') && b.get(i + 1).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        while b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        if b[i..].starts_with(b"/*") {
            i = find(i, b"*/").map_or(b.len(), |e| e + 2);
            continue;
        }
        let word_at = i;
        let word = |from: usize| {
            let len = b[from..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            &b[from..from + len]
        };
        let first = word(word_at);
        let opens = match first {
            b"if" | b"range" | b"with" | b"define" | b"block" => true,
            b"else" => {
                let mut j = word_at + 4;
                while b.get(j).is_some_and(u8::is_ascii_whitespace) {
                    j += 1;
                }
                if matches!(word(j), b"if" | b"with")
                    && let Some(links) = controls.last_mut()
                {
                    *links += 1;
                    depth += 1;
                    if depth > MAX_CONTROL_DEPTH {
                        return refuse(j, control_message());
                    }
                }
                false
            }
            b"end" => {
                if let Some(links) = controls.pop() {
                    depth -= 1 + links;
                }
                false
            }
            _ => false,
        };
        if opens {
            controls.push(0);
            depth += 1;
            if depth > MAX_CONTROL_DEPTH {
                return refuse(word_at, control_message());
            }
        }
        // The rest of the action, to its `}}`.
        let mut parens = 0usize;
        while i < b.len() {
            match b[i] {
                b'}' if b.get(i + 1) == Some(&b'}') => {
                    i += 2;
                    break;
                }
                q @ (b'"' | b'\'') => {
                    i += 1;
                    while i < b.len() && b[i] != q && b[i] != b'\n' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    i += 1;
                }
                b'`' => {
                    i = find(i + 1, b"`").map_or(b.len(), |e| e + 1);
                }
                b'(' => {
                    parens += 1;
                    if parens > MAX_EXPRESSION_DEPTH {
                        return refuse(
                            i,
                            format!(
                                "max expression depth exceeded: parentheses nest at most {MAX_EXPRESSION_DEPTH} deep in gpu-labeler (Go allows 10000)"
                            ),
                        );
                    }
                    i += 1;
                }
                b')' => {
                    parens = parens.saturating_sub(1);
                    i += 1;
                }
                _ => i += 1,
            }
        }
        i = i.min(b.len());
    }
    None
}

fn control_message() -> String {
    format!(
        "max control depth exceeded: if, range, with, define and block nest at most {MAX_CONTROL_DEPTH} deep in gpu-labeler, each else if and else with of a chain counting one more"
    )
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

    /// Where (line, byte column) and why the scan refuses a template.
    type Refusal = Option<(Option<(usize, usize)>, String)>;

    fn refused(source: &str) -> Refusal {
        nesting_error(source).map(|f| (f.at, f.message))
    }

    fn parens(n: usize, inner: &str) -> String {
        format!("{}{inner}{}", "(".repeat(n), ")".repeat(n))
    }

    /// Issue 44's bombs, each refused at the place that crosses the bound, before the parser
    /// recursed into it: 600 parentheses, `not` 1,000 deep, nested pipelines, an `else if`
    /// chain of 200 links (past the parser's own bound, which counts bodies) and 64 nested `if`.
    #[test]
    fn nesting_bombs_are_refused_where_they_cross_the_bound() {
        let expr = "max expression depth exceeded: parentheses nest at most 32 deep in gpu-labeler (Go allows 10000)".to_string();
        let control = control_message();
        let not_bomb = format!("{}true{}", "not (".repeat(1000), ")".repeat(1000));
        let pipes = format!("{}1{}", "(1 | print ".repeat(50), ")".repeat(50));
        let chain = format!(
            "{{{{ if false }}}}{}{{{{ end }}}}",
            "{{ else if false }}".repeat(200)
        );
        let withs = format!(
            "{{{{ with 0 }}}}{}{{{{ end }}}}",
            "{{- else with 0 }}\n".repeat(70)
        );
        let ifs = format!("{}x{}", "{{ if 1 }}".repeat(64), "{{ end }}".repeat(64));
        let cases: Vec<(String, Refusal)> = vec![
            (
                format!("a={{{{ {} }}}}", parens(600, "1")),
                Some((Some((1, 38)), expr.clone())),
            ),
            (
                format!("{{{{ {not_bomb} }}}}"),
                Some((Some((1, 168)), expr.clone())),
            ),
            (
                format!("x\n  {{{{ {pipes} }}}}"),
                Some((Some((2, 358)), expr.clone())),
            ),
            (chain, Some((Some((1, 1201)), control.clone()))),
            // The 63rd link is the 64th level: line 63 (the first link is on line 1).
            (withs, Some((Some((63, 10)), control.clone()))),
            (ifs, Some((Some((1, 634)), control.clone()))),
        ];
        let got: Vec<_> = cases.iter().map(|c| refused(&c.0)).collect();
        let want: Vec<_> = cases.into_iter().map(|c| c.1).collect();
        assert_eq!(got, want);
    }

    /// At the bounds a template parses and renders; what is inside comments, quoted, raw and
    /// character constants is not nesting; levels closed do not add up.
    #[test]
    fn nesting_at_the_bounds_and_lookalikes_pass() {
        let render = |source: &str| {
            parse(source).map_err(|f| f.message).and_then(|t| {
                t.render(&gtmpl_ng::Context::from(gtmpl_ng::Value::Nil))
                    .map_err(|e| exec_message(&e).1)
            })
        };
        let deep = parens(40, "");
        let cases: Vec<(String, Result<String, String>)> = vec![
            (format!("{{{{ {} }}}}", parens(32, "1")), Ok("1".into())),
            (
                format!("{}x{}", "{{ if 1 }}".repeat(63), "{{ end }}".repeat(63)),
                Ok("x".into()),
            ),
            (
                format!(
                    "{{{{ if false }}}}{}y{{{{ end }}}}",
                    "{{ else if false }}".repeat(61) + "{{ else }}"
                ),
                Ok("y".into()),
            ),
            (format!("{{{{/* {deep} */}}}}a"), Ok("a".into())),
            (
                format!("{{{{ \"{deep}\\\" }}}}\" }}}}"),
                Ok(format!("{deep}\" }}}}")),
            ),
            (
                format!("{{{{ `{deep}\n}}}}` }}}}"),
                Ok(format!("{deep}\n}}}}")),
            ),
            ("{{ print '(' '(' }}".to_string(), Ok("40 40".into())),
            (
                "{{ (((((((((((((((((((1))))))))))))))))))) }}".repeat(10),
                Ok("1".repeat(10)),
            ),
            // Long but flat: a pipeline of 6,000 commands and 4,000 arguments are loops.
            (
                format!("{{{{ true{} }}}}", " | not".repeat(6000)),
                Ok("true".into()),
            ),
            (
                format!("{{{{ len (list{}) }}}}", " 1".repeat(4000)),
                Ok("4000".into()),
            ),
        ];
        let got: Vec<_> = cases.iter().map(|c| render(&c.0)).collect();
        let want: Vec<_> = cases.into_iter().map(|c| c.1).collect();
        assert_eq!(got, want);
    }

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
