//! The `features-file` sink: NFD's `features.d` format, for an nfd-worker that reads the
//! directory (its `local` source).
//!
//! Written atomically (a hidden temporary file in the same directory, synced, then renamed over
//! the target) so that nfd-worker never reads half a file; nfd-worker skips hidden files. Only
//! rewritten when the content changes, compared with what is on disk, so a restart does not
//! touch it. Never deleted: labels outlive the agent.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::{PublishError, Reason};
use super::outcome::{LabelDiff, Outcome, OutcomeKind};
use crate::output::{LabelMap, NodeOutput};
use crate::publish::stdout::{LabelFormat, render};

/// NFD's default features.d directory, with our file name.
pub const DEFAULT_PATH: &str = "/etc/kubernetes/node-feature-discovery/features.d/gpu-labeler";

pub struct FeaturesFileSink {
    path: PathBuf,
}

/// The `key=value` lines of a features.d file (comments and blank lines skipped).
fn parse(text: &str) -> LabelMap {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or((l, "true"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// Writes `content` to `path` through a temporary file in the same directory and a rename.
pub fn write_atomically(path: &Path, content: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "features".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename itself is durable once the directory is synced; not all filesystems allow
        // opening a directory for that, so a failure here is not an error.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

impl FeaturesFileSink {
    pub fn new(path: impl Into<PathBuf>) -> FeaturesFileSink {
        FeaturesFileSink { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn publish(&mut self, output: &NodeOutput, dry_run: bool) -> Result<Outcome, PublishError> {
        let content = render(output, LabelFormat::FeaturesFile);
        let existing = match std::fs::read_to_string(&self.path) {
            Ok(s) => Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(PublishError::new(
                    Reason::Io,
                    format!("cannot read {}: {e}", self.path.display()),
                ));
            }
        };
        if existing.as_deref() == Some(content.as_str()) {
            return Ok(Outcome::unchanged());
        }
        let diff = LabelDiff::between(
            &existing.as_deref().map(parse).unwrap_or_default(),
            &output.labels,
        );
        if dry_run {
            return Ok(Outcome::of(OutcomeKind::DryRun, diff));
        }
        write_atomically(&self.path, &content).map_err(|e| {
            PublishError::new(
                Reason::Io,
                format!("cannot write {}: {e}", self.path.display()),
            )
        })?;
        Ok(Outcome::of(OutcomeKind::Written, diff))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(pairs: &[(&str, &str)]) -> NodeOutput {
        NodeOutput {
            labels: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..NodeOutput::default()
        }
    }

    #[test]
    fn writes_once_then_only_on_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu-labeler");
        let mut sink = FeaturesFileSink::new(&path);
        let out = sink.publish(&output(&[("a", "1")]), false).unwrap();
        assert_eq!(out.kind, OutcomeKind::Written);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            render(&output(&[("a", "1")]), LabelFormat::FeaturesFile)
        );
        assert_eq!(
            sink.publish(&output(&[("a", "1")]), false).unwrap(),
            Outcome::unchanged()
        );
        let out = sink.publish(&output(&[("b", "2")]), false).unwrap();
        assert_eq!(out.diff.to_string(), "+b=2 -a");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["gpu-labeler"], "no temporary file is left");
    }

    #[test]
    fn dry_run_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut sink = FeaturesFileSink::new(&path);
        let out = sink.publish(&output(&[("a", "1")]), true).unwrap();
        assert_eq!(out.kind, OutcomeKind::DryRun);
        assert!(!path.exists());
    }

    #[test]
    fn a_missing_directory_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = FeaturesFileSink::new(dir.path().join("no/such/dir/f"));
        let e = sink.publish(&output(&[("a", "1")]), false).unwrap_err();
        assert_eq!(e.reason, Reason::Io);
        assert!(e.message.contains("no/such/dir/f"), "{e}");
    }

    #[test]
    fn parse_reads_key_value_lines() {
        assert_eq!(
            parse("# header\na=1\n\nb\n"),
            [
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "true".to_string())
            ]
            .into_iter()
            .collect()
        );
    }
}
