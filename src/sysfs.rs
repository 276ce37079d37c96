//! A small sysfs reader with an injected root (never a hard-coded `/sys`), and the one way every
//! other input file is read (`read_regular_file`).
//!
//! sysfs attribute files are tiny text files; anything else (binary, huge, not UTF-8, a
//! dangling link) is reported with the exact path it came from so the operator can look at it.
//! No read can block: every file is opened with `O_NONBLOCK`, so a FIFO or a device node put
//! where an attribute or a rule file should be cannot stall a scan.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Larger than any real sysfs text attribute; bounds what a bad file can make us allocate.
pub const MAX_ATTRIBUTE_BYTES: u64 = 64 * 1024;

/// Opens a file for reading with `O_NONBLOCK`: opening a FIFO does not wait for a writer.
pub fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
}

/// Reads an input file (rules, config, a snapshot, the sharing config, pci.ids) whole, without
/// ever blocking: only a regular file is read (a FIFO, a device, a socket or a directory is an
/// error saying what it is), and at most `limit` bytes of it.
pub fn read_regular_file(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileTypeExt;
    let file = open_nonblocking(path)?;
    let meta = file.metadata()?;
    let t = meta.file_type();
    if !t.is_file() {
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "not a file"
        };
        return Err(std::io::Error::other(format!(
            "not a regular file ({what})"
        )));
    }
    if meta.len() > limit {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            limit >> 20
        )));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            limit >> 20
        )));
    }
    Ok(buf)
}

/// Standard input as text, at most `limit` bytes, read once per process: a second caller (the
/// daemon's next cycle) gets the same text. For the `-` path of `--features` and `match`.
pub fn stdin_text(limit: u64) -> std::io::Result<String> {
    static STDIN: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    STDIN
        .get_or_init(|| {
            let mut text = String::new();
            std::io::Read::read_to_string(
                &mut std::io::Read::take(std::io::stdin(), limit),
                &mut text,
            )
            .map(|_| text)
            .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(std::io::Error::other)
}

/// As `read_regular_file`, as UTF-8 text.
pub fn read_regular_text(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_regular_file(path, limit)?).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        )
    })
}

/// The most any input file may be: far more than any real rule file, config or snapshot.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

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
        let file = match open_nonblocking(path) {
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
        text(buf, path)
    }

    /// Reads an attribute that must parse as an unsigned decimal integer.
    pub fn read_u64(&self, path: &Path) -> Result<Option<u64>, SysfsError> {
        match self.read(path)? {
            None => Ok(None),
            Some(s) => parse_u64(&s)
                .map(Some)
                .map_err(|reason| SysfsError::invalid(path, reason)),
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

    /// A symlink's target as written (`../../../devices/pci0000:15/...`). `Ok(None)` when absent.
    pub fn link_target(&self, path: &Path) -> Result<Option<PathBuf>, SysfsError> {
        match std::fs::read_link(path) {
            Ok(target) => Ok(Some(target)),
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

/// An open directory whose entries are read relative to it (`openat`), so that a device's dozen
/// attributes cost one path walk instead of one each, and absent files cost no syscall at all.
pub struct DirHandle {
    fd: rustix::fd::OwnedFd,
    path: PathBuf,
    /// The names the caller asked about, and which of them exist (bit i = `wanted[i]`).
    wanted: &'static [&'static str],
    present: u64,
}

impl Sysfs {
    /// Opens a directory (following a symlink such as `bus/pci/devices/<addr>`) and notes which
    /// of the `wanted` names (at most 64) it has, so that absent attributes cost nothing later.
    pub fn open_dir(
        &self,
        path: &Path,
        wanted: &'static [&'static str],
    ) -> Result<DirHandle, SysfsError> {
        open_dir_at(rustix::fs::CWD, path, path, wanted)
    }
}

/// Opens `name` relative to `parent` (a directory descriptor, or `CWD`); `path` is what error
/// messages show. Opening each device relative to `bus/pci/devices` spares the kernel walking
/// the sysfs root again for every device.
pub fn open_dir_at(
    parent: impl rustix::fd::AsFd,
    name: &Path,
    path: &Path,
    wanted: &'static [&'static str],
) -> Result<DirHandle, SysfsError> {
    {
        debug_assert!(wanted.len() <= 64);
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::openat(
            parent,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            let reason = match e {
                rustix::io::Errno::NOENT => match std::fs::read_link(path) {
                    Ok(target) => format!("dangling symlink to {}", target.display()),
                    Err(_) => "does not exist".to_string(),
                },
                rustix::io::Errno::LOOP => "symlink loop".to_string(),
                rustix::io::Errno::NOTDIR => "not a directory".to_string(),
                e => std::io::Error::from(e).to_string(),
            };
            SysfsError::invalid(path, reason)
        })?;
        let io = |e: rustix::io::Errno| SysfsError::Io {
            path: path.to_path_buf(),
            source: e.into(),
        };
        // getdents straight into a stack buffer: no second descriptor as `Dir` would open, and
        // no allocation per entry.
        let mut present = 0u64;
        if !wanted.is_empty() {
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
            let mut dir = rustix::fs::RawDir::new(&fd, &mut buf);
            while let Some(entry) = dir.next() {
                let entry = entry.map_err(io)?;
                let name = entry.file_name().to_bytes();
                if let Some(i) = wanted.iter().position(|w| w.as_bytes() == name) {
                    present |= 1 << i;
                }
            }
        }
        Ok(DirHandle {
            fd,
            path: path.to_path_buf(),
            wanted,
            present,
        })
    }
}

impl DirHandle {
    /// All entry names (without `.` and `..`), unsorted. Reads the directory once; for a
    /// handle opened with no `wanted` names.
    pub fn names(&self) -> Result<Vec<String>, SysfsError> {
        let io = |e: rustix::io::Errno| SysfsError::Io {
            path: self.path.clone(),
            source: e.into(),
        };
        let mut names = Vec::new();
        let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut dir = rustix::fs::RawDir::new(&self.fd, &mut buf);
        while let Some(entry) = dir.next() {
            let entry = entry.map_err(io)?;
            let name = entry.file_name().to_string_lossy();
            if name != "." && name != ".." {
                names.push(name.into_owned());
            }
        }
        Ok(names)
    }

    /// The open directory, for `open_dir_at`.
    pub fn fd(&self) -> rustix::fd::BorrowedFd<'_> {
        use rustix::fd::AsFd;
        self.fd.as_fd()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the directory has an entry of this name (its first path component, which must be
    /// one of the names given to `open_dir`).
    pub fn has(&self, name: &str) -> bool {
        let first = name.split('/').next().unwrap_or(name);
        match self.wanted.iter().position(|w| *w == first) {
            Some(i) => self.present & (1 << i) != 0,
            None => {
                debug_assert!(false, "{first} was not asked for in open_dir");
                false
            }
        }
    }

    /// Reads a text attribute below this directory, trimmed; `Ok(None)` when absent.
    pub fn read(&self, name: &str) -> Result<Option<String>, SysfsError> {
        use rustix::fs::{Mode, OFlags};
        if !self.has(name) {
            return Ok(None);
        }
        let path = || self.path.join(name);
        let fd = match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => {
                return Err(SysfsError::Io {
                    path: path(),
                    source: e.into(),
                });
            }
        };
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match rustix::io::read(&fd, &mut chunk) {
                Ok(0) => break,
                // A short read is the end: sysfs hands out an attribute in one read, and a
                // regular file only reads short at its end. Saves a syscall per attribute.
                Ok(n) if n < chunk.len() && buf.is_empty() => {
                    buf.extend_from_slice(&chunk[..n]);
                    break;
                }
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.len() as u64 > MAX_ATTRIBUTE_BYTES {
                        return Err(SysfsError::TooLarge {
                            path: path(),
                            limit: MAX_ATTRIBUTE_BYTES,
                        });
                    }
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    return Err(SysfsError::Io {
                        path: path(),
                        source: e.into(),
                    });
                }
            }
        }
        text(buf, &path())
    }

    /// Reads an attribute that must be an unsigned decimal integer.
    pub fn read_u64(&self, name: &str) -> Result<Option<u64>, SysfsError> {
        match self.read(name)? {
            None => Ok(None),
            Some(s) => parse_u64(&s)
                .map(Some)
                .map_err(|reason| SysfsError::invalid(&self.path.join(name), reason)),
        }
    }

    /// The last component of a symlink's target (`driver` -> `nvidia`); `Ok(None)` when absent.
    pub fn link_name(&self, name: &str) -> Result<Option<String>, SysfsError> {
        if !self.has(name) {
            return Ok(None);
        }
        match rustix::fs::readlinkat(&self.fd, name, Vec::new()) {
            Ok(target) => Ok(Path::new(std::ffi::OsStr::from_bytes(target.as_bytes()))
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(rustix::io::Errno::INVAL) => {
                Err(SysfsError::invalid(&self.path.join(name), "not a symlink"))
            }
            Err(e) => Err(SysfsError::Io {
                path: self.path.join(name),
                source: e.into(),
            }),
        }
    }
}

/// An unsigned decimal attribute; the error is the reason, for a message that names the file.
pub(crate) fn parse_u64(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| format!("not a number: {:?}", short(s)))
}

/// Attribute bytes to trimmed text; binary or non-UTF-8 content is an error naming the path.
pub(crate) fn text(buf: Vec<u8>, path: &Path) -> Result<Option<String>, SysfsError> {
    if buf.contains(&0) {
        return Err(SysfsError::Binary {
            path: path.to_path_buf(),
        });
    }
    let mut text = String::from_utf8(buf).map_err(|_| SysfsError::Binary {
        path: path.to_path_buf(),
    })?;
    // Attributes end in a newline: trim in place rather than copying.
    let end = text.trim_end().len();
    text.truncate(end);
    let start = text.len() - text.trim_start().len();
    if start > 0 {
        text.drain(..start);
    }
    Ok(Some(text))
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
