//! Match expressions: NFD's operators, evaluated against one element.
//!
//! Semantics are NFD's `evaluateMatchExpression`: `Exists`/`DoesNotExist` look only at
//! presence; every other operator is false, without error, on an absent element or a flag
//! (which has no value); on a present value a malformed expression or an unparsable value is
//! an error. Regular expressions, integer bounds and versions are compiled once, when the rule
//! set is loaded; a compile error is kept and reported when the expression meets a value, as
//! NFD would report it then.

use std::collections::HashMap;
use std::sync::Arc;

use regex::RegexSet;

use super::simple_regex::Sequence;

use super::model::ExprSpec;
use crate::gotmpl::regexp::{
    REGEX_DFA_SIZE_LIMIT, REGEX_SIZE_LIMIT, build_regex, compile_go_regex, go_regex, one_line,
};
use crate::gotmpl::version::{Version, parse_version};
use crate::yaml::document::Pos;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    In,
    NotIn,
    InRegexp,
    Exists,
    DoesNotExist,
    Gt,
    Ge,
    Lt,
    Le,
    GtLt,
    GeLe,
    IsTrue,
    IsFalse,
}

impl Op {
    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "In" => Op::In,
            "NotIn" => Op::NotIn,
            "InRegexp" => Op::InRegexp,
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            "Gt" => Op::Gt,
            "Ge" => Op::Ge,
            "Lt" => Op::Lt,
            "Le" => Op::Le,
            "GtLt" => Op::GtLt,
            "GeLe" => Op::GeLe,
            "IsTrue" => Op::IsTrue,
            "IsFalse" => Op::IsFalse,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::In => "In",
            Op::NotIn => "NotIn",
            Op::InRegexp => "InRegexp",
            Op::Exists => "Exists",
            Op::DoesNotExist => "DoesNotExist",
            Op::Gt => "Gt",
            Op::Ge => "Ge",
            Op::Lt => "Lt",
            Op::Le => "Le",
            Op::GtLt => "GtLt",
            Op::GeLe => "GeLe",
            Op::IsTrue => "IsTrue",
            Op::IsFalse => "IsFalse",
        }
    }

    fn is_comparison(self) -> bool {
        matches!(
            self,
            Op::Gt | Op::Ge | Op::Lt | Op::Le | Op::GtLt | Op::GeLe
        )
    }
}

/// What an expression is evaluated against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input<'a> {
    /// The element is not there.
    Absent,
    /// A flag element: present, without a value.
    Flag,
    /// An attribute value, an instance attribute, or an element name (`matchName`).
    Value(&'a str),
}

#[derive(Debug)]
enum Compiled {
    Plain,
    /// Shared by every expression of the rule set with the same patterns.
    Regex(Arc<Result<Patterns, String>>),
    Int(Result<Vec<i64>, String>),
    Version(Result<Vec<Version>, String>),
}

/// A compiled match expression.
#[derive(Debug)]
pub struct Expr {
    /// The element name (`matchExpressions` key); empty for `matchName`.
    pub key: String,
    pub op: Op,
    pub values: Vec<String>,
    pub value_type: String,
    pub pos: Pos,
    value_pos: Vec<Pos>,
    type_pos: Pos,
    compiled: Compiled,
}

/// Problem severity for `rules check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// What the expressions of one rule set share once compiled: one regular expression set per
/// distinct list of patterns (operators' rule files repeat them).
#[derive(Debug, Default)]
pub struct Compiler {
    regexes: HashMap<Vec<String>, Arc<Result<Patterns, String>>>,
}

impl Compiler {
    fn regexes(&mut self, values: &[String]) -> Arc<Result<Patterns, String>> {
        if let Some(r) = self.regexes.get(values) {
            return r.clone();
        }
        let r = Arc::new(compile_regexps(values));
        self.regexes.insert(values.to_vec(), r.clone());
        r
    }
}

impl Expr {
    /// Compiles an expression whose operator was admitted (`model` refuses unknown ones).
    pub fn compile(spec: &ExprSpec) -> Option<Expr> {
        Expr::compile_with(spec, &mut Compiler::default())
    }

    /// As `compile`, sharing what `compiler` already compiled.
    pub fn compile_with(spec: &ExprSpec, compiler: &mut Compiler) -> Option<Expr> {
        let op = Op::parse(&spec.op)?;
        let values: Vec<String> = spec.values.iter().map(|(v, _)| v.clone()).collect();
        let compiled = match op {
            Op::InRegexp => Compiled::Regex(compiler.regexes(&values)),
            _ if op.is_comparison() => match spec.value_type.as_str() {
                "version" => Compiled::Version(
                    values
                        .iter()
                        .map(|v| parse_version(v).map_err(|e| format!("not a version {v:?}: {e}")))
                        .collect(),
                ),
                "" => Compiled::Int(
                    values
                        .iter()
                        .map(|v| parse_int(v).ok_or_else(|| format!("not a number {v:?}")))
                        .collect(),
                ),
                _ => Compiled::Plain,
            },
            _ => Compiled::Plain,
        };
        Some(Expr {
            key: spec.key.clone(),
            op,
            values,
            value_type: spec.value_type.clone(),
            pos: spec.pos,
            value_pos: spec.values.iter().map(|(_, p)| *p).collect(),
            type_pos: spec.type_pos,
            compiled,
        })
    }

    /// Evaluates the expression against one input, exactly as NFD does.
    pub fn eval(&self, input: Input<'_>) -> Result<bool, String> {
        match self.op {
            Op::Exists | Op::DoesNotExist => {
                self.want_no_values()?;
                let present = !matches!(input, Input::Absent);
                return Ok(present == (self.op == Op::Exists));
            }
            _ => {}
        }
        let Input::Value(value) = input else {
            return Ok(false);
        };
        match self.op {
            Op::In | Op::NotIn => {
                self.want_some_values()?;
                let found = self.values.iter().any(|v| v == value);
                Ok(found == (self.op == Op::In))
            }
            Op::InRegexp => {
                self.want_some_values()?;
                match &self.compiled {
                    Compiled::Regex(r) => match r.as_ref() {
                        Ok(patterns) => Ok(patterns.is_match(value)),
                        Err(e) => Err(e.clone()),
                    },
                    _ => Err("internal: regexps not compiled".to_string()),
                }
            }
            Op::Gt | Op::Ge | Op::Lt | Op::Le | Op::GtLt | Op::GeLe => self.compare(value),
            Op::IsTrue | Op::IsFalse => {
                self.want_no_values()?;
                Ok(value
                    == if self.op == Op::IsTrue {
                        "true"
                    } else {
                        "false"
                    })
            }
            Op::Exists | Op::DoesNotExist => Ok(false),
        }
    }

    fn compare(&self, value: &str) -> Result<bool, String> {
        let range = matches!(self.op, Op::GtLt | Op::GeLe);
        let want = if range { 2 } else { 1 };
        if self.values.len() != want {
            return Err(format!(
                "invalid expression, 'value' field must contain exactly {} for Op {:?} (have {:?})",
                if range { "two elements" } else { "one element" },
                self.op.as_str(),
                self.values
            ));
        }
        match &self.compiled {
            Compiled::Int(bounds) => {
                let v = parse_int(value).ok_or_else(|| format!("not a number {value:?}"))?;
                let b = bounds.as_ref().map_err(Clone::clone)?;
                if range && b[0] >= b[1] {
                    return Err(format!(
                        "invalid expression, value[0] must be less than value[1] for Op {:?} (have {:?})",
                        self.op.as_str(),
                        self.values
                    ));
                }
                Ok(ordered(self.op, v, b))
            }
            Compiled::Version(bounds) => {
                let v = parse_version(value).map_err(|_| format!("not a version {value:?}"))?;
                let b = bounds.as_ref().map_err(Clone::clone)?;
                Ok(ordered(self.op, v, b))
            }
            _ => Err(format!(
                "invalid expression, 'type' field only accepts \"version\" for Op {:?} (have {:?})",
                self.op.as_str(),
                self.value_type
            )),
        }
    }

    fn want_no_values(&self) -> Result<(), String> {
        if self.values.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "invalid expression, 'value' field must be empty for Op {:?} (have {:?})",
                self.op.as_str(),
                self.values
            ))
        }
    }

    fn want_some_values(&self) -> Result<(), String> {
        if self.values.is_empty() {
            Err(format!(
                "invalid expression, 'value' field must be non-empty for Op {:?}",
                self.op.as_str()
            ))
        } else {
            Ok(())
        }
    }

    /// `class In ["0300", "0380"]`, as shown by `explain`.
    pub fn describe(&self) -> String {
        let mut s = if self.key.is_empty() {
            format!("name {}", self.op.as_str())
        } else {
            format!("{} {}", self.key, self.op.as_str())
        };
        if !self.values.is_empty() {
            let vals: Vec<String> = self.values.iter().map(|v| format!("{v:?}")).collect();
            s.push_str(&format!(" [{}]", vals.join(", ")));
        }
        if !self.value_type.is_empty() {
            s.push_str(&format!(" (type {})", self.value_type));
        }
        s
    }

    /// What `rules check` reports about this expression without any features: every problem
    /// that would make it fail at evaluation, and some that make it silently useless.
    pub fn static_problems(&self) -> Vec<(Pos, Severity, String)> {
        let mut out = Vec::new();
        let op = self.op.as_str();
        let count = self.values.len();
        let pos_of = |i: usize| self.value_pos.get(i).copied().unwrap_or(self.pos);
        match self.op {
            Op::Exists | Op::DoesNotExist | Op::IsTrue | Op::IsFalse if count > 0 => out.push((
                pos_of(0),
                Severity::Error,
                format!("{op} takes no values (has {count})"),
            )),
            Op::In | Op::NotIn | Op::InRegexp if count == 0 => out.push((
                self.pos,
                Severity::Error,
                format!("{op} needs at least one value"),
            )),
            Op::Gt | Op::Ge | Op::Lt | Op::Le if count != 1 => out.push((
                self.pos,
                Severity::Error,
                format!("{op} needs exactly one value (has {count})"),
            )),
            Op::GtLt | Op::GeLe if count != 2 => out.push((
                self.pos,
                Severity::Error,
                format!("{op} needs exactly two values (has {count})"),
            )),
            _ => {}
        }
        // The patterns compiled with the rule set; only when that failed is each one compiled
        // alone, to point at the one at fault.
        let patterns_failed = !matches!(&self.compiled, Compiled::Regex(r) if r.is_ok());
        if self.op == Op::InRegexp && patterns_failed {
            for (i, v) in self.values.iter().enumerate() {
                if let Err(e) = compile_go_regex(v) {
                    out.push((
                        pos_of(i),
                        Severity::Error,
                        format!("invalid regexp {}: {e}", shown_pattern(v)),
                    ));
                }
            }
        }
        if self.op.is_comparison() {
            match self.value_type.as_str() {
                "" => {
                    let mut ints = Vec::new();
                    for (i, v) in self.values.iter().enumerate() {
                        match parse_int(v) {
                            Some(n) => ints.push(n),
                            None => {
                                let hint = if parse_version(v).is_ok() {
                                    " (add `type: version` to compare versions)"
                                } else {
                                    ""
                                };
                                out.push((
                                    pos_of(i),
                                    Severity::Error,
                                    format!("{op} needs an integer, got {v:?}{hint}"),
                                ))
                            }
                        }
                    }
                    // Bounds only for the ranges (`Gt` with two values is said above).
                    if let [lo, hi] = ints.as_slice()
                        && matches!(self.op, Op::GtLt | Op::GeLe)
                        && lo >= hi
                    {
                        out.push((
                            self.pos,
                            Severity::Error,
                            format!("{op} bounds are inverted: {lo} is not less than {hi}"),
                        ));
                    }
                }
                "version" => {
                    let mut vers = Vec::new();
                    for (i, v) in self.values.iter().enumerate() {
                        match parse_version(v) {
                            Ok(ver) => vers.push(ver),
                            Err(e) => out.push((
                                pos_of(i),
                                Severity::Error,
                                format!("{op} needs a version, got {v:?}: {e}"),
                            )),
                        }
                    }
                    if let [lo, hi] = vers.as_slice()
                        && matches!(self.op, Op::GtLt | Op::GeLe)
                        && lo >= hi
                    {
                        out.push((
                            self.pos,
                            Severity::Error,
                            format!(
                                "{op} bounds are inverted: {:?} is not less than {:?}; nothing can match",
                                self.values[0], self.values[1]
                            ),
                        ));
                    }
                }
                other => out.push((
                    self.type_pos,
                    Severity::Error,
                    format!("unknown type {other:?} (the only type is \"version\")"),
                )),
            }
        } else if !self.value_type.is_empty() {
            out.push((
                self.type_pos,
                Severity::Warning,
                format!("type {:?} is ignored by {op}", self.value_type),
            ));
        }
        out
    }
}

fn ordered<T: Ord>(op: Op, v: T, b: &[T]) -> bool {
    match (op, b) {
        (Op::Gt, [x, ..]) => v > *x,
        (Op::Ge, [x, ..]) => v >= *x,
        (Op::Lt, [x, ..]) => v < *x,
        (Op::Le, [x, ..]) => v <= *x,
        (Op::GtLt, [lo, hi, ..]) => v > *lo && v < *hi,
        (Op::GeLe, [lo, hi, ..]) => v >= *lo && v <= *hi,
        _ => false,
    }
}

/// The patterns of one `InRegexp`: fixed sequences matched directly when every pattern is
/// one, else a regex set.
#[derive(Debug)]
pub enum Patterns {
    Sequences(Vec<Sequence>),
    Set(RegexSet),
}

impl Patterns {
    fn is_match(&self, value: &str) -> bool {
        match self {
            Patterns::Sequences(seqs) => seqs.iter().any(|s| s.is_match(value)),
            Patterns::Set(set) => set.is_match(value),
        }
    }
}

fn compile_regexps(values: &[String]) -> Result<Patterns, String> {
    let translated = values
        .iter()
        .map(|v| go_regex(v).map_err(|e| format!("invalid regexp {}: {e}", shown_pattern(v))))
        .collect::<Result<Vec<String>, String>>()?;
    if let Some(seqs) = translated
        .iter()
        .map(|t| Sequence::parse(t))
        .collect::<Option<Vec<Sequence>>>()
    {
        return Ok(Patterns::Sequences(seqs));
    }
    regex::RegexSetBuilder::new(&translated)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build()
        .map(Patterns::Set)
        .map_err(|set_error| {
            // Only on failure is each pattern compiled alone, to name the one at fault.
            values
                .iter()
                .zip(&translated)
                .find_map(|(v, t)| {
                    build_regex(t).err().map(|e| {
                        format!(
                            "invalid regexp {}: {}",
                            shown_pattern(v),
                            one_line(&e.to_string())
                        )
                    })
                })
                .unwrap_or_else(|| one_line(&set_error.to_string()))
        })
}

/// A pattern as an error message quotes it: whole up to 100 characters, else its start and its
/// length (a refused 100,000-character pattern is not 100 KB of log every cycle).
fn shown_pattern(v: &str) -> String {
    match v.char_indices().nth(100) {
        Some((i, _)) => format!("{:?}… ({} bytes)", &v[..i], v.len()),
        None => format!("{v:?}"),
    }
}

/// Go's `strconv.Atoi` on 64-bit: an optional sign and decimal digits, within `i64`.
pub fn parse_int(s: &str) -> Option<i64> {
    s.parse::<i64>().ok()
}

#[cfg(test)]
mod tests {

    /// Go's RE2, where Rust's regex differs: `\Q...\E`, repeat counts over 1000, ASCII-only
    /// Perl classes and word boundaries (Go's regexp/syntax documentation).
    #[test]
    fn regexes_are_go_s() {
        let m = |p: &str, text: &str| compile_go_regex(p).map(|r| r.is_match(text));
        assert_eq!(m(r"^\Qa.b*\E$", "a.b*"), Ok(true));
        assert_eq!(m(r"^\Qa.b*\E$", "axbbb"), Ok(false));
        assert_eq!(m(r"^\Qa.b", "a.b"), Ok(true));
        assert_eq!(m(r"^x{1000}$", &"x".repeat(1000)), Ok(true));
        assert_eq!(
            m("x{1001}", "x"),
            Err("invalid repeat count: `{1001}`".to_string())
        );
        assert_eq!(
            m("x{2,1001}", "x"),
            Err("invalid repeat count: `{2,1001}`".to_string())
        );
        assert_eq!(m(r"^\w+$", "abc_1"), Ok(true));
        assert_eq!(m(r"^\w+$", "é"), Ok(false));
        assert_eq!(m(r"^\d$", "\u{663}"), Ok(false));
        assert_eq!(m(r"^[\w-]+$", "a-b"), Ok(true));
        assert_eq!(m(r"^\s$", "\u{a0}"), Ok(false));
        assert_eq!(m(r"\bé", "xé"), Ok(true));
        assert_eq!(m(r"^[]a]+$", "]a"), Ok(true));
        assert_eq!(m(r"a{,3}", "a{,3}"), Ok(true));
        assert_eq!(m(r"\\Q", "\\Q"), Ok(true));
    }

    use super::*;

    fn expr(op: &str, values: &[&str], value_type: &str) -> Expr {
        Expr::compile(&ExprSpec {
            key: "k".into(),
            pos: Pos::default(),
            op: op.into(),
            op_pos: Pos::default(),
            values: values
                .iter()
                .map(|v| (v.to_string(), Pos::default()))
                .collect(),
            value_type: value_type.into(),
            type_pos: Pos::default(),
        })
        .expect("known op")
    }

    const A: Input = Input::Absent;
    const F: Input = Input::Flag;
    fn v(s: &str) -> Input<'_> {
        Input::Value(s)
    }

    /// Every operator against an absent element, a flag and a value; `Ok(bool)` or an error.
    #[test]
    fn operator_table() {
        type Case = (
            &'static str,
            &'static [&'static str],
            &'static str,
            Input<'static>,
            Option<bool>,
        );
        let cases: &[Case] = &[
            ("In", &["1", "2"], "", A, Some(false)),
            ("In", &["1", "2"], "", F, Some(false)),
            ("In", &["1", "2"], "", v("2"), Some(true)),
            ("In", &["1", "2"], "", v("3"), Some(false)),
            ("In", &[], "", A, Some(false)),
            ("In", &[], "", F, Some(false)),
            ("In", &[], "", v("1"), None),
            ("NotIn", &["1", "2"], "", A, Some(false)),
            ("NotIn", &["1", "2"], "", F, Some(false)),
            ("NotIn", &["1", "2"], "", v("3"), Some(true)),
            ("NotIn", &["1", "2"], "", v("2"), Some(false)),
            ("NotIn", &[], "", v("2"), None),
            ("InRegexp", &["^val-[0-9]$"], "", v("val-1"), Some(true)),
            ("InRegexp", &["^val-[0-9]$"], "", v("val-12"), Some(false)),
            (
                "InRegexp",
                &["val-[0-9]$", "al-[1-9]"],
                "",
                v("val-12"),
                Some(true),
            ),
            ("InRegexp", &["0"], "", v("10de"), Some(true)), // unanchored, as RE2
            ("InRegexp", &["^03"], "", A, Some(false)),
            ("InRegexp", &["^03"], "", F, Some(false)),
            ("InRegexp", &["("], "", A, Some(false)),
            ("InRegexp", &["("], "", v("x"), None),
            ("InRegexp", &[], "", v("x"), None),
            ("Exists", &[], "", A, Some(false)),
            ("Exists", &[], "", F, Some(true)),
            ("Exists", &[], "", v(""), Some(true)),
            ("Exists", &["1"], "", A, None),
            ("DoesNotExist", &[], "", A, Some(true)),
            ("DoesNotExist", &[], "", F, Some(false)),
            ("DoesNotExist", &[], "", v("x"), Some(false)),
            ("DoesNotExist", &["1"], "", A, None),
            ("Gt", &["2"], "", A, Some(false)),
            ("Gt", &["2"], "", F, Some(false)),
            ("Gt", &["2"], "", v("3"), Some(true)),
            ("Gt", &["2"], "", v("2"), Some(false)),
            ("Gt", &["-10"], "", v("-3"), Some(true)),
            ("Gt", &["2"], "", v("+3"), Some(true)),
            ("Gt", &["2"], "", v("3a"), None),
            ("Gt", &["2"], "", v("3.0"), None),
            ("Gt", &["2"], "", v(""), None),
            ("Gt", &["2.0"], "", v("3"), None),
            ("Gt", &["2.0"], "", A, Some(false)),
            ("Gt", &[], "", v("3"), None),
            ("Gt", &["1", "2"], "", v("3"), None),
            ("Gt", &["2"], "Version", v("3"), None),
            ("Ge", &["2"], "", v("2"), Some(true)),
            ("Ge", &["2"], "", v("1"), Some(false)),
            ("Lt", &["2"], "", v("1"), Some(true)),
            ("Lt", &["2"], "", v("2"), Some(false)),
            ("Lt", &["-10"], "", v("-3"), Some(false)),
            ("Lt", &["2"], "", v("1.0"), None),
            ("Le", &["2"], "", v("2"), Some(true)),
            ("Le", &["2"], "", v("3"), Some(false)),
            ("GtLt", &["1", "10"], "", A, Some(false)),
            ("GtLt", &["1", "10"], "", v("1"), Some(false)),
            ("GtLt", &["1", "10"], "", v("10"), Some(false)),
            ("GtLt", &["1", "10"], "", v("2"), Some(true)),
            ("GtLt", &["2", "1"], "", v("1"), None),
            ("GtLt", &["1", "1"], "", v("1"), None),
            ("GtLt", &["1"], "", v("1"), None),
            ("GtLt", &["a", "2"], "", v("1"), None),
            ("GtLt", &["1", "10"], "", v("1.0"), None),
            ("GeLe", &["-10", "10"], "", v("-10"), Some(true)),
            ("GeLe", &["-10", "10"], "", v("10"), Some(true)),
            ("GeLe", &["-10", "10"], "", v("11"), Some(false)),
            ("IsTrue", &[], "", A, Some(false)),
            ("IsTrue", &[], "", F, Some(false)),
            ("IsTrue", &[], "", v("true"), Some(true)),
            ("IsTrue", &[], "", v("True"), Some(false)),
            ("IsTrue", &["1"], "", v("true"), None),
            ("IsTrue", &["1"], "", A, Some(false)),
            ("IsFalse", &[], "", v("false"), Some(true)),
            ("IsFalse", &[], "", v("true"), Some(false)),
            ("IsFalse", &[], "", F, Some(false)),
            ("IsFalse", &["1", "2"], "", v("false"), None),
            // type: version
            ("Gt", &["2.0"], "version", v("2.1"), Some(true)),
            ("Gt", &["2.0"], "version", v("2.0"), Some(false)),
            ("Gt", &["2.0.1"], "version", v("2.0.2"), Some(true)),
            ("Gt", &["2"], "version", v("3"), Some(true)),
            ("Gt", &["2"], "version", A, Some(false)),
            ("Gt", &["2"], "version", F, Some(false)),
            (
                "Gt",
                &["5.14"],
                "version",
                v("5.15.0-91-generic"),
                Some(true),
            ),
            ("Ge", &["550.54.15"], "version", v("550.54.15"), Some(true)),
            ("Ge", &["2.0.1"], "version", v("2.0.0"), Some(false)),
            ("Ge", &["2.0.1"], "version", v("str"), None),
            ("Lt", &["2.0.1"], "version", v("2.0.1-rc1"), Some(false)), // pre-release dropped
            ("Lt", &["12.4"], "version", v("v12.3"), Some(true)),
            ("Le", &["2.0"], "version", v("2.0.0+build.5"), Some(true)),
            (
                "GtLt",
                &["1.0.1", "10.0.1"],
                "version",
                v("1.0.2"),
                Some(true),
            ),
            (
                "GtLt",
                &["1.0.1", "10.0.1"],
                "version",
                v("10.0.1"),
                Some(false),
            ),
            ("GeLe", &["1", "10"], "version", v("10"), Some(true)),
            ("GeLe", &["1", "10"], "version", v("-11"), None),
            ("GeLe", &["1", "x"], "version", v("5"), None),
            ("Gt", &["1.2.3.4"], "version", v("5"), None),
        ];
        for (op, values, ty, input, want) in cases {
            let e = expr(op, values, ty);
            let got = e.eval(*input);
            match want {
                Some(b) => assert_eq!(got, Ok(*b), "{op} {values:?} {ty} on {input:?}"),
                None => assert!(
                    got.is_err(),
                    "{op} {values:?} {ty} on {input:?}: want error, got {got:?}"
                ),
            }
        }
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            expr("Gt", &["2"], "").eval(v("abc")),
            Err("not a number \"abc\"".into())
        );
        assert_eq!(
            expr("Gt", &["x"], "").eval(v("1")),
            Err("not a number \"x\"".into())
        );
        assert_eq!(
            expr("InRegexp", &["("], "").eval(v("x")).unwrap_err(),
            "invalid regexp \"(\": missing closing ): `(`"
        );
        assert_eq!(
            expr("GtLt", &["5", "1"], "").eval(v("3")),
            Err("invalid expression, value[0] must be less than value[1] for Op \"GtLt\" (have [\"5\", \"1\"])".into())
        );
        assert_eq!(
            expr("Exists", &["1"], "").eval(A),
            Err(
                "invalid expression, 'value' field must be empty for Op \"Exists\" (have [\"1\"])"
                    .into()
            )
        );
    }

    #[test]
    fn versions() {
        let ok = |s: &str, t: (u64, u64, u64)| {
            assert_eq!(
                parse_version(s),
                Ok(Version {
                    major: t.0,
                    minor: t.1,
                    patch: t.2
                }),
                "{s}"
            )
        };
        ok("1", (1, 0, 0));
        ok("1.2", (1, 2, 0));
        ok("v1.2.3", (1, 2, 3));
        ok("01.02.03", (1, 2, 3));
        ok("6.8.0-1015-nvidia", (6, 8, 0));
        ok("1.2.3-alpha.1+meta.x", (1, 2, 3));
        for bad in [
            "",
            "v",
            "1.",
            "1..2",
            "1.2.3.4",
            "a.b",
            "1.2.3-",
            "1.2.3-01",
            "1.2.3+",
            "1.2.3-a..b",
            "-1",
            "1.2.3 ",
            "99999999999999999999",
        ] {
            assert!(parse_version(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn static_problems_table() {
        let msgs = |e: Expr| -> Vec<String> {
            e.static_problems()
                .into_iter()
                .map(|(_, s, m)| format!("{s:?}: {m}"))
                .collect()
        };
        assert_eq!(msgs(expr("In", &["a"], "")), Vec::<String>::new());
        assert_eq!(
            msgs(expr("In", &[], "")),
            vec!["Error: In needs at least one value"]
        );
        assert_eq!(
            msgs(expr("Exists", &["a"], "")),
            vec!["Error: Exists takes no values (has 1)"]
        );
        assert_eq!(
            msgs(expr("Gt", &["1", "2"], "")),
            vec!["Error: Gt needs exactly one value (has 2)"]
        );
        assert_eq!(
            msgs(expr("Gt", &["1.5"], "")),
            vec![
                "Error: Gt needs an integer, got \"1.5\" (add `type: version` to compare versions)"
            ]
        );
        assert_eq!(
            msgs(expr("GtLt", &["10", "1"], "")),
            vec!["Error: GtLt bounds are inverted: 10 is not less than 1"]
        );
        assert_eq!(
            msgs(expr("GeLe", &["2.0", "1.0"], "version")),
            vec![
                "Error: GeLe bounds are inverted: \"2.0\" is not less than \"1.0\"; nothing can match"
            ]
        );
        assert_eq!(
            msgs(expr("Lt", &["x"], "version")),
            vec!["Error: Lt needs a version, got \"x\": invalid semantic version"]
        );
        assert_eq!(
            msgs(expr("Lt", &["1"], "semver")),
            vec!["Error: unknown type \"semver\" (the only type is \"version\")"]
        );
        assert_eq!(
            msgs(expr("In", &["1"], "version")),
            vec!["Warning: type \"version\" is ignored by In"]
        );
        assert_eq!(
            msgs(expr("InRegexp", &["ok", "(x"], "")),
            vec!["Error: invalid regexp \"(x\": missing closing ): `(x`"]
        );
    }
}
