//! How much memory the agent needs on a node, and the warning when its cgroup allows less.

use std::path::{Path, PathBuf};

/// Peak memory of the daemon: a base plus a share per PCI function (`cargo bench --bench
/// memory`, release build: 13.3 MiB + 1.18 KiB a function on 2026-12-06, was 11.3 MiB + 1.13
/// KiB; rounded up here).
pub const MEMORY_BASE: u64 = 14 << 20;
pub const MEMORY_PER_FUNCTION: u64 = 1_250;

/// What the daemon needs on a node with `functions` PCI functions, in bytes.
pub fn memory_need(functions: usize) -> u64 {
    MEMORY_BASE + MEMORY_PER_FUNCTION * functions as u64
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
pub fn memory_warning(functions: usize, cgroup_root: &Path) -> Option<String> {
    let (limit, file) = memory_limit(cgroup_root)?;
    let need = memory_need(functions);
    let mib = |b: u64| b.div_ceil(1 << 20);
    (need > limit).then(|| {
        format!(
            "this node has {functions} PCI functions: the agent needs about {} MiB, more than its memory limit of {} MiB ({}); raise resources.limits.memory to at least {}Mi",
            mib(need),
            mib(limit),
            file.display(),
            mib(need + need / 4)
        )
    })
}
