//! `gpu-labeler explain --label KEY`: why one label is on this node, or why not, from every
//! part that makes labels: NFD's built-in PCI labels, the compatibility profile, and the rules
//! (each rule that names the key, explained expression by expression). Labels refused by
//! validation or the namespace policy say so, with the reason.

use std::fmt::Write;

use super::{Evaluated, builtin_producer, evaluate_node, gfd, pci};
use crate::config::{Config, Profile};
use crate::features::FeatureSet;
use crate::rules::{RuleSet, closest, explain_label_rules};
use crate::validate::{FEATURE_NS, add_namespace};

/// The report for `key` (a bare name gets `feature.node.kubernetes.io/`, as in rules).
pub fn explain_label(key: &str, features: &FeatureSet, config: &Config, rules: &RuleSet) -> String {
    let key = add_namespace(key, FEATURE_NS);
    let evaluated = evaluate_node(features, config, rules);
    let mut out = String::new();
    match evaluated.output.labels.get(&key) {
        Some(v) => {
            let _ = writeln!(out, "label {key}={v}: present");
        }
        None => {
            let _ = writeln!(out, "label {key}: absent");
        }
    }
    let mut producers = 0;
    match builtin_producer(&key) {
        Some(_) if key.starts_with("nvidia.com/") => {
            producers += 1;
            profile(&mut out, &key, features, config);
        }
        Some(_) => {
            producers += 1;
            pci_labels(&mut out, &key, features, config);
        }
        None => {}
    }
    let refused: Vec<&String> = evaluated
        .rejected
        .iter()
        .filter(|r| r.contains(&format!("\"{}=", key.escape_debug())))
        .collect();
    for r in &refused {
        let _ = writeln!(out, "  refused: {r}");
    }
    let (sections, templates) = explain_label_rules(rules, features, &config.labels, &key);
    if !sections.is_empty() {
        producers += 1;
        let _ = writeln!(out, "  the rules that name it:\n");
        out.push_str(&sections);
    }
    if key.starts_with(&format!("{FEATURE_NS}/gpu.dra.")) {
        dra_mismatches(&mut out, features);
    }
    if producers == 0 && refused.is_empty() {
        let known = known_keys(&evaluated, rules);
        let hint = closest(&key, known.iter().map(String::as_str))
            .map(|c| format!(" (did you mean {c:?}?)"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  nothing writes it: no rule names it, and it is not a key of NFD's built-in PCI \
             labels or of a profile{hint}"
        );
    }
    if producers == 0 && !evaluated.output.labels.contains_key(&key) && !templates.is_empty() {
        let _ = writeln!(
            out,
            "  rules with a labelsTemplate that did not match (their keys are known only when \
             they match; `explain --rule NAME` shows why): {}",
            templates.join(", ")
        );
    }
    out
}

/// What the DRA driver's slices get wrong on this node (`dra.mismatch`), one line each, and
/// which devices covered which GPU.
fn dra_mismatches(out: &mut String, features: &FeatureSet) {
    let mismatches = features.instances(crate::dra::DRA_MISMATCH);
    if !features.attributes.contains_key(crate::dra::DRA_NODE) {
        let _ = writeln!(
            out,
            "\n  no DRA facts: no --dra file, or the cluster serves no resource.k8s.io (docs/dra.md)"
        );
        return;
    }
    if mismatches.is_empty() {
        let _ = writeln!(out, "\n  the slices agree with the machine: no mismatch");
        return;
    }
    let _ = writeln!(
        out,
        "\n  where the slices disagree with the machine (dra.mismatch):"
    );
    for m in mismatches {
        let mut line = format!(
            "    {} {}",
            m.get("reason").unwrap_or(""),
            m.get("pciBusID")
                .filter(|b| !b.is_empty())
                .unwrap_or("(node)")
        );
        let (p, v) = (m.get("published"), m.get("measured"));
        match m.get("reason") {
            Some("unpublished") => {
                let _ = write!(
                    line,
                    ": no slice device covers this GPU ({})",
                    v.unwrap_or("")
                );
            }
            Some("unknown-device") => {
                let _ = write!(
                    line,
                    ": the slices' device {}, with no such GPU on the machine",
                    p.unwrap_or("")
                );
            }
            _ => {
                let _ = write!(
                    line,
                    " {}: the slices say {}, the machine {}",
                    m.get("attribute").unwrap_or(""),
                    p.unwrap_or(""),
                    v.unwrap_or("")
                );
            }
        }
        let _ = writeln!(out, "{line}");
    }
}

/// Every key this node has or a rule names: where a typo's closest match is looked for.
fn known_keys(evaluated: &Evaluated, rules: &RuleSet) -> Vec<String> {
    let mut keys: Vec<String> = evaluated.output.labels.keys().cloned().collect();
    keys.extend(rules.label_producers().into_iter().map(|p| p.key));
    keys.sort();
    keys.dedup();
    keys
}

fn pci_labels(out: &mut String, key: &str, features: &FeatureSet, config: &Config) {
    let pci = &config.sources.pci;
    let (given, _) = pci::builtin_labels(features, pci);
    let fields = if pci.device_label_fields.is_empty() {
        "class, vendor".to_string()
    } else {
        pci.device_label_fields.join(", ")
    };
    let whitelist = if pci.device_class_whitelist.is_empty() {
        "every class".to_string()
    } else {
        pci.device_class_whitelist.join(", ")
    };
    if given.contains_key(key) {
        let _ = writeln!(
            out,
            "  NFD's built-in PCI labels give it, from pci.device (deviceLabelFields: {fields}; \
             deviceClassWhitelist: {whitelist})"
        );
        return;
    }
    let _ = writeln!(
        out,
        "  NFD's built-in PCI labels write keys of this form, but no PCI function of this node \
         gives this one with deviceLabelFields: {fields} and deviceClassWhitelist: {whitelist}; \
         they give:"
    );
    for k in given.keys() {
        let _ = writeln!(out, "    {k}");
    }
    // The usual cause: NFD configured with other fields (the NVIDIA device plugin's chart uses
    // `deviceLabelFields: [vendor]`).
    let alternatives: [&[&str]; 5] = [
        &["vendor"],
        &["class"],
        &["vendor", "device"],
        &["class", "vendor", "device"],
        &[
            "class",
            "vendor",
            "device",
            "subsystem_vendor",
            "subsystem_device",
        ],
    ];
    for fields in alternatives {
        let mut alt = pci.clone();
        alt.device_label_fields = fields.iter().map(|f| f.to_string()).collect();
        if pci::builtin_labels(features, &alt).0.contains_key(key) {
            let _ = writeln!(
                out,
                "  with sources.pci.deviceLabelFields: [{}] in the config it would be given",
                fields.join(", ")
            );
            break;
        }
    }
}

fn profile(out: &mut String, key: &str, features: &FeatureSet, config: &Config) {
    if !config.profiles.contains(&Profile::NvidiaGfd) {
        let _ = writeln!(
            out,
            "  the {:?} profile writes keys like it, and it is off (profiles: [{}] in the config \
             turns it on)",
            gfd::PROFILE,
            gfd::PROFILE
        );
        return;
    }
    let given = gfd::labels(features, config);
    if given.contains_key(key) {
        let _ = writeln!(out, "  the {:?} profile gives it, from NVML", gfd::PROFILE);
        return;
    }
    match gfd::silent_because(features) {
        Some(why) => {
            let _ = writeln!(out, "  {why}");
        }
        None => {
            let _ = writeln!(
                out,
                "  the {:?} profile gives no such key on this node ({} nvidia.com/ label(s): {})",
                gfd::PROFILE,
                given.len(),
                given.keys().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }
}

/// What `explain` says after the rules: the labels that come from no rule, NFD's built-in PCI
/// labels (with the settings that shape them) and the profile's (or why it gives none).
pub fn explain_builtin(features: &FeatureSet, config: &Config) -> String {
    let pci = &config.sources.pci;
    let (given, notes) = pci::builtin_labels(features, pci);
    let mut out = String::from("Built-in labels:\n");
    let _ = writeln!(
        out,
        "  NFD's PCI labels (deviceLabelFields: {}; deviceClassWhitelist: {}): {}",
        if pci.device_label_fields.is_empty() {
            "class, vendor".to_string()
        } else {
            pci.device_label_fields.join(", ")
        },
        if pci.device_class_whitelist.is_empty() {
            "every class".to_string()
        } else {
            pci.device_class_whitelist.join(", ")
        },
        given.len()
    );
    for n in notes {
        let _ = writeln!(out, "    note: {n}");
    }
    for (k, v) in &given {
        let _ = writeln!(out, "    {k}={v}");
    }
    if !config.profiles.contains(&Profile::NvidiaGfd) {
        let _ = writeln!(
            out,
            "  profile {:?}: off (profiles: [{}] in the config turns it on)",
            gfd::PROFILE,
            gfd::PROFILE
        );
        return out;
    }
    let labels = gfd::labels(features, config);
    match gfd::silent_because(features) {
        Some(why) if labels.is_empty() => {
            let _ = writeln!(out, "  {why}");
        }
        _ => {
            let _ = writeln!(out, "  profile {:?}: {}", gfd::PROFILE, labels.len());
            for (k, v) in &labels {
                let _ = writeln!(out, "    {k}={v}");
            }
        }
    }
    out
}
