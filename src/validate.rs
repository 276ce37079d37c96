//! nfd-master's output post-processing (docs/catalog.md#post-processing) and the sanitising of values this project derives.
//!
//! Label keys without a namespace get `feature.node.kubernetes.io/`; keys must be Kubernetes
//! qualified names; values must be valid label values; `kubernetes.io` and `*.kubernetes.io` are
//! denied except NFD's own namespaces, `denyLabelNs` denies more and `extraLabelNs` re-allows.
//! Annotations, extended resources and taints follow NFD's `pkg/apis/nfd/validate`. Every
//! function returns the reason a caller reports; nothing is dropped here silently.

use sha2::{Digest, Sha256};

use crate::config::LabelPolicy;
use crate::output::{FEATURE_PREFIX, Taint};

/// NFD's namespace for feature labels, annotations, extended resources and taints.
pub const FEATURE_NS: &str = "feature.node.kubernetes.io";
/// NFD's namespace for profile labels.
pub const PROFILE_NS: &str = "profile.node.kubernetes.io";

const MAX_VALUE_LEN: usize = 63;
const MAX_ANNOTATION_VALUE_LEN: usize = 1024;

/// Turns a value this project derives (a product name, a version) into a valid label value:
/// characters outside `[A-Za-z0-9._-]` become `-`, runs of `-` collapse, the ends are trimmed
/// to alphanumerics; past 63 characters the value keeps its first 54 characters, a `-` and the
/// first 8 hex digits of the SHA-256 of the whole raw value, so distinct long values stay
/// distinct. Returns `""` when nothing valid remains.
pub fn sanitize_value(raw: &str) -> String {
    sanitize_to(raw, MAX_VALUE_LEN)
}

/// `sanitize_value` within `max` characters: past it, the first `max - 9`, `-` and the first 8
/// hex digits of the raw value's SHA-256 (for a name that is part of a label key).
pub fn sanitize_to(raw: &str, max: usize) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
            c
        } else {
            '-'
        };
        if c == '-' && out.ends_with('-') {
            continue;
        }
        out.push(c);
    }
    let trimmed = out.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.len() <= max {
        return trimmed.to_string();
    }
    let digest = Sha256::digest(raw.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    // Only ASCII remains after the mapping above, so byte slicing is on char boundaries.
    format!("{}-{hex}", &trimmed[..max.saturating_sub(9)])
}

/// A value as an error message shows it: whole up to `max` characters, else its first `max`
/// characters, `…` and its length, so that a refused megabyte does not become a megabyte of log.
pub fn elide(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}… ({} bytes)", &s[..i], s.len()),
        None => s.to_string(),
    }
}

/// Adds `ns/` to a key that has no namespace (nfd-master's `addNs`).
pub fn add_namespace(key: &str, ns: &str) -> String {
    if key.contains('/') {
        key.to_string()
    } else {
        format!("{ns}/{key}")
    }
}

/// Validates one label as nfd-master does before it patches the node. Returns the final key
/// (prefixed with `feature.node.kubernetes.io/` when it had no namespace) or the reason it is
/// rejected.
///
/// One deliberate difference: nfd-master skips the value check when a denied namespace is
/// re-allowed through `extraLabelNs`; here the value is always checked, because the API server
/// would refuse such a label anyway (and with it the whole node update).
pub fn validate_label(key: &str, value: &str, policy: &LabelPolicy) -> Result<String, String> {
    let full = if key.contains('/') {
        key.to_string()
    } else {
        format!("{FEATURE_PREFIX}{key}")
    };
    qualified_name(&full).map_err(|e| format!("invalid label key {full:?}: {e}"))?;
    let ns = namespace(&full);
    if (kubernetes_ns_denied(ns, &[FEATURE_NS, PROFILE_NS]) || policy_denies(ns, policy))
        && !policy.extra_label_ns.iter().any(|x| x == ns)
    {
        return Err(format!("namespace {ns:?} is not allowed"));
    }
    if let Some(allowed) = &policy.allowed_ns
        && !allowed.iter().any(|a| namespace_matches(ns, a))
    {
        return Err(format!(
            "namespace {ns:?} is not in labels.allowedNs [{}] (the admission policy must allow it too)",
            allowed.join(", ")
        ));
    }
    if policy.gfd_keys_only && ns == "nvidia.com" && !is_gfd_key(&full) {
        return Err(format!(
            "{full:?} is not a key the nvidia-gfd profile writes (the nvidia-gfd component's admission policy admits only those)"
        ));
    }
    label_value(value).map_err(|e| format!("invalid value {:?}: {e}", elide(value, 100)))?;
    Ok(full)
}

/// Whether the admission policies deploy/ ships (the base's, widened by the nvidia-gfd
/// component) admit `key` as a label the agent adds: NFD's namespaces and their sub-domains
/// ([`crate::config::POLICY_NAMESPACES`]), and GFD's keys ([`crate::config::GFD_KEYS`]).
pub fn shipped_policy_admits(key: &str) -> bool {
    let ns = namespace(key);
    crate::config::POLICY_NAMESPACES
        .iter()
        .any(|p| namespace_matches(ns, p))
        || is_gfd_key(key)
}

/// Whether `key` is one the `nvidia-gfd` profile writes ([`crate::config::GFD_KEYS`]).
pub fn is_gfd_key(key: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(&format!("^(?:{})$", crate::config::GFD_KEYS)).expect("GFD_KEYS")
    })
    .is_match(key)
}

/// `ns` is `pattern`, or for `*.x`, a sub-domain of `x`.
pub fn namespace_matches(ns: &str, pattern: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(parent) => ns
            .strip_suffix(parent)
            .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
        None => ns == pattern,
    }
}

/// Validates an annotation as NFD does; returns the final (prefixed) key or the reason.
pub fn validate_annotation(key: &str, value: &str) -> Result<String, String> {
    let full = add_namespace(key, FEATURE_NS);
    qualified_name(&full).map_err(|e| format!("invalid annotation key {full:?}: {e}"))?;
    let ns = namespace(&full);
    if kubernetes_ns_denied(ns, &[FEATURE_NS]) {
        return Err(format!("namespace {ns:?} is not allowed"));
    }
    if value.len() > MAX_ANNOTATION_VALUE_LEN {
        return Err(format!(
            "invalid value: too long: feature annotations must not be longer than {MAX_ANNOTATION_VALUE_LEN} characters"
        ));
    }
    Ok(full)
}

/// Validates an extended resource as NFD does; returns the final (prefixed) name or the reason.
pub fn validate_extended_resource(key: &str, value: &str) -> Result<String, String> {
    let full = add_namespace(key, FEATURE_NS);
    qualified_name(&full).map_err(|e| format!("invalid name {full:?}: {e}"))?;
    let ns = namespace(&full);
    if kubernetes_ns_denied(ns, &[FEATURE_NS]) {
        return Err(format!("namespace {ns:?} is not allowed"));
    }
    quantity(value).map_err(|e| format!("invalid value {:?}: {e}", elide(value, 100)))?;
    Ok(full)
}

/// Validates a taint as NFD does (a namespaced key outside the denied `kubernetes.io`
/// namespaces, one of the three effects), plus what the API server checks on a Node (the key
/// is a qualified name, the value a label value).
pub fn validate_taint(taint: &Taint) -> Result<(), String> {
    let ns = namespace(&taint.key);
    if ns.is_empty() {
        return Err("unprefixed keys are not allowed".to_string());
    }
    if kubernetes_ns_denied(ns, &[FEATURE_NS]) {
        return Err(format!("namespace {ns:?} is not allowed"));
    }
    qualified_name(&taint.key).map_err(|e| format!("invalid key {:?}: {e}", taint.key))?;
    label_value(&taint.value).map_err(|e| format!("invalid value {:?}: {e}", taint.value))?;
    match taint.effect.as_str() {
        "" => Err("empty taint effect".to_string()),
        "NoSchedule" | "PreferNoSchedule" | "NoExecute" => Ok(()),
        other => Err(format!(
            "invalid taint effect {other:?} (expected NoSchedule, PreferNoSchedule or NoExecute)"
        )),
    }
}

/// The namespace (prefix) of a key, `""` when it has none.
pub fn namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or("")
}

/// `kubernetes.io` and `*.kubernetes.io` are reserved, except the allowed namespaces and their
/// sub-namespaces.
fn kubernetes_ns_denied(ns: &str, allowed: &[&str]) -> bool {
    if ns != "kubernetes.io" && !ns.ends_with(".kubernetes.io") {
        return false;
    }
    !allowed.iter().any(|a| {
        ns.strip_suffix(a)
            .is_some_and(|rest| rest.is_empty() || rest.ends_with('.'))
    })
}

/// `denyLabelNs`: exact names, or `*suffix` wildcards (leading `*`s trimmed, then a suffix
/// match, as nfd-master does).
fn policy_denies(ns: &str, policy: &LabelPolicy) -> bool {
    policy.deny_label_ns.iter().any(|d| {
        if d.starts_with('*') {
            ns.ends_with(d.trim_start_matches('*'))
        } else {
            ns == d
        }
    })
}

/// Kubernetes `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name
/// at most 63 characters of `[A-Za-z0-9._-]` starting and ending alphanumeric.
pub fn qualified_name(key: &str) -> Result<(), String> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Err("prefix part must be non-empty".to_string());
            }
            dns_subdomain(prefix).map_err(|e| format!("prefix part {e}"))?;
            name
        }
        _ => {
            return Err(
                "a qualified name must be a name with an optional DNS subdomain prefix and one '/' (e.g. 'example.com/MyName')"
                    .to_string(),
            );
        }
    };
    if name.is_empty() {
        return Err("name part must be non-empty".to_string());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".to_string());
    }
    if !is_name_chars(name) {
        return Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".to_string());
    }
    Ok(())
}

/// Kubernetes `IsValidLabelValue`: empty, or at most 63 characters of `[A-Za-z0-9._-]`
/// starting and ending alphanumeric.
pub fn label_value(value: &str) -> Result<(), String> {
    if value.len() > MAX_VALUE_LEN {
        return Err(format!(
            "must be no more than {MAX_VALUE_LEN} characters (has {})",
            value.len()
        ));
    }
    if !value.is_empty() && !is_name_chars(value) {
        return Err("a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".to_string());
    }
    Ok(())
}

fn is_name_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Kubernetes' `IsDNS1123Subdomain` (an object's name, a label key's prefix).
pub fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.len() > 253 {
        return Err("must be no more than 253 characters".to_string());
    }
    let ok = s.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => {
                (f.is_ascii_lowercase() || f.is_ascii_digit())
                    && (l.is_ascii_lowercase() || l.is_ascii_digit())
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            }
            _ => false,
        }
    });
    if ok {
        Ok(())
    } else {
        Err("must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character (e.g. 'example.com')".to_string())
    }
}

/// A Kubernetes resource quantity (`123`, `1.5`, `100m`, `4Gi`, `1e3`), as
/// `resource.ParseQuantity` accepts it.
pub fn quantity(value: &str) -> Result<(), String> {
    const BAD: &str = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    let s = value.strip_prefix(['+', '-']).unwrap_or(value);
    let num_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_len);
    let digits = num.chars().filter(char::is_ascii_digit).count();
    if digits == 0 || num.matches('.').count() > 1 {
        return Err(BAD.to_string());
    }
    let suffix_ok = match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T"
        | "P" | "E" => true,
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            !exp.is_empty() && exp.chars().all(|c| c.is_ascii_digit())
        }
        _ => false,
    };
    if suffix_ok {
        Ok(())
    } else {
        Err("unable to parse quantity's suffix".to_string())
    }
}

/// A quantity's value in thousandths (`500m` is 500, `2` is 2000, `1Ki` is 1,024,000), rounded
/// up as the scheduler rounds, saturating far beyond any real size; the errors are `quantity`'s.
pub fn quantity_milli(value: &str) -> Result<i128, String> {
    quantity(value)?;
    let (negative, s) = match value.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    let num_len = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_len);
    let (whole, fraction) = num.split_once('.').unwrap_or((num, ""));
    let mut digits: i128 = 0;
    for c in whole.chars().chain(fraction.chars()) {
        digits = digits
            .saturating_mul(10)
            .saturating_add(i128::from(c as u8 - b'0'));
    }
    // value = digits * 10^(exp10 - fraction digits) * binary
    let (mut exp10, binary): (i64, i128) = match suffix {
        "Ki" => (0, 1 << 10),
        "Mi" => (0, 1 << 20),
        "Gi" => (0, 1 << 30),
        "Ti" => (0, 1 << 40),
        "Pi" => (0, 1 << 50),
        "Ei" => (0, 1 << 60),
        "n" => (-9, 1),
        "u" => (-6, 1),
        "m" => (-3, 1),
        "" => (0, 1),
        "k" => (3, 1),
        "M" => (6, 1),
        "G" => (9, 1),
        "T" => (12, 1),
        "P" => (15, 1),
        "E" => (18, 1),
        e => (e[1..].parse::<i64>().unwrap_or(i64::MAX).min(1 << 20), 1),
    };
    exp10 += 3 - i64::try_from(fraction.len()).unwrap_or(i64::MAX);
    let mut milli = digits.saturating_mul(binary);
    if exp10 >= 0 {
        for _ in 0..exp10.min(40) {
            milli = milli.saturating_mul(10);
        }
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(-exp10).unwrap_or(u32::MAX));
        milli = match divisor {
            Some(d) => (milli + d - 1) / d,
            None => i128::from(milli > 0),
        };
    }
    Ok(if negative { -milli } else { milli })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(extra: &[&str], deny: &[&str]) -> LabelPolicy {
        LabelPolicy {
            extra_label_ns: extra.iter().map(|s| s.to_string()).collect(),
            deny_label_ns: deny.iter().map(|s| s.to_string()).collect(),
            allowed_ns: None,
            gfd_keys_only: false,
        }
    }

    #[test]
    fn allowed_namespaces_refuse_the_rest() {
        let mut p = policy(&[], &[]);
        p.allowed_ns = Some(
            crate::config::POLICY_NAMESPACES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
        for ok in [
            "gpu.present",
            "feature.node.kubernetes.io/x",
            "vendor.feature.node.kubernetes.io/x",
            "profile.node.kubernetes.io/x",
        ] {
            assert!(validate_label(ok, "v", &p).is_ok(), "{ok}");
        }
        for refused in [
            "nvidia.com/gpu.product",
            "amd.com/gpu.present",
            "gpu.intel.com/family",
            "sub.nvidia.com/x",
            "xnvidia.com/x",
        ] {
            let ns = namespace(refused);
            assert_eq!(
                validate_label(refused, "v", &p),
                Err(format!(
                    "namespace {ns:?} is not in labels.allowedNs [feature.node.kubernetes.io, *.feature.node.kubernetes.io, profile.node.kubernetes.io, *.profile.node.kubernetes.io] (the admission policy must allow it too)"
                )),
                "{refused}"
            );
        }
    }

    #[test]
    fn long_values_are_elided_in_messages() {
        assert_eq!(elide("short", 10), "short");
        assert_eq!(elide(&"x".repeat(1000), 5), "xxxxx… (1000 bytes)");
        assert_eq!(elide("ééééé", 2), "éé… (10 bytes)");
    }

    #[test]
    fn sanitize_table() {
        let cases = [
            ("NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"),
            ("  Tesla T4  ", "Tesla-T4"),
            ("AMD Instinct MI300X (rev c1)", "AMD-Instinct-MI300X-rev-c1"),
            ("550.54.15", "550.54.15"),
            ("a//b::c", "a-b-c"),
            ("--x--", "x"),
            ("._x_.", "x"),
            ("***", ""),
            ("", ""),
            ("Ünïcode GPU", "n-code-GPU"),
            ("a_b.c-d", "a_b.c-d"),
        ];
        for (raw, want) in cases {
            assert_eq!(sanitize_value(raw), want, "{raw:?}");
            assert_eq!(label_value(&sanitize_value(raw)), Ok(()), "{raw:?}");
        }
    }

    #[test]
    fn sanitize_exactly_63_is_kept() {
        let raw = "a".repeat(63);
        assert_eq!(sanitize_value(&raw), raw);
    }

    #[test]
    fn sanitize_long_value_gets_hash_form() {
        let raw = format!("{} GPU", "x".repeat(70));
        let digest = Sha256::digest(raw.as_bytes());
        let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        let want = format!("{}-{hex}", "x".repeat(54));
        let got = sanitize_value(&raw);
        assert_eq!(got, want);
        assert_eq!(got.len(), 63);
        assert_eq!(label_value(&got), Ok(()));
        // Two long values with the same prefix stay distinct.
        let other = format!("{} CPU", "x".repeat(70));
        assert_ne!(sanitize_value(&other), got);
    }

    #[test]
    fn label_keys_and_namespaces() {
        let p = LabelPolicy::default();
        let ok = |k: &str, v: &str| validate_label(k, v, &p);
        assert_eq!(
            ok("gpu.present", "true"),
            Ok("feature.node.kubernetes.io/gpu.present".into())
        );
        assert_eq!(
            ok("nvidia.com/gpu.count", "8"),
            Ok("nvidia.com/gpu.count".into())
        );
        assert_eq!(
            ok("feature.node.kubernetes.io/x", ""),
            Ok("feature.node.kubernetes.io/x".into())
        );
        assert_eq!(
            ok("sub.feature.node.kubernetes.io/x", "1"),
            Ok("sub.feature.node.kubernetes.io/x".into())
        );
        assert_eq!(
            ok("profile.node.kubernetes.io/x", "1"),
            Ok("profile.node.kubernetes.io/x".into())
        );
        assert_eq!(
            ok("a.profile.node.kubernetes.io/x", "1"),
            Ok("a.profile.node.kubernetes.io/x".into())
        );
        assert_eq!(
            ok("kubernetes.io/x", "1"),
            Err("namespace \"kubernetes.io\" is not allowed".into())
        );
        assert_eq!(
            ok("node.kubernetes.io/x", "1"),
            Err("namespace \"node.kubernetes.io\" is not allowed".into())
        );
        assert_eq!(
            ok("xfeature.node.kubernetes.io/x", "1"),
            Err("namespace \"xfeature.node.kubernetes.io\" is not allowed".into())
        );
        assert_eq!(
            ok("Example.com/x", "1").unwrap_err(),
            "invalid label key \"Example.com/x\": prefix part must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character (e.g. 'example.com')"
        );
        assert_eq!(
            ok("a/b/c", "1").unwrap_err(),
            "invalid label key \"a/b/c\": a qualified name must be a name with an optional DNS subdomain prefix and one '/' (e.g. 'example.com/MyName')"
        );
        assert_eq!(
            ok("/x", "1").unwrap_err(),
            "invalid label key \"/x\": prefix part must be non-empty"
        );
        assert_eq!(
            ok("x.com/", "1").unwrap_err(),
            "invalid label key \"x.com/\": name part must be non-empty"
        );
        assert_eq!(
            ok("-bad", "1").unwrap_err(),
            "invalid label key \"feature.node.kubernetes.io/-bad\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        );
        assert_eq!(
            ok(&"k".repeat(64), "1").unwrap_err(),
            format!(
                "invalid label key \"feature.node.kubernetes.io/{}\": name part must be no more than 63 characters",
                "k".repeat(64)
            )
        );
        assert_eq!(
            ok("x", "a b").unwrap_err(),
            "invalid value \"a b\": a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        );
        assert_eq!(
            ok("x", &"v".repeat(64)).unwrap_err(),
            format!(
                "invalid value \"{}\": must be no more than 63 characters (has 64)",
                "v".repeat(64)
            )
        );
        assert_eq!(
            ok("x", &"v".repeat(63)),
            Ok("feature.node.kubernetes.io/x".into())
        );
    }

    #[test]
    fn deny_and_extra_namespaces() {
        let p = policy(
            &["node.kubernetes.io", "example.com"],
            &["example.com", "*.corp.io", "bad.io"],
        );
        assert_eq!(
            validate_label("node.kubernetes.io/x", "1", &p),
            Ok("node.kubernetes.io/x".into())
        );
        assert_eq!(
            validate_label("example.com/x", "1", &p),
            Ok("example.com/x".into())
        );
        assert_eq!(
            validate_label("bad.io/x", "1", &p),
            Err("namespace \"bad.io\" is not allowed".into())
        );
        assert_eq!(
            validate_label("a.corp.io/x", "1", &p),
            Err("namespace \"a.corp.io\" is not allowed".into())
        );
        assert_eq!(validate_label("corp.io/x", "1", &p), Ok("corp.io/x".into()));
        assert_eq!(
            validate_label("kubernetes.io/x", "1", &p),
            Err("namespace \"kubernetes.io\" is not allowed".into())
        );
        // Extra namespaces do not excuse an invalid value.
        assert!(validate_label("node.kubernetes.io/x", "a b", &p).is_err());
        // The default namespace can be denied too.
        let p = policy(&[], &["feature.node.kubernetes.io"]);
        assert_eq!(
            validate_label("x", "1", &p),
            Err("namespace \"feature.node.kubernetes.io\" is not allowed".into())
        );
    }

    #[test]
    fn annotations_resources_taints() {
        assert_eq!(
            validate_annotation("a", "foo"),
            Ok("feature.node.kubernetes.io/a".into())
        );
        assert_eq!(
            validate_annotation("custom.vendor.io/feature", "baz"),
            Ok("custom.vendor.io/feature".into())
        );
        assert_eq!(
            validate_annotation("kubernetes.io/feature", "x"),
            Err("namespace \"kubernetes.io\" is not allowed".into())
        );
        assert_eq!(
            validate_annotation("nfd.node.kubernetes.io/xyz", "x"),
            Err("namespace \"nfd.node.kubernetes.io\" is not allowed".into())
        );
        assert!(validate_annotation("a", &"x".repeat(1025)).is_err());
        assert_eq!(
            validate_annotation("a", &"x".repeat(1024)),
            Ok("feature.node.kubernetes.io/a".into())
        );

        assert_eq!(
            validate_extended_resource("nons", "123"),
            Ok("feature.node.kubernetes.io/nons".into())
        );
        assert_eq!(
            validate_extended_resource("vendor.io/dynamic", "10"),
            Ok("vendor.io/dynamic".into())
        );
        assert_eq!(
            validate_extended_resource("bad.kubernetes.io/malo", "999"),
            Err("namespace \"bad.kubernetes.io\" is not allowed".into())
        );
        assert!(validate_extended_resource("x", "abc").is_err());
        for q in [
            "0", "1.5", "100m", "4Gi", "1e3", "+2", "-1", ".5", "12E-2", "5k",
        ] {
            assert_eq!(quantity(q), Ok(()), "{q}");
        }
        for q in ["", "abc", "1.2.3", "1x", "Gi", "1e", "1 Gi"] {
            assert!(quantity(q).is_err(), "{q}");
        }

        let t = |k: &str, v: &str, e: &str| Taint {
            key: k.into(),
            value: v.into(),
            effect: e.into(),
        };
        assert_eq!(
            validate_taint(&t("feature.node.kubernetes.io/gpu", "true", "NoSchedule")),
            Ok(())
        );
        assert_eq!(
            validate_taint(&t("vendor.io/gpu", "", "PreferNoSchedule")),
            Ok(())
        );
        assert_eq!(
            validate_taint(&t("gpu", "true", "NoSchedule")),
            Err("unprefixed keys are not allowed".into())
        );
        assert_eq!(
            validate_taint(&t("node.kubernetes.io/gpu", "true", "NoSchedule")),
            Err("namespace \"node.kubernetes.io\" is not allowed".into())
        );
        assert_eq!(
            validate_taint(&t("vendor.io/gpu", "true", "")),
            Err("empty taint effect".into())
        );
        assert_eq!(validate_taint(&t("vendor.io/gpu", "true", "Never")), Err("invalid taint effect \"Never\" (expected NoSchedule, PreferNoSchedule or NoExecute)".into()));
    }

    #[test]
    fn quantities_in_thousandths_as_the_scheduler_rounds() {
        let q = |v: &str| quantity_milli(v).unwrap();
        assert_eq!(
            [
                q("8"),
                q("500m"),
                q("1.5"),
                q("1Ki"),
                q("2Gi"),
                q("1e3"),
                q("1k"),
                q("1n"),
                q("-2")
            ],
            [
                8000,
                500,
                1500,
                1_024_000,
                2_147_483_648_000,
                1_000_000,
                1_000_000,
                1,
                -2000
            ]
        );
        assert_eq!(
            quantity_milli("4x").unwrap_err(),
            "unable to parse quantity's suffix"
        );
    }
}
