//! Where rules come from: rule files (a file, or a directory read in path order), the objects of
//! each file (a `NodeFeatureRule` document, or the rule texts of a ConfigMap's `data`) as NFD's
//! API server admits them, and what could not be loaded.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{model, template};
use crate::yaml::document::{self, Node, Pos, Val};

/// The text of one rule file. `name` is the path, or `builtin:<file>` for shipped rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSource {
    pub name: String,
    pub text: String,
}

/// A rule file (or part of one) that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleLoadError {
    pub source: String,
    /// 1-based; 0 when the problem has no position (a file that cannot be read).
    pub line: u32,
    pub column: u32,
    pub object: Option<String>,
    pub rule: Option<String>,
    pub message: String,
}

impl fmt::Display for RuleLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}:{}: ", self.source, self.line, self.column)?;
        } else {
            write!(f, "{}: ", self.source)?;
        }
        match (&self.rule, &self.object) {
            (Some(r), Some(o)) => write!(f, "rule {r:?} (NodeFeatureRule {o:?}): ")?,
            (Some(r), None) => write!(f, "rule {r:?}: ")?,
            (None, Some(o)) => write!(f, "NodeFeatureRule {o:?}: ")?,
            (None, None) => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuleLoadError {}

/// How deep `rule_files` descends below the directory it is given (a site's `team/vendor/`
/// layout is two levels); deeper files are left out.
const MAX_RULE_DIR_DEPTH: usize = 8;

/// The rule files of a directory and its subdirectories, in path order: entries named
/// `*.yaml`, `*.yml` or `*.json`, hidden ones (a ConfigMap's `..data`, `.git`) left out. Only
/// real subdirectories are entered (a symbolic link to a directory could loop); files are
/// listed whatever they are, and reading one that is not a regular file is the reader's error
/// to report. A subdirectory that cannot be read is an error, as the directory itself is.
pub fn rule_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    Ok(rule_files_and_skipped(dir)?.0)
}

/// [`rule_files`], and the subdirectories left out for being deeper than
/// `MAX_RULE_DIR_DEPTH` (the loader says each, so that no file is left out unsaid).
pub fn rule_files_and_skipped(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    collect_rule_files(dir, 0, &mut files, &mut skipped)?;
    files.sort();
    skipped.sort();
    Ok((files, skipped))
}

/// How deep rule files are looked for, for the loader's message.
pub const RULE_DIR_DEPTH: usize = MAX_RULE_DIR_DEPTH;

fn collect_rule_files(
    dir: &Path,
    depth: usize,
    out: &mut Vec<PathBuf>,
    skipped: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if depth < MAX_RULE_DIR_DEPTH {
                collect_rule_files(&path, depth + 1, out, skipped).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
                })?;
            } else {
                skipped.push(path);
            }
            continue;
        }
        if matches!(
            path.extension().and_then(|x| x.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(path);
        }
    }
    Ok(())
}

/// Parses and admits one source: every object as far as it could be read (admitted or not),
/// and all problems.
pub(super) fn read_source(src: &RuleSource) -> (Vec<model::ObjectSpec>, Vec<RuleLoadError>) {
    let mut objects = Vec::new();
    let errors = read_objects(src, &mut |o| objects.push(o));
    (objects, errors)
}

/// Parses and admits one source, handing each object (admitted or not) to `on_object` in
/// order; returns all problems.
pub(super) fn read_objects(
    src: &RuleSource,
    on_object: &mut dyn FnMut(model::ObjectSpec),
) -> Vec<RuleLoadError> {
    let mut errors = Vec::new();
    let mut lines: Option<Vec<&str>> = None;
    // Document by document: each tree is read into its objects and dropped before the next.
    document::each_document(&src.text, |doc| {
        let doc = match doc {
            Ok(doc) => doc,
            Err(e) => {
                errors.push(RuleLoadError {
                    source: src.name.clone(),
                    line: e.pos.line,
                    column: e.pos.column,
                    object: None,
                    rule: None,
                    message: format!("invalid YAML/JSON: {}", e.message),
                });
                return;
            }
        };
        if let Some(embedded) = configmap_sources(&doc, &src.text) {
            // A ConfigMap (the one deploy/ ships, or kustomize's output): its data entries
            // that hold rules, read in place.
            for text in embedded {
                let source = RuleSource {
                    name: src.name.clone(),
                    text,
                };
                errors.extend(read_objects(&source, on_object));
            }
            return;
        }
        let (mut objs, problems) = model::read_document(&doc);
        // Where each template stands in the file, so that its errors name file positions.
        let templates = objs
            .iter_mut()
            .flat_map(|o| o.rules.iter_mut())
            .flat_map(|r| {
                r.labels_template
                    .iter_mut()
                    .chain(r.vars_template.iter_mut())
            });
        for t in templates {
            let lines = lines.get_or_insert_with(|| src.text.lines().collect::<Vec<_>>());
            t.origin = template::Origin::find(lines, t.pos, &t.text);
        }
        objs.into_iter().for_each(&mut *on_object);
        errors.extend(problems.into_iter().map(|p| RuleLoadError {
            source: src.name.clone(),
            line: p.pos.line,
            column: p.pos.column,
            object: p.object,
            rule: p.rule,
            message: p.message,
        }));
    });
    errors
}

/// The rule texts in a ConfigMap's `data`: every entry whose text holds a `NodeFeatureRule` (a
/// configuration file beside them is not rules, and is left alone). `None` when `doc` is not a
/// ConfigMap. A block scalar (`site.yaml: |`) is cut out of `file` line for line, its lines where
/// they stand and every other line blank, so that positions in it are positions in the file.
fn configmap_sources(doc: &Node, file: &str) -> Option<Vec<String>> {
    let Val::Map(entries) = &doc.val else {
        return None;
    };
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| k.key_text().as_deref() == Some(key))
            .map(|(_, v)| v)
    };
    if !matches!(get("kind").map(|k| &k.val), Some(Val::Str(k)) if k == "ConfigMap") {
        return None;
    }
    let Some(Node {
        val: Val::Map(data),
        ..
    }) = get("data")
    else {
        return Some(Vec::new());
    };
    let lines: Vec<&str> = file.lines().collect();
    let mut out = Vec::new();
    for (_, value) in data {
        let Val::Str(text) = &value.val else {
            continue;
        };
        let (docs, _) = document::parse_documents(text);
        let is_rule = |d: &Node| {
            let Val::Map(e) = &d.val else { return false };
            e.iter().any(|(k, v)| {
                k.key_text().as_deref() == Some("kind")
                    && matches!(&v.val, Val::Str(s) if s.contains("NodeFeatureRule"))
            })
        };
        if !docs.iter().any(is_rule) {
            continue;
        }
        out.push(in_place(&lines, value.pos, text).unwrap_or_else(|| text.clone()));
    }
    Some(out)
}

/// The block scalar that starts at `pos` (its `|` or `>`) as a text of the file's length: its
/// lines kept, every other line blank. `None` when the value is not a block scalar there.
fn in_place(lines: &[&str], pos: Pos, text: &str) -> Option<String> {
    // The parser places a block scalar at its indicator's line or at its first line.
    let block_start = |l: &str| {
        let t = l.trim_end();
        let ind = t.rsplit(' ').next().unwrap_or(t);
        ind.starts_with(['|', '>'])
            && ind[1..]
                .bytes()
                .all(|b| matches!(b, b'-' | b'+') || b.is_ascii_digit())
    };
    let line = (pos.line as usize).checked_sub(1)?;
    let at = if block_start(lines.get(line)?) {
        line
    } else if line > 0 && block_start(lines[line - 1]) {
        line - 1
    } else {
        return None;
    };
    let first = lines[at + 1..].iter().position(|l| !l.trim().is_empty())? + at + 1;
    let indent = lines[first].len() - lines[first].trim_start().len();
    let mut end = first;
    while end < lines.len()
        && (lines[end].trim().is_empty()
            || lines[end].len() - lines[end].trim_start().len() >= indent)
    {
        end += 1;
    }
    let mut out = String::with_capacity(text.len() + lines.len());
    for (i, line) in lines.iter().enumerate() {
        if (first..end).contains(&i) {
            out.push_str(line);
        }
        out.push('\n');
    }
    Some(out)
}
