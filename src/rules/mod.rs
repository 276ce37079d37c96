//! NFD-compatible rules: `NodeFeatureRule` files in, labels (and annotations, extended
//! resources, taints) out.
//!
//! - `crate::yaml::document` (floor 0) reads the text into positioned nodes, one document at a time.
//! - `model`: the objects as NFD's API server admits them (structure, types, operator names).
//! - `source`: rule files and their objects; `ruleset`: loading, compiling and evaluating them.
//! - `expression`, `template`: operators, and Go templates (`crate::gotmpl`: the engine and Sprig).
//! - `eval`: matching and rule execution, exactly as nfd-master.
//! - `check`: the stricter static validation of `gpu-labeler rules check`.
//! - `explain`: the per-rule, per-expression report of `gpu-labeler explain`.
//!
//! Loading compiles every regular expression and parses every template once. Evaluation runs
//! the objects in `metadata.name` order and their rules in file order, feeding each rule's
//! labels and vars back as `rule.matched`, then post-processes the output like nfd-master:
//! namespaces, dynamic `@` values, validation and the namespace policy. Nothing is dropped
//! silently: a rule that fails at evaluation is returned in `errors`, a refused output in
//! `rejected`, and both are logged.

mod check;
mod eval;
mod explain;
mod expression;
mod model;
mod ruleset;
mod simple_regex;
mod source;
mod template;
mod template_fields;

pub use check::{CheckReport, LABEL_REJECTED, check};
pub use explain::{explain, explain_label_rules};
pub use ruleset::{
    Evaluation, LabelProducer, OutputKind, RejectedLabel, RuleRuntimeError, RuleSet,
};
pub use source::{RuleLoadError, RuleSource, rule_files};

pub(crate) use crate::names::closest;

#[cfg(test)]
mod tests;
