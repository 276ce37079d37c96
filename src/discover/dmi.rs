//! `system.dmiid` from `<sysfs-root>/class/dmi/id/`, as NFD's system source reads it.

use crate::features::FeatureSet;
use crate::sysfs::Sysfs;

use super::warnings::Warnings;

pub const DMIID: &str = "system.dmiid";

pub fn discover(sysfs: &Sysfs, features: &mut FeatureSet, warnings: &mut Warnings) {
    for attr in ["sys_vendor", "product_name"] {
        let path = sysfs.path("class/dmi/id").join(attr);
        match sysfs.read(&path) {
            Ok(Some(v)) if !v.is_empty() => features.insert_attribute(DMIID, attr, v),
            Ok(_) => {}
            Err(e) => warnings.push(format!("{e}; attribute left out")),
        }
    }
}
