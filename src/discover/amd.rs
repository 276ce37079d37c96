//! AMD GPUs from sysfs: the amdgpu device attributes and the KFD topology.
//!
//! A KFD node belongs to a PCI function when their domain, bus and slot agree (`location_id` is
//! `bus << 8 | devfn`); a partitioned GPU (CPX: one KFD node per partition, the partition index
//! in `location_id`'s low bits, where the function number sits) is still one GPU, whose SIMDs,
//! CUs and memory are the sums of its nodes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::sysfs::{Sysfs, SysfsError, short};

use super::pci::PciDevice;
use super::warnings::Warnings;

/// What the KFD says about one topology node with SIMDs (a GPU or a GPU partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KfdNode {
    pub path: PathBuf,
    pub domain: u32,
    pub bus: u8,
    pub slot: u8,
    pub simd_count: u64,
    pub cu_count: Option<u64>,
    pub gfx_target_version: Option<u64>,
    pub memory_bytes: Option<u64>,
    /// Its XGMI links to other GPUs (`io_links/*/properties` of `type 11`, CRAT's XGMI);
    /// `None` when the node lists no `io_links` (not known, rather than none).
    pub xgmi_links: Option<u64>,
    /// The XGMI hive it belongs to (`hive_id`; 0: none).
    pub hive_id: Option<u64>,
}

/// CRAT's io link type of XGMI (the kernel's `CRAT_IOLINK_TYPE_XGMI`).
const IOLINK_TYPE_XGMI: u64 = 11;

/// Reads every GPU node of `<sysfs>/class/kfd/kfd/topology/nodes`.
pub fn kfd_nodes(sysfs: &Sysfs, warnings: &mut Warnings) -> Vec<KfdNode> {
    let dir = sysfs.path("class/kfd/kfd/topology/nodes");
    let names = match sysfs.list(&dir) {
        Ok(Some(n)) => n,
        Ok(None) => return Vec::new(),
        Err(e) => {
            warnings.push(format!("{e}; KFD topology not read"));
            return Vec::new();
        }
    };
    let mut nodes = Vec::new();
    for name in names {
        match read_node(sysfs, &dir.join(&name)) {
            Ok(Some(n)) => nodes.push(n),
            Ok(None) => {}
            Err(e) => warnings.push(format!("{e}; KFD node skipped")),
        }
    }
    nodes
}

fn read_node(sysfs: &Sysfs, path: &Path) -> Result<Option<KfdNode>, SysfsError> {
    let props_path = path.join("properties");
    let Some(text) = sysfs.read(&props_path)? else {
        return Ok(None);
    };
    let Some(props) =
        parse_properties(&text).map_err(|reason| SysfsError::invalid(&props_path, reason))?
    else {
        return Ok(None); // a CPU node
    };
    // Memory: the node's banks, else its local_mem_size (0 means "not reported").
    let mut memory: Option<u64> = None;
    if let Ok(Some(banks)) = sysfs.list(&path.join("mem_banks")) {
        for b in banks {
            let p = path.join("mem_banks").join(b).join("properties");
            if let Some(t) = sysfs.read(&p)? {
                let size = parse_mem_bank(&t).map_err(|reason| SysfsError::invalid(&p, reason))?;
                if let Some(size) = size {
                    let sum = memory.unwrap_or(0).checked_add(size).ok_or_else(|| {
                        SysfsError::invalid(&p, "the memory banks' sizes add up to more than 2^64")
                    })?;
                    memory = Some(sum);
                }
            }
        }
    }
    let mut node = props.into_node(path, memory);
    // The node's links: an unreadable one is not an XGMI link (the count is a lower bound).
    if let Ok(Some(links)) = sysfs.list(&path.join("io_links")) {
        node.xgmi_links = Some(0);
        for l in links {
            let p = path.join("io_links").join(l).join("properties");
            let Ok(Some(t)) = sysfs.read(&p) else {
                continue;
            };
            let ty = t.lines().find_map(|line| {
                let mut it = line.split_whitespace();
                (it.next() == Some("type")).then(|| it.next()?.parse::<u64>().ok())?
            });
            if ty == Some(IOLINK_TYPE_XGMI) {
                node.xgmi_links = node.xgmi_links.map(|n| n + 1);
            }
        }
    }
    Ok(Some(node))
}

/// The numbers of a KFD topology node's `properties` file that discovery uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KfdProperties {
    pub domain: u32,
    pub bus: u8,
    pub slot: u8,
    pub simd_count: u64,
    pub cu_count: Option<u64>,
    pub gfx_target_version: Option<u64>,
    /// `local_mem_size`, when not 0 ("not reported").
    pub local_mem_size: Option<u64>,
    pub hive_id: Option<u64>,
}

/// Parses a KFD node's `properties` (`<name> <value>` lines; other lines are ignored).
/// `Ok(None)` for a node without SIMDs (a CPU); the error is the reason, for a message that
/// names the file.
impl KfdProperties {
    /// The node at `path`, its memory the sum of its banks when they report any, else
    /// `local_mem_size`.
    pub fn into_node(self, path: &Path, banks: Option<u64>) -> KfdNode {
        KfdNode {
            path: path.to_path_buf(),
            domain: self.domain,
            bus: self.bus,
            slot: self.slot,
            simd_count: self.simd_count,
            cu_count: self.cu_count,
            gfx_target_version: self.gfx_target_version,
            memory_bytes: banks.or(self.local_mem_size),
            xgmi_links: None,
            hive_id: self.hive_id,
        }
    }
}

pub fn parse_properties(text: &str) -> Result<Option<KfdProperties>, String> {
    let mut props = BTreeMap::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if let (Some(k), Some(v), None) = (it.next(), it.next(), it.next()) {
            props.insert(k, v);
        }
    }
    let num = |k: &str| -> Result<Option<u64>, String> {
        props
            .get(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("{k} is not a number: {:?}", short(v)))
            })
            .transpose()
    };
    let simd_count = num("simd_count")?.unwrap_or(0);
    if simd_count == 0 {
        return Ok(None);
    }
    let location = num("location_id")?.ok_or("no location_id")?;
    let cu_count = match num("simd_per_cu")? {
        Some(per) if per > 0 => Some(simd_count / per),
        _ => None,
    };
    let domain = match num("domain")? {
        None => 0,
        Some(d) => u32::try_from(d).map_err(|_| format!("domain is out of range: {d}"))?,
    };
    Ok(Some(KfdProperties {
        domain,
        bus: ((location >> 8) & 0xff) as u8,
        slot: ((location >> 3) & 0x1f) as u8,
        simd_count,
        cu_count,
        gfx_target_version: num("gfx_target_version")?,
        local_mem_size: num("local_mem_size")?.filter(|&m| m > 0),
        hive_id: num("hive_id")?,
    }))
}

/// The size of a memory bank from its `properties` (`size_in_bytes <n>`); `Ok(None)` when the
/// file has none. The error is the reason, for a message that names the file.
pub fn parse_mem_bank(text: &str) -> Result<Option<u64>, String> {
    let mut memory: Option<u64> = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("size_in_bytes ") {
            let v = v
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("size_in_bytes is not a number: {:?}", short(v)))?;
            memory = Some(
                memory
                    .unwrap_or(0)
                    .checked_add(v)
                    .ok_or("size_in_bytes adds up to more than 2^64")?,
            );
        }
    }
    Ok(memory)
}

/// What the KFD nodes of one GPU (one per partition) add up to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KfdTotals {
    pub simd_count: u64,
    /// When every node has it.
    pub cu_count: Option<u64>,
    /// When every node has it.
    pub memory_bytes: Option<u64>,
    /// The first node's.
    pub gfx_target_version: Option<u64>,
}

/// The sums over a GPU's KFD nodes; `None` when it has none, or when a sum does not fit in 64
/// bits (values no GPU has: the KFD numbers are not believed).
pub fn totals(mine: &[&KfdNode]) -> Option<KfdTotals> {
    let first = mine.first()?;
    let mut t = KfdTotals {
        simd_count: 0,
        cu_count: Some(0),
        memory_bytes: Some(0),
        gfx_target_version: first.gfx_target_version,
    };
    for n in mine {
        t.simd_count = t.simd_count.checked_add(n.simd_count)?;
        t.cu_count = match (t.cu_count, n.cu_count) {
            (Some(a), Some(b)) => Some(a.checked_add(b)?),
            _ => None,
        };
        t.memory_bytes = match (t.memory_bytes, n.memory_bytes) {
            (Some(a), Some(b)) => Some(a.checked_add(b)?),
            _ => None,
        };
    }
    Some(t)
}

/// `90010` -> `gfx90a`, `90402` -> `gfx942`, `110000` -> `gfx1100`: major·10000 + minor·100 +
/// stepping, the stepping written in hex.
pub fn gfx_target(version: u64) -> String {
    let major = version / 10000;
    let minor = (version / 100) % 100;
    let stepping = version % 100;
    format!("gfx{major}{minor}{stepping:x}")
}

/// Attributes of one AMD GPU from sysfs.
pub fn attributes(
    sysfs: &Sysfs,
    dev: &PciDevice,
    kfd: &[KfdNode],
    warnings: &mut Warnings,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let a = dev.sort_key;
    let mine: Vec<&KfdNode> = kfd
        .iter()
        .filter(|n| (n.domain, n.bus, n.slot) == (a.domain, a.bus, a.device))
        .collect();
    let mut warn = |e: SysfsError| warnings.push(format!("{e}; attribute left out"));

    match sysfs.read(&dev.path.join("product_name")) {
        Ok(Some(p)) if !p.is_empty() => {
            out.insert("product".into(), p);
        }
        Ok(_) => {}
        Err(e) => warn(e),
    }
    let vram = match sysfs.read_u64(&dev.path.join("mem_info_vram_total")) {
        Ok(v) => v.filter(|&v| v > 0),
        Err(e) => {
            warn(e);
            None
        }
    };
    // A GPU's XGMI links: its partitions (CPX) each list the GPU's links, so the most of any.
    if let Some(links) = mine.iter().filter_map(|n| n.xgmi_links).max() {
        out.insert("xgmi_links".into(), links.to_string());
    }
    let totals = totals(&mine);
    if !mine.is_empty() && totals.is_none() {
        warn(SysfsError::invalid(
            &dev.path,
            "the KFD topology's SIMD, CU or memory counts of this GPU add up to more than 2^64",
        ));
    }
    let kfd_memory = totals.as_ref().and_then(|t| t.memory_bytes);
    if let Some(bytes) = vram.or(kfd_memory) {
        out.insert("memory_mib".into(), (bytes >> 20).to_string());
    }
    if let Some(t) = &totals {
        out.insert("simd_count".into(), t.simd_count.to_string());
        if let Some(cu) = t.cu_count {
            out.insert("cu_count".into(), cu.to_string());
        }
        if let Some(v) = t.gfx_target_version {
            out.insert("gfx_target".into(), gfx_target(v));
        }
    }
    for (key, file) in [
        ("compute_partition", "current_compute_partition"),
        ("memory_partition", "current_memory_partition"),
    ] {
        match sysfs.read(&dev.path.join(file)) {
            Ok(Some(v)) if !v.is_empty() => {
                out.insert(key.into(), v);
            }
            Ok(_) => {}
            Err(e) => warn(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_targets() {
        assert_eq!(gfx_target(90010), "gfx90a");
        assert_eq!(gfx_target(90402), "gfx942");
        assert_eq!(gfx_target(90000), "gfx900");
        assert_eq!(gfx_target(110000), "gfx1100");
        assert_eq!(gfx_target(100300), "gfx1030");
    }
}
