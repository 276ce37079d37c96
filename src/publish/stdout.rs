//! Printing labels: `-o text|json|yaml|features-file` (docs/catalog.md#output).

use crate::output::NodeOutput;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelFormat {
    Text,
    Json,
    Yaml,
    FeaturesFile,
}

impl LabelFormat {
    /// Every format, in the order `-o` lists them.
    pub const ALL: [LabelFormat; 4] = [
        LabelFormat::Text,
        LabelFormat::Json,
        LabelFormat::Yaml,
        LabelFormat::FeaturesFile,
    ];

    /// The name `-o` uses.
    pub fn name(self) -> &'static str {
        match self {
            LabelFormat::Text => "text",
            LabelFormat::Json => "json",
            LabelFormat::Yaml => "yaml",
            LabelFormat::FeaturesFile => "features-file",
        }
    }
}

/// Renders the output of one evaluation.
pub fn render(output: &NodeOutput, format: LabelFormat) -> String {
    match format {
        // `key=value` lines sorted by key; NFD's features.d format is the same lines, with a
        // header saying where they came from.
        LabelFormat::Text => key_value_lines(output),
        LabelFormat::FeaturesFile => format!(
            "# Written by gpu-labeler {}; NFD features.d format.\n{}",
            env!("CARGO_PKG_VERSION"),
            key_value_lines(output)
        ),
        LabelFormat::Json => {
            let mut s = serde_json::to_string_pretty(output).expect("labels always serialise");
            s.push('\n');
            s
        }
        LabelFormat::Yaml => serde_saphyr::to_string(output).expect("labels always serialise"),
    }
}

fn key_value_lines(output: &NodeOutput) -> String {
    output
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Taint;

    fn output() -> NodeOutput {
        let mut o = NodeOutput::default();
        o.labels
            .insert("feature.node.kubernetes.io/gpu.count".into(), "8".into());
        o.labels.insert(
            "feature.node.kubernetes.io/gpu.present".into(),
            "true".into(),
        );
        o
    }

    #[test]
    fn text_is_sorted_key_value_lines() {
        assert_eq!(
            render(&output(), LabelFormat::Text),
            "feature.node.kubernetes.io/gpu.count=8\nfeature.node.kubernetes.io/gpu.present=true\n"
        );
    }

    #[test]
    fn json_has_labels_and_only_produced_extras() {
        let v: serde_json::Value =
            serde_json::from_str(&render(&output(), LabelFormat::Json)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"labels": {
                "feature.node.kubernetes.io/gpu.count": "8",
                "feature.node.kubernetes.io/gpu.present": "true"}})
        );
        let mut o = output();
        o.taints.push(Taint {
            key: "nvidia.com/gpu".into(),
            value: String::new(),
            effect: "NoSchedule".into(),
        });
        o.extended_resources
            .insert("example.com/gpus".into(), "8".into());
        let v: serde_json::Value = serde_json::from_str(&render(&o, LabelFormat::Json)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"labels": {
                "feature.node.kubernetes.io/gpu.count": "8",
                "feature.node.kubernetes.io/gpu.present": "true"},
                "extendedResources": {"example.com/gpus": "8"},
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]})
        );
    }

    #[test]
    fn yaml_is_the_same_object() {
        let y = render(&output(), LabelFormat::Yaml);
        let v: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"labels": {
                "feature.node.kubernetes.io/gpu.count": "8",
                "feature.node.kubernetes.io/gpu.present": "true"}})
        );
    }
}
