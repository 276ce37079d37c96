//! NFD's built-in PCI labels, byte for byte: `pci-<fields>.present` and `pci-<fields>.sriov.capable`.

use crate::config::PciConfig;
use crate::discover::PCI_DEVICE;
use crate::discover::pci::MANDATORY;
use crate::features::FeatureSet;

use crate::output::{FEATURE_PREFIX, LabelMap};

/// The labels NFD's PCI source gives for these features and this configuration.
/// Returns the labels and, when `deviceLabelFields` had names NFD ignores, a note saying so.
pub fn builtin_labels(features: &FeatureSet, config: &PciConfig) -> (LabelMap, Vec<String>) {
    let mut notes = Vec::new();
    // NFD keeps the valid fields in its own (mandatory attribute) order, ignores the others,
    // and falls back to class+vendor when none is valid.
    let mut fields: Vec<&str> = MANDATORY
        .iter()
        .copied()
        .filter(|m| config.device_label_fields.iter().any(|f| f == m))
        .collect();
    let invalid: Vec<&str> = config
        .device_label_fields
        .iter()
        .map(String::as_str)
        .filter(|f| !MANDATORY.contains(f))
        .collect();
    if !invalid.is_empty() {
        notes.push(format!(
            "ignoring invalid fields in sources.pci.deviceLabelFields: {}",
            invalid.join(", ")
        ));
    }
    if fields.is_empty() {
        fields = vec!["class", "vendor"];
    }
    let whitelist: Vec<String> = config
        .device_class_whitelist
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect();

    let mut labels = LabelMap::new();
    for dev in features.instances(PCI_DEVICE) {
        let class = dev.get("class").unwrap_or_default();
        if !whitelist.iter().any(|w| class.starts_with(w.as_str())) {
            continue;
        }
        let name = fields
            .iter()
            .map(|f| dev.get(f).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("_");
        labels.insert(format!("{FEATURE_PREFIX}pci-{name}.present"), "true".into());
        if dev.get("sriov_totalvfs").is_some() {
            labels.insert(
                format!("{FEATURE_PREFIX}pci-{name}.sriov.capable"),
                "true".into(),
            );
        }
    }
    (labels, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Instance;

    fn dev(pairs: &[(&str, &str)]) -> Instance {
        pairs.iter().copied().collect()
    }

    fn features() -> FeatureSet {
        let mut f = FeatureSet::default();
        let common = [
            ("device", "2330"),
            ("subsystem_vendor", "10de"),
            ("subsystem_device", "16c1"),
        ];
        let mut gpu = dev(&[("class", "0302"), ("vendor", "10de")]);
        gpu.attributes
            .extend(common.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        gpu.attributes.insert("sriov_totalvfs".into(), "32".into());
        f.push_instance(PCI_DEVICE, gpu);
        f.push_instance(
            PCI_DEVICE,
            dev(&[("class", "0200"), ("vendor", "15b3"), ("device", "1021")]),
        );
        f.push_instance(
            PCI_DEVICE,
            dev(&[("class", "0c80"), ("vendor", "8086"), ("device", "a1a4")]),
        );
        f
    }

    fn labels(whitelist: &[&str], fields: &[&str]) -> LabelMap {
        let cfg = PciConfig {
            device_class_whitelist: whitelist.iter().map(|s| s.to_string()).collect(),
            device_label_fields: fields.iter().map(|s| s.to_string()).collect(),
        };
        builtin_labels(&features(), &cfg).0
    }

    fn map(pairs: &[&str]) -> LabelMap {
        pairs
            .iter()
            .map(|k| (format!("{FEATURE_PREFIX}{k}"), "true".to_string()))
            .collect()
    }

    #[test]
    fn defaults_label_whitelisted_classes_only() {
        assert_eq!(
            builtin_labels(&features(), &PciConfig::default()).0,
            map(&["pci-0302_10de.present", "pci-0302_10de.sriov.capable"])
        );
    }

    #[test]
    fn fields_follow_nfd_order_and_fallbacks() {
        assert_eq!(
            labels(&["03"], &["vendor", "device", "class"]),
            map(&[
                "pci-0302_10de_2330.present",
                "pci-0302_10de_2330.sriov.capable"
            ])
        );
        assert_eq!(labels(&["0C"], &[]), map(&["pci-0c80_8086.present"]));
        assert_eq!(
            labels(&["0c"], &["foo", "bar"]),
            map(&["pci-0c80_8086.present"])
        );
        assert_eq!(
            labels(&["0c"], &["foo", "class"]),
            map(&["pci-0c80.present"])
        );
        assert_eq!(
            labels(&["02", "0c"], &["vendor"]),
            map(&["pci-15b3.present", "pci-8086.present"])
        );
    }
}
