//! What a publish did, in every sink's words: the `Outcome` (written, unchanged, a dry run),
//! the `LabelDiff` it made, and the keys it left out: a `Conflict` (another field manager owns
//! the key) or a `Refused` key (the admission policy denied it).

use std::collections::BTreeMap;
use std::fmt;

use crate::output::LabelMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FieldKind {
    Label,
    Annotation,
    Taint,
    /// The `GPUHealthy` condition.
    Condition,
}

impl FieldKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldKind::Label => "label",
            FieldKind::Annotation => "annotation",
            FieldKind::Taint => "taint",
            FieldKind::Condition => "condition",
        }
    }
}

/// A key we want that another field manager owns with another value. Reported and left alone.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conflict {
    pub kind: FieldKind,
    pub key: String,
    pub manager: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} is owned by field manager {:?} with another value; not applied",
            self.kind.as_str(),
            self.key,
            self.manager
        )
    }
}

/// How labels change from one published state to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelDiff {
    pub added: LabelMap,
    /// key -> (old, new)
    pub changed: BTreeMap<String, (String, String)>,
    pub removed: Vec<String>,
}

impl LabelDiff {
    pub fn between(old: &LabelMap, new: &LabelMap) -> LabelDiff {
        let mut d = LabelDiff::default();
        for (k, v) in new {
            match old.get(k) {
                None => {
                    d.added.insert(k.clone(), v.clone());
                }
                Some(o) if o != v => {
                    d.changed.insert(k.clone(), (o.clone(), v.clone()));
                }
                Some(_) => {}
            }
        }
        d.removed = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect();
        d
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

impl fmt::Display for LabelDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("no label changes");
        }
        let mut parts = Vec::new();
        parts.extend(self.added.iter().map(|(k, v)| format!("+{k}={v}")));
        parts.extend(
            self.changed
                .iter()
                .map(|(k, (o, n))| format!("~{k}={o}->{n}")),
        );
        parts.extend(self.removed.iter().map(|k| format!("-{k}")));
        f.write_str(&parts.join(" "))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeKind {
    /// Nothing to write: the destination already holds what we want.
    Unchanged,
    Written,
    /// `--dry-run`: this would have been written.
    DryRun,
}

impl OutcomeKind {
    /// Every result, in the order the metrics list them.
    pub const ALL: [OutcomeKind; 3] = [
        OutcomeKind::Written,
        OutcomeKind::Unchanged,
        OutcomeKind::DryRun,
    ];

    /// The `result` label of `gpu_labeler_publishes_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Unchanged => "unchanged",
            OutcomeKind::Written => "written",
            OutcomeKind::DryRun => "dry_run",
        }
    }
}

/// What one successful publish did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub kind: OutcomeKind,
    pub diff: LabelDiff,
    /// Conflicts found by this publish (each reported once, when found).
    pub conflicts: Vec<Conflict>,
    /// Keys left out because the admission policy refused the apply that carried them, with
    /// the policy's message (reported once per change, when found).
    pub refused: Vec<Refused>,
    /// What is wrong on the Node besides (a tracking annotation not to be trusted), each said
    /// once per change.
    pub warnings: Vec<String>,
}

impl Outcome {
    pub fn unchanged() -> Outcome {
        Outcome::of(OutcomeKind::Unchanged, LabelDiff::default())
    }

    /// A publish of a sink that has no conflicts, refusals or warnings to tell (all but the
    /// node sink).
    pub fn of(kind: OutcomeKind, diff: LabelDiff) -> Outcome {
        Outcome {
            kind,
            diff,
            conflicts: Vec::new(),
            refused: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// A key the admission policy refused: the apply that carried it was denied, and the one
/// without it (and the other keys outside what the shipped policy admits) went through.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Refused {
    pub kind: FieldKind,
    pub key: String,
    /// The policy's denial.
    pub message: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if matches!(self.kind, FieldKind::Taint | FieldKind::Condition) {
            return write!(
                f,
                "{} {} left out: {}",
                self.kind.as_str(),
                self.key,
                self.message
            );
        }
        write!(
            f,
            "{} {} left out: the API server's admission policy refused the apply that carried it ({}); the other keys are published",
            self.kind.as_str(),
            self.key,
            self.message
        )
    }
}
