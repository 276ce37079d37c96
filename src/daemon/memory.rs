//! How much memory the agent needs on a node, and the warning when its cgroup allows less.

use std::path::{Path, PathBuf};

/// Peak memory of the daemon: a base plus a share per PCI function (`cargo bench --bench
/// memory`, release build: 13.3 MiB + 1.18 KiB a function on 2026-12-06, was 11.3 MiB + 1.13
/// KiB; rounded up here).
pub const MEMORY_BASE: u64 = 14 << 20;
pub const MEMORY_PER_FUNCTION: u64 = 1_250;
/// NVML's child process, in the agent's container and under the same limit (BENCHMARKS.md,
/// soak: 7.4 MiB beside the agent's 12.7 MiB; rounded up).
pub const MEMORY_NVML_CHILD: u64 = 8 << 20;

/// What the daemon's container needs on a node with `functions` PCI functions, in bytes: the
/// agent, and NVML's child where NVML is used.
pub fn memory_need(functions: usize, nvml_child: bool) -> u64 {
    let child = if nvml_child { MEMORY_NVML_CHILD } else { 0 };
    MEMORY_BASE + child + MEMORY_PER_FUNCTION * functions as u64
}

/// The memory limit of the cgroup at `root` (cgroup v2 `memory.max`, else v1
/// `memory/memory.limit_in_bytes`) and the file it came from; `None` when there is none, it is
/// unlimited, or it cannot be read.
pub fn memory_limit(root: &Path) -> Option<(u64, PathBuf)> {
    for file in ["memory.max", "memory/memory.limit_in_bytes"] {
        let path = root.join(file);
        let Ok(text) = crate::sysfs::read_regular_text(&path, 64) else {
            continue;
        };
        // "max" (v2) or a page-rounded 2^63 (v1) is no limit.
        return text
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&b| b < 1 << 60)
            .map(|b| (b, path));
    }
    None
}

/// A warning when the node's PCI functions need more memory than the agent's limit allows.
pub fn memory_warning(functions: usize, nvml_child: bool, cgroup_root: &Path) -> Option<String> {
    let (limit, file) = memory_limit(cgroup_root)?;
    let need = memory_need(functions, nvml_child);
    let mib = |b: u64| b.div_ceil(1 << 20);
    let with = if nvml_child {
        " (NVML's child process included)"
    } else {
        ""
    };
    (need > limit).then(|| {
        format!(
            "this node has {functions} PCI functions: the agent needs about {} MiB{with}, more than its memory limit of {} MiB ({}); raise resources.limits.memory to at least {}Mi",
            mib(need),
            mib(limit),
            file.display(),
            mib(need + need / 4)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limit_reads_cgroup_v2_and_v1_and_ignores_no_limit() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(memory_limit(root), None, "no cgroup files");
        std::fs::create_dir(root.join("memory")).unwrap();
        let v1 = root.join("memory/memory.limit_in_bytes");
        std::fs::write(&v1, "9223372036854771712\n").unwrap();
        assert_eq!(memory_limit(root), None, "v1 without a limit");
        std::fs::write(&v1, "100663296\n").unwrap();
        assert_eq!(memory_limit(root), Some((96 << 20, v1)));
        let v2 = root.join("memory.max");
        std::fs::write(&v2, "max\n").unwrap();
        assert_eq!(memory_limit(root), None, "v2 first; max is no limit");
        std::fs::write(&v2, "100663296\n").unwrap();
        assert_eq!(memory_limit(root), Some((96 << 20, v2.clone())));
        // The default 96Mi covers about 68,000 functions, 62,000 with NVML's child.
        assert_eq!(memory_warning(68_000, false, root), None);
        assert_eq!(memory_warning(62_000, true, root), None);
        assert_eq!(
            memory_warning(80_000, false, root),
            Some(format!(
                "this node has 80000 PCI functions: the agent needs about 110 MiB, more than its memory limit of 96 MiB ({}); raise resources.limits.memory to at least 137Mi",
                v2.display()
            ))
        );
        assert_eq!(
            memory_warning(68_000, true, root),
            Some(format!(
                "this node has 68000 PCI functions: the agent needs about 104 MiB (NVML's child process included), more than its memory limit of 96 MiB ({}); raise resources.limits.memory to at least 129Mi",
                v2.display()
            ))
        );
    }
}
