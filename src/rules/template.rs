//! `labelsTemplate` / `varsTemplate`: Go text/template over the matched feature elements.
//!
//! As NFD (the engine: `crate::gotmpl::engine`): the template is parsed with Sprig's function
//! map (less `env`, `expandenv`, `getHostByName`), executed with `missingkey=error` over
//! `{<domain>: {<feature>: [<element>...]}}`, and its output is read as `key=value` lines
//! (blank lines skipped, a line without `=` is an error). Templates are parsed once, when the
//! rule set is loaded; a parse error is kept and reported when the rule would expand it, as NFD
//! reports it then. Missing keys are errors because every map in the data is handed to the
//! engine as a struct-like object, for which a missing field is an error.

use gtmpl_ng::{Context, Template, Value};

use crate::gotmpl::engine::{self, Failure};
use crate::yaml::document::Pos;

/// Where a template's text stands in its file, when every line of it is there as written (a
/// literal block scalar, or a one-line plain or quoted scalar): template line L is file line
/// `line + L - 1`, after `indent` characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub line: u32,
    pub indent: u32,
}

impl Origin {
    /// The template text of the scalar at `pos` in `file` (`lines`: the file's lines), if it
    /// stands there as written; `None` for a folded block, an escaped or multi-line quoted
    /// scalar, or anything that does not line up.
    pub fn find(lines: &[&str], pos: Pos, text: &str) -> Option<Origin> {
        if !pos.is_known() {
            return None;
        }
        let idx = (pos.line as usize).checked_sub(1)?;
        let indicator = |l: &str| {
            let t = l.trim_end();
            let ind = t.rsplit(' ').next().unwrap_or(t);
            let ok = ind.starts_with(['|', '>'])
                && ind[1..]
                    .bytes()
                    .all(|b| matches!(b, b'-' | b'+') || b.is_ascii_digit());
            ok.then(|| ind.starts_with('|'))
        };
        // The parser places a block scalar at its indicator's line or at its first line.
        let block = match indicator(lines.get(idx)?) {
            Some(literal) => Some((literal, idx + 1)),
            None if idx > 0 => indicator(lines[idx - 1]).map(|literal| (literal, idx)),
            None => None,
        };
        if let Some((literal, first)) = block {
            if !literal {
                return None;
            }
            let body = lines.get(first..)?;
            let sample = body.iter().find(|l| !l.trim().is_empty())?;
            let indent = sample.len() - sample.trim_start_matches(' ').len();
            for (i, t) in text.split('\n').enumerate() {
                if t.is_empty() {
                    continue;
                }
                let l = body.get(i)?.trim_end_matches('\r');
                if l.get(indent..) != Some(t) || !l[..indent].bytes().all(|b| b == b' ') {
                    return None;
                }
            }
            return Some(Origin {
                line: first as u32 + 1,
                indent: indent as u32,
            });
        }
        if text.contains('\n') {
            return None;
        }
        let line = lines[idx];
        let col = (pos.column as usize).checked_sub(1)?;
        let at = line.char_indices().nth(col).map(|(b, _)| b)?;
        let rest = &line[at..];
        let indent = if rest.starts_with(text) {
            col
        } else if rest.starts_with(['"', '\'']) && rest[1..].starts_with(text) {
            col + 1
        } else {
            return None;
        };
        Some(Origin {
            line: pos.line,
            indent: indent as u32,
        })
    }

    /// The file position of the template's line `line`, byte column `col` (both 1-based, as
    /// the template engine counts).
    fn locate(&self, text: &str, line: usize, col: usize) -> Option<Pos> {
        let t = text.split('\n').nth(line.checked_sub(1)?)?;
        let chars = t.get(..col.saturating_sub(1))?.chars().count();
        Some(Pos::new(
            self.line + line as u32 - 1,
            self.indent + chars as u32 + 1,
        ))
    }
}

/// A problem found in a template: its file position when known, and what.
pub type Finding = (Option<Pos>, String);
/// A `.domain.feature` a template reads from its data root.
pub type FeatureRef = (String, String);

/// A template of a rule, parsed once.
pub struct RuleTemplate {
    pub source: String,
    pub pos: Pos,
    pub origin: Option<Origin>,
    parsed: Result<Template, Failure>,
}

impl std::fmt::Debug for RuleTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleTemplate")
            .field("source", &self.source)
            .field("pos", &self.pos)
            .field("parse_error", &self.parse_error())
            .finish()
    }
}

impl RuleTemplate {
    #[cfg(test)]
    pub fn parse(source: &str, pos: Pos) -> RuleTemplate {
        RuleTemplate::parse_at(source, pos, None)
    }

    /// As `parse`, with where the text stands in its file, for errors in file positions.
    pub fn parse_at(source: &str, pos: Pos, origin: Option<Origin>) -> RuleTemplate {
        RuleTemplate {
            source: source.to_string(),
            pos,
            origin,
            parsed: engine::parse(source),
        }
    }

    /// `invalid template: ...`, and the file position of the error when it is known (else the
    /// message says where in the template).
    pub fn parse_error(&self) -> Option<(Option<Pos>, String)> {
        let f = self.parsed.as_ref().err()?;
        let (pos, at) = self.place(f.at);
        Some((pos, format!("{}{at}{}", f.kind, f.message)))
    }

    /// The file position of template position `at`, and the prefix a message gets: empty when
    /// the file position is known (it is the error's position), else `line L, column C: `.
    fn place(&self, at: Option<(usize, usize)>) -> (Option<Pos>, String) {
        let Some((line, col)) = at else {
            return (None, String::new());
        };
        match self.origin.and_then(|o| o.locate(&self.source, line, col)) {
            Some(p) => (Some(p), String::new()),
            None => (None, format!("line {line}, column {col}: ")),
        }
    }

    /// The fields the template reads that no element of their feature can have, each at its
    /// file position when known (else the template's own, in the message), and the
    /// `.domain.feature` pairs it reads from its data root; `None` when it does not parse.
    pub fn field_typos(&self) -> Option<(Vec<Finding>, Vec<FeatureRef>)> {
        let root = self.parsed.as_ref().ok()?.root("")?;
        let (typos, roots) = super::template_fields::check(root);
        let typos = typos
            .into_iter()
            .map(|t| {
                let (pos, prefix) = self.place(Some((t.line, t.col)));
                (pos, format!("{prefix}{}", t.message))
            })
            .collect();
        Some((typos, roots))
    }

    /// Executes the template and reads its `key=value` lines, in output order.
    pub fn expand(&self, data: &Value) -> Result<Vec<(String, String)>, String> {
        let tmpl = self.parsed.as_ref().map_err(|f| match self.place(f.at) {
            (Some(p), _) => format!(
                "failed to parse template at line {}, column {}: {}",
                p.line, p.column, f.message
            ),
            (None, prefix) => format!("failed to parse template: {}{prefix}{}", f.kind, f.message),
        })?;
        let out = tmpl.render(&Context::from(data.clone())).map_err(|e| {
            let (at, message) = engine::exec_message(&e);
            match self.place(at) {
                (Some(p), _) => format!(
                    "failed to expand template at line {}, column {}: {message}",
                    p.line, p.column
                ),
                (None, prefix) => format!("failed to expand template: {prefix}{message}"),
            }
        })?;
        expand_lines(&out).map_err(|e| format!("failed to expand template: {e}"))
    }
}

/// NFD's `ExpandMap`: trimmed non-empty lines, each `key=value` (split at the first `=`).
pub fn expand_lines(out: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for line in out.split('\n') {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        match trimmed.split_once('=') {
            Some((k, v)) => pairs.push((k.to_string(), v.to_string())),
            None => {
                return Err(format!(
                    "missing value in expanded template line {:?}, (format must be '<key>=<value>')",
                    crate::validate::elide(trimmed, 100)
                ));
            }
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn obj(pairs: &[(&str, &str)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Value::from(*v)))
                .collect(),
        )
    }

    fn data() -> Value {
        let devices = Value::Array(vec![
            obj(&[("class", "0300"), ("vendor", "8086"), ("device", "9a49")]),
            obj(&[("class", "0380"), ("vendor", "8086"), ("device", "56c0")]),
        ]);
        let mut pci = HashMap::new();
        pci.insert("device".to_string(), devices);
        let attrs = Value::Array(vec![obj(&[("Name", "major"), ("Value", "6")])]);
        let mut kernel = HashMap::new();
        kernel.insert("version".to_string(), attrs);
        let mut root = HashMap::new();
        root.insert("pci".to_string(), Value::Object(pci));
        root.insert("kernel".to_string(), Value::Object(kernel));
        Value::Object(root)
    }

    fn expand(src: &str) -> Result<Vec<(String, String)>, String> {
        RuleTemplate::parse(src, Pos::default()).expand(&data())
    }

    fn pairs(p: &[(&str, &str)]) -> Result<Vec<(String, String)>, String> {
        Ok(p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    #[test]
    fn ranges_over_matched_elements() {
        assert_eq!(
            expand(
                "{{ range .pci.device }}gpu.intel.com/device-id.{{ .class }}-{{ .device }}.present=true\n{{ end }}"
            ),
            pairs(&[
                ("gpu.intel.com/device-id.0300-9a49.present", "true"),
                ("gpu.intel.com/device-id.0380-56c0.present", "true")
            ])
        );
        assert_eq!(
            expand(
                "gpu.intel.com/device-id.0300-{{ (index .pci.device 0).device }}.count={{ len .pci.device }}"
            ),
            pairs(&[("gpu.intel.com/device-id.0300-9a49.count", "2")])
        );
        assert_eq!(
            expand("{{ range .kernel.version }}kernel-version.{{ .Name }}={{ .Value }}\n{{ end }}"),
            pairs(&[("kernel-version.major", "6")])
        );
        assert_eq!(expand("  \n\n a=b=c \n"), pairs(&[("a", "b=c")]));
        assert_eq!(
            expand("{{ if gt (len .pci.device) 5 }}x=1{{ end }}"),
            pairs(&[])
        );
    }

    #[test]
    fn missing_keys_are_errors() {
        let e = expand("{{ range .pci.device }}x={{ .nosuch }}{{ end }}").unwrap_err();
        assert!(e.starts_with("failed to expand template: "), "{e}");
        assert!(e.contains("nosuch"), "{e}");
        assert!(expand("x={{ .gpu.device }}").is_err());
    }

    /// Where a template stands in its file, for each way YAML writes a string: a literal block
    /// (placed at its indicator or at its first line), a plain or quoted one-line scalar; the
    /// folded and escaped forms, whose text is not in the file as written, have none.
    #[test]
    fn origins_of_templates_in_their_files() {
        let file = "rules:\n  - labelsTemplate: |\n      {{ range .cpu.cstate }}a={{ .Name }}\n\n      ünï={{ .x.y }}\n    t2: >\n      {{ .a }}\n    t3: a={{ .p.q }}\n    t4: \"{{ .p.q }}\"\n    t5: \"\\u0041{{ .p.q }}\"\n";
        let lines: Vec<&str> = file.lines().collect();
        let block = "{{ range .cpu.cstate }}a={{ .Name }}\n\nünï={{ .x.y }}\n";
        let at = |line, column| Pos::new(line, column);
        let cases: Vec<(Pos, &str, Option<Origin>)> = vec![
            (at(2, 21), block, Some(Origin { line: 3, indent: 6 })),
            (at(3, 7), block, Some(Origin { line: 3, indent: 6 })),
            (at(6, 9), "{{ .a }}\n", None),
            (
                at(8, 9),
                "a={{ .p.q }}",
                Some(Origin { line: 8, indent: 8 }),
            ),
            (at(9, 9), "{{ .p.q }}", Some(Origin { line: 9, indent: 9 })),
            (at(10, 9), "A{{ .p.q }}", None),
            // A text that is not what the file holds there.
            (at(2, 21), "{{ other }}\n", None),
            (Pos::default(), block, None),
        ];
        let got: Vec<Option<Origin>> = cases
            .iter()
            .map(|(p, t, _)| Origin::find(&lines, *p, t))
            .collect();
        let want: Vec<Option<Origin>> = cases.iter().map(|c| c.2).collect();
        assert_eq!(got, want);
        // Template line 3, byte column 10 (after "ünï=" of 6 bytes and 4 characters, then
        // "{{ "): file line 5, character column 6 + 7 + 1.
        let o = Origin { line: 3, indent: 6 };
        assert_eq!(o.locate(block, 3, 10), Some(at(5, 14)));
        assert_eq!(o.locate(block, 1, 10), Some(at(3, 16)));
        assert_eq!(o.locate(block, 9, 1), None);
    }

    #[test]
    fn malformed_output_and_templates() {
        assert_eq!(
            expand("novalue"),
            Err("failed to expand template: missing value in expanded template line \"novalue\", (format must be '<key>=<value>')".into())
        );
        let t = RuleTemplate::parse("{{ range .pci.device }}", Pos::default());
        assert!(
            t.parse_error().unwrap().1.starts_with("invalid template: "),
            "{t:?}"
        );
        assert!(
            t.expand(&data())
                .unwrap_err()
                .starts_with("failed to parse template: invalid template: ")
        );
        let t = RuleTemplate::parse("{{ env \"HOME\" }}", Pos::default());
        assert!(t.parse_error().is_some(), "env is removed, as in NFD");
        let big = "x".repeat(crate::gotmpl::limits::MAX_TEMPLATE_SIZE + 1);
        assert!(
            RuleTemplate::parse(&big, Pos::default())
                .parse_error()
                .unwrap()
                .1
                .starts_with("template exceeds maximum allowed size")
        );
    }

    /// The stack the bounds are sized for (`gotmpl::limits`): on a 2 MiB thread, the smallest
    /// that evaluates rules, in this unoptimised build, the deepest templates the bounds let
    /// through are parsed, walked by `rules check`, rendered and dropped: 32 parentheses inside
    /// 63 nested controls, and 32 inside each of the 100 bodies the executor allows (it stops
    /// the recursion there, with its error). One level more of either is refused by the scan.
    #[test]
    fn the_deepest_templates_the_bounds_allow_fit_a_2_mib_stack() {
        use crate::gotmpl::limits::{MAX_CONTROL_DEPTH, MAX_EXPRESSION_DEPTH};
        let expr = |inner: &str| {
            format!(
                "{}{inner}{}",
                "(not ".repeat(MAX_EXPRESSION_DEPTH),
                ")".repeat(MAX_EXPRESSION_DEPTH)
            )
        };
        let controls = format!(
            "{}x={{{{ {} }}}}{}",
            "{{ range list 1 }}".repeat(MAX_CONTROL_DEPTH),
            expr("true"),
            "{{ end }}".repeat(MAX_CONTROL_DEPTH)
        );
        let recursion = format!(
            "{{{{ define \"r\" }}}}{{{{ if {} }}}}{{{{ template \"r\" . }}}}{{{{ end }}}}{{{{ end }}}}{{{{ template \"r\" . }}}}",
            expr("true")
        );
        let run = move || {
            [controls, recursion].map(|source| {
                let t = RuleTemplate::parse(&source, Pos::default());
                let walked = t.field_typos().map(|(typos, _)| typos.len());
                (t.parse_error(), walked, t.expand(&data()))
            })
        };
        let got = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(run)
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(
            got,
            [
                (None, Some(0), Ok(vec![("x".to_string(), "true".to_string())])),
                (
                    None,
                    Some(0),
                    Err("failed to expand template: line 1, column 234: exceeded the maximum template nesting depth of 100".to_string())
                ),
            ]
        );
    }

    #[test]
    fn sprig_functions_in_templates() {
        assert_eq!(
            expand(
                "{{ range .pci.device }}{{ .device | upper | printf \"dev-%s\" }}={{ trimPrefix \"03\" .class }}\n{{ end }}"
            ),
            pairs(&[("dev-9A49", "00"), ("dev-56C0", "80")])
        );
        assert_eq!(
            expand(
                "a={{ \"NVIDIA A100-SXM4\" | replace \" \" \"-\" | lower }}\nb={{ default \"none\" \"\" }}\nc={{ splitList \".\" \"550.54.15\" | first }}"
            ),
            pairs(&[("a", "nvidia-a100-sxm4"), ("b", "none"), ("c", "550")])
        );
        assert_eq!(
            expand("x={{ regexReplaceAll \"^([0-9]+)\\\\..*$\" \"12.4.1\" \"${1}\" }}"),
            pairs(&[("x", "12")])
        );
        assert_eq!(
            expand("x={{ date \"2006\" 0 }}").unwrap_err(),
            "failed to expand template: line 1, column 6: template function \"date\" is not supported by gpu-labeler"
        );
    }

    /// `tests/fixtures/sprig/classes.tsv`: the classes of template where NFD v0.19 answered
    /// otherwise (issue #50), each over cases beyond the first one found, against what Go's
    /// text/template and Sprig write: the output, or `ERROR: ` and Go's message less its
    /// `template: ...: executing ... at <...>: ` prefix. Each row runs with nil data or with
    /// `data()`, typed as NFD types it (`nfd`). `ERROR: message` is compared whole; `ERROR (Go:
    /// message)` only has to fail (the message here is worded otherwise). Go's "error calling
    /// NAME: " before a function's own message is not written here. `DEVIATION: output` is
    /// what this engine writes where docs/sprig.md names a deliberate difference.
    #[test]
    fn each_class_of_round_4_gives_go_s_output() {
        let table = include_str!("../../tests/fixtures/sprig/classes.tsv");
        let mut failures = Vec::new();
        let mut classes = std::collections::BTreeSet::new();
        for (n, line) in table.lines().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 4, "classes.tsv:{}: {line:?}", n + 1);
            let (class, data_kind, source, want) =
                (cols[0], cols[1], unescape(cols[2]), unescape(cols[3]));
            classes.insert(class);
            let data = match data_kind {
                "nil" => Value::Nil,
                "nfd" => data(),
                other => panic!("classes.tsv:{}: data {other:?}", n + 1),
            };
            let got = engine::parse(&source)
                .map_err(|f| f.message)
                .and_then(|t| {
                    t.render(&Context::from(data))
                        .map_err(|e| engine::exec_message(&e).1)
                })
                .map_err(|e| format!("ERROR: {e}"));
            // A documented deviation (docs/sprig.md): what this engine writes instead, Go's
            // answer in the comment line above it.
            if let Some(here) = want.strip_prefix("DEVIATION: ") {
                if got.as_deref() != Ok(here) {
                    failures.push(format!("classes.tsv:{}: {source}: {got:?}", n + 1));
                }
                continue;
            }
            let ok = match (&got, want.strip_prefix("ERROR")) {
                (Ok(out), None) => *out == want,
                (Err(_), Some(rest)) if rest.starts_with(" (Go: ") => true,
                // Go words a function's own failure "error calling NAME: ...", this engine
                // gives the failure alone.
                (Err(e), Some(_)) => {
                    *e == want
                        || want
                            .strip_prefix("ERROR: error calling ")
                            .and_then(|m| m.split_once(": "))
                            .is_some_and(|(_, m)| e.strip_prefix("ERROR: ") == Some(m))
                }
                _ => false,
            };
            if !ok {
                failures.push(format!(
                    "classes.tsv:{}: {class}: {source}\n    Go: {want:?}\n  here: {got:?}",
                    n + 1
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of the cases differ:\n{}",
            failures.len(),
            failures.join("\n")
        );
        assert!(classes.len() >= 18, "{classes:?}");
    }

    /// The bounds a render runs under where Go has none (docs/rules.md, deliberate difference
    /// 11), each exact: at the bound the template renders, one past it fails the rule with
    /// the message named there. Go renders every one of them (NFD publishes the labels).
    #[test]
    fn the_render_bounds_are_the_documented_ones() {
        let recurse = |n: usize| {
            format!(
                "{{{{ define \"r\" }}}}{{{{ if lt . {n} }}}}{{{{ template \"r\" (add1 .) }}}}{{{{ end }}}}{{{{ end }}}}{{{{ template \"r\" 0 }}}}x=ok"
            )
        };
        let nest = |n: usize, f: &str| {
            format!(
                "{{{{ $v := list }}}}{{{{ range until {n} }}}}{{{{ $v = {f} $v }}}}{{{{ end }}}}x={{{{ len $v }}}}"
            )
        };
        let ok = || Ok(vec![("x".to_string(), "ok".to_string())]);
        let one = || Ok(vec![("x".to_string(), "1".to_string())]);
        let err = |at: &str, m: &str| {
            Err(format!(
                "failed to expand template: line 1, column {at}: {m}"
            ))
        };
        type Expanded = Result<Vec<(String, String)>, String>;
        let cases: Vec<(String, Expanded)> = vec![
            // 10,000 elements from until, untilStep, seq.
            ("{{ $n := until 10000 | len }}x=ok".into(), ok()),
            (
                "{{ $n := until 10001 | len }}x=ok".into(),
                err("4", "untilStep: more than 10000 elements"),
            ),
            (
                "{{ $n := untilStep 0 20002 2 | len }}x=ok".into(),
                err("4", "untilStep: more than 10000 elements"),
            ),
            (
                "{{ $n := seq 10001 }}x=ok".into(),
                err("4", "untilStep: more than 10000 elements"),
            ),
            // 10,000 iterations of a range over an integer.
            ("{{ range 10000 }}{{ end }}x=ok".into(), ok()),
            (
                "{{ range 10001 }}{{ end }}x=ok".into(),
                err(
                    "10",
                    "range over 10001 is more than the 10000 iterations allowed",
                ),
            ),
            // 1,000,000 iterations in one render, all loops together.
            (
                "{{ range until 10000 }}{{ range until 99 }}{{ end }}{{ end }}x=ok".into(),
                ok(),
            ),
            (
                "{{ range until 10000 }}{{ range until 100 }}{{ end }}{{ end }}x=ok".into(),
                err(
                    "33",
                    "the render would run more than the 1000000 iterations allowed",
                ),
            ),
            // 100 bodies one inside another: a template calling itself from an `if` 50 times.
            (recurse(49), ok()),
            (
                recurse(50),
                err("45", "exceeded the maximum template nesting depth of 100"),
            ),
            // Values nested 128 deep.
            (nest(127, "list"), one()),
            (
                nest(128, "list"),
                err(
                    "41",
                    "a function produced a value nested deeper than the 128 levels allowed",
                ),
            ),
            (nest(127, "dict \"k\""), one()),
            (
                nest(128, "dict \"k\""),
                err(
                    "41",
                    "a function produced a value nested deeper than the 128 levels allowed",
                ),
            ),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|(source, _)| (source.clone(), expand_nil(source)))
            .collect();
        assert_eq!(got, cases);
    }

    fn expand_nil(src: &str) -> Result<Vec<(String, String)>, String> {
        RuleTemplate::parse(src, Pos::default()).expand(&Value::Nil)
    }

    /// The table's escapes: `\\n` newline, `\\t` tab, `\\` before any other character keeps it.
    fn unescape(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match (c, c == '\\') {
                (_, true) => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(other) => out.push(other),
                    None => out.push('\\'),
                },
                (c, false) => out.push(c),
            }
        }
        out
    }

    /// `tests/fixtures/sprig/cases.tsv`: each function of the table over the kinds of value it
    /// treats differently, against the output Go + Sprig v3.3.0 write (`ERROR` where Go's
    /// execution fails). Every implemented Sprig function and text/template builtin has cases.
    #[test]
    fn every_function_gives_go_s_output() {
        let table = include_str!("../../tests/fixtures/sprig/cases.tsv");
        let unescape = |s: &str| {
            let mut out = String::new();
            let mut chars = s.chars();
            while let Some(c) = chars.next() {
                match (c, c == '\\') {
                    (_, true) => match chars.next() {
                        Some('n') => out.push('\n'),
                        Some('t') => out.push('\t'),
                        Some(other) => out.push(other),
                        None => out.push('\\'),
                    },
                    (c, false) => out.push(c),
                }
            }
            out
        };
        // The documented deviations (docs/rules.md, "Deliberate differences from NFD", 5; docs/sprig.md):
        // the template, what it gives here, and why.
        let deviations: &[(&str, &str, &str)] = &[
            (
                r#"{{ repeat (add 1 1) "ab" }}"#,
                "abab",
                "an int parameter takes an int64",
            ),
            (
                r#"{{ $n := 2.0 }}{{ repeat $n "ab" }}"#,
                "abab",
                "an int parameter takes an integral float",
            ),
            (
                "{{ typeOf (int64 1) }}",
                "int",
                "int and int64 are one kind",
            ),
            ("{{ typeOf (add1 1) }}", "int", "int and int64 are one kind"),
            (
                "{{ typeOf (add 1 1) }}",
                "int",
                "int and int64 are one kind",
            ),
            (
                "{{ deepEqual 1 (add 0 1) }}",
                "true",
                "int and int64 are one kind",
            ),
            (
                "{{ typeOf (toStrings (list 1)) }}",
                "[]interface {}",
                "lists are untyped",
            ),
            (
                "{{ typeOf (until 2) }}",
                "[]interface {}",
                "lists are untyped",
            ),
            (
                "{{ toJson (list | rest) }}",
                "[]",
                "a nil list is an empty list",
            ),
            (
                r#"{{ $d := dict "one" 1 }}{{ $_ := set $d "two" 2 }}{{ $d.two }}"#,
                "ERROR",
                "set returns the changed dict, $d stays",
            ),
            (
                r#"{{ $d := dict "one" 1 "two" 222222 }}{{ $_ := unset $d "two" }}{{ range $k, $v := $d }}{{ $k }}{{ $v }}{{ end }}"#,
                "one1two222222",
                "unset returns the changed dict, $d stays",
            ),
            (
                r#"{{ semver "1.2.3" | (semver "1.2.3").Compare }}"#,
                "ERROR",
                "a version's methods with arguments",
            ),
            (
                r#"{{ semver "1.2.3" | (semver "1.3.3").Compare }}"#,
                "ERROR",
                "a version's methods with arguments",
            ),
            (
                r#"{{ semver "1.4.3" | (semver "1.2.3").Compare }}"#,
                "ERROR",
                "a version's methods with arguments",
            ),
            (
                r#"{{ (semver "1.2.3").LessThan (semver "1.10.0") }}"#,
                "ERROR",
                "a version's methods with arguments",
            ),
            (
                r#"{{ (semver "1.2.3").IncMinor }}"#,
                "ERROR",
                "a version's Inc* methods",
            ),
            ("{{ 1i }}", "ERROR", "complex constants"),
            ("{{ 1+2i }}", "ERROR", "complex constants"),
        ];
        let mut failures = Vec::new();
        let mut covered = std::collections::BTreeSet::new();
        let mut deviated = std::collections::BTreeSet::new();
        for (n, line) in table.lines().enumerate() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 3, "cases.tsv:{}: {line:?}", n + 1);
            let (func, source, mut want) = (cols[0], cols[1], unescape(cols[2]));
            if let Some(d) = deviations.iter().find(|d| d.0 == source) {
                assert_ne!(want, d.1, "cases.tsv:{}: not a deviation", n + 1);
                deviated.insert(d.0);
                want = d.1.to_string();
            }
            covered.insert(func);
            let got = engine::parse(source).map_err(|f| f.message).and_then(|t| {
                t.render(&Context::from(Value::Nil))
                    .map_err(|e| engine::exec_message(&e).1)
            });
            let ok = match &got {
                Ok(out) => *out == want,
                Err(_) => want == "ERROR",
            };
            if !ok {
                failures.push(format!(
                    "cases.tsv:{}: {source}\n    Go: {want:?}\n  here: {got:?}",
                    n + 1
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of the cases differ:\n{}",
            failures.len(),
            failures.join("\n")
        );
        assert_eq!(
            deviated.len(),
            deviations.len(),
            "a deviation is not in cases.tsv"
        );
        let names = crate::gotmpl::sprig::FUNCTIONS
            .iter()
            .map(|f| f.0)
            .chain(gtmpl_ng::funcs::BUILTINS.iter().map(|f| f.0))
            .filter(|n| !["call"].contains(n));
        let missing: Vec<&str> = names.filter(|n| !covered.contains(n)).collect();
        assert!(missing.is_empty(), "no cases for {missing:?}");
    }
}
