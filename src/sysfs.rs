//! A small sysfs reader with an injected root (never a hard-coded `/sys`).
//!
//! sysfs attribute files are tiny text files; anything else (binary, huge, not UTF-8, a
//! dangling link) is reported with the exact path it came from so the operator can look at it.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Larger than any real sysfs text attribute; bounds what a bad file can make us allocate.
pub const MAX_ATTRIBUTE_BYTES: u64 = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: larger than {limit} bytes, not a sysfs attribute")]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{path}: binary content, not a text attribute")]
    Binary { path: PathBuf },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

impl SysfsError {
    pub fn invalid(path: &Path, reason: impl Into<String>) -> Self {
        SysfsError::Invalid {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            SysfsError::Io { path, .. }
            | SysfsError::TooLarge { path, .. }
            | SysfsError::Binary { path }
            | SysfsError::Invalid { path, .. } => path,
        }
    }
}

/// Reads attribute files below one root directory.
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/<rel>`.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.join(rel)
    }

    /// Reads a text attribute, trimmed. `Ok(None)` when the file does not exist.
    pub fn read(&self, path: &Path) -> Result<Option<String>, SysfsError> {
        self.read_limited(path, MAX_ATTRIBUTE_BYTES)
    }

    /// As `read`, for the few text files that may be larger (`/proc/modules`).
    pub fn read_limited(&self, path: &Path, limit: u64) -> Result<Option<String>, SysfsError> {
        let io = |source| SysfsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        let mut buf = Vec::with_capacity(64);
        file.take(limit + 1).read_to_end(&mut buf).map_err(io)?;
        if buf.len() as u64 > limit {
            return Err(SysfsError::TooLarge {
                path: path.to_path_buf(),
                limit,
            });
        }
        if buf.contains(&0) {
            return Err(SysfsError::Binary {
                path: path.to_path_buf(),
            });
        }
        let text = String::from_utf8(buf).map_err(|_| SysfsError::Binary {
            path: path.to_path_buf(),
        })?;
        Ok(Some(text.trim().to_string()))
    }

    /// Reads an attribute that must parse as an unsigned decimal integer.
    pub fn read_u64(&self, path: &Path) -> Result<Option<u64>, SysfsError> {
        match self.read(path)? {
            None => Ok(None),
            Some(s) => s
                .parse::<u64>()
                .map(Some)
                .map_err(|_| SysfsError::invalid(path, format!("not a number: {:?}", short(&s)))),
        }
    }

    /// The last component of a symlink's target (`driver` -> `nvidia`). `Ok(None)` when absent.
    pub fn link_name(&self, path: &Path) -> Result<Option<String>, SysfsError> {
        match std::fs::read_link(path) {
            Ok(target) => Ok(target.file_name().map(|n| n.to_string_lossy().into_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SysfsError::Io {
                path: path.to_path_buf(),
                source: e,
            }),
        }
    }

    /// Names in a directory, sorted. `Ok(None)` when the directory does not exist.
    pub fn list(&self, path: &Path) -> Result<Option<Vec<String>>, SysfsError> {
        let rd = match std::fs::read_dir(path) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(SysfsError::Io {
                    path: path.to_path_buf(),
                    source: e,
                });
            }
        };
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|source| SysfsError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(Some(names))
    }

    /// Whether something (a file, a directory or a link, even dangling) exists at `path`.
    pub fn exists(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }
}

/// A value shortened for an error message.
pub fn short(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_trims_and_reports_paths() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sysfs::new(dir.path());
        std::fs::write(dir.path().join("vendor"), "0x10de\n").unwrap();
        std::fs::write(dir.path().join("bin"), b"\x00\x01\x02").unwrap();
        std::fs::write(dir.path().join("latin1"), b"caf\xe9").unwrap();
        std::fs::write(
            dir.path().join("huge"),
            vec![b'a'; MAX_ATTRIBUTE_BYTES as usize + 1],
        )
        .unwrap();
        std::fs::write(dir.path().join("num"), "12x\n").unwrap();
        assert_eq!(
            s.read(&s.path("vendor")).unwrap().as_deref(),
            Some("0x10de")
        );
        assert_eq!(s.read(&s.path("missing")).unwrap(), None);
        let p = |n: &str| dir.path().join(n).display().to_string();
        assert_eq!(
            s.read(&s.path("bin")).unwrap_err().to_string(),
            format!("{}: binary content, not a text attribute", p("bin"))
        );
        assert_eq!(
            s.read(&s.path("latin1")).unwrap_err().to_string(),
            format!("{}: binary content, not a text attribute", p("latin1"))
        );
        assert_eq!(
            s.read(&s.path("huge")).unwrap_err().to_string(),
            format!(
                "{}: larger than 65536 bytes, not a sysfs attribute",
                p("huge")
            )
        );
        assert_eq!(
            s.read_u64(&s.path("num")).unwrap_err().to_string(),
            format!("{}: not a number: \"12x\"", p("num"))
        );
    }
}
