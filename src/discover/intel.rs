//! Intel GPUs from DRM sysfs (i915 and xe): local memory and tiles.
//!
//! i915 exposes `drm/card*/lmem_total_bytes` and one `drm/card*/gt/gt<N>` per tile; xe exposes
//! `tile<N>/` directories under the PCI device, with `physical_vram_size_bytes` on discrete parts.
//! An integrated GPU has no local memory: its memory is unknown (left out), never 0.
//! Tiles: xe's `tile<N>` directories; for i915 the `gt<N>` directories count only on discrete
//! parts (with local memory), because integrated Meteor Lake has a second, media-only GT.

use std::collections::BTreeMap;

use crate::sysfs::Sysfs;

use super::pci::PciDevice;
use super::warnings::Warnings;

pub fn attributes(
    sysfs: &Sysfs,
    dev: &PciDevice,
    warnings: &mut Warnings,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut memory: Option<u64> = None;
    let mut tiles = 0usize;

    let drm = dev.path.join("drm");
    for card in sysfs
        .list(&drm)
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with("card"))
    {
        let card = drm.join(card);
        match sysfs.read_u64(&card.join("lmem_total_bytes")) {
            Ok(Some(b)) if b > 0 => memory = Some(b),
            Ok(_) => {}
            Err(e) => warnings.push(format!("{e}; attribute left out")),
        }
        let gts = sysfs
            .list(&card.join("gt"))
            .ok()
            .flatten()
            .unwrap_or_default();
        tiles = tiles.max(gts.iter().filter(|n| is_numbered(n, "gt")).count());
    }

    let xe_tiles: Vec<String> = sysfs
        .list(&dev.path)
        .ok()
        .flatten()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| is_numbered(n, "tile"))
        .collect();
    if !xe_tiles.is_empty() {
        tiles = tiles.max(xe_tiles.len());
        let mut total = 0u64;
        for t in &xe_tiles {
            match sysfs.read_u64(&dev.path.join(t).join("physical_vram_size_bytes")) {
                Ok(Some(b)) => total += b,
                Ok(None) => {}
                Err(e) => warnings.push(format!("{e}; attribute left out")),
            }
        }
        if total > 0 && memory.is_none() {
            memory = Some(total);
        }
    }

    if let Some(b) = memory {
        out.insert("memory_mib".into(), (b >> 20).to_string());
    } else if xe_tiles.is_empty() && tiles > 0 {
        tiles = 1; // integrated i915: one tile, whatever the number of GTs
    }
    if tiles > 0 {
        out.insert("tiles".into(), tiles.to_string());
    }
    out
}

fn is_numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
