//! `kernel.loadedmodule` from `<proc-root>/modules`, as NFD's kernel source reads it.

use crate::features::FeatureSet;
use crate::sysfs::Sysfs;

use super::warnings::Warnings;

pub const LOADED_MODULE: &str = "kernel.loadedmodule";

pub fn discover(proc: &Sysfs, features: &mut FeatureSet, warnings: &mut Warnings) {
    let path = proc.path("modules");
    match proc.read_limited(&path, 4 << 20) {
        Ok(Some(text)) => {
            // Make the feature exist even when no module is loaded, so rules see an empty set.
            features.flags.entry(LOADED_MODULE.to_string()).or_default();
            for name in text.lines().filter_map(|l| l.split_whitespace().next()) {
                features.insert_flag(LOADED_MODULE, name);
            }
        }
        // A kernel built without module support has no /proc/modules: nothing to report.
        Ok(None) => tracing::debug!("{}: does not exist", path.display()),
        Err(e) => warnings.push(format!("{e}; no kernel modules discovered")),
    }
}
