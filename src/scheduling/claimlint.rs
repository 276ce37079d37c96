//! `gpu-labeler claims check`: the DRA selectors of ResourceClaims, ResourceClaimTemplates and
//! DeviceClasses held against what the cluster's drivers publish (its ResourceSlices, or a
//! `--dra` file's), before a pod waits on them:
//!
//! - `unknown-name`: an attribute or capacity no device of the domain's driver publishes (the
//!   selector fails at run time on every device it reaches, and the allocation is aborted), with
//!   the published name it is likely a typo of;
//! - `unguarded`: an attribute or capacity some devices of the driver publish and others do
//!   not, read without `has()` (or `"name" in ...`): the allocation aborts on the ones without;
//! - `version-as-string`: a version attribute compared with a string (`==`, `<`, ...: a type
//!   error, or a comparison of text), or a string attribute compared with `semver(...)`.

use std::collections::{BTreeMap, BTreeSet};

use cel::common::ast::{Expr, IdedExpr, LiteralValue};

use super::cel as dracel;
use super::draobjects::{DraSet, SubRequest};
use crate::dra::Attr;

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `file:line:column` of the expression.
    pub at: String,
    /// `DeviceClass gpu.nvidia.com`, `ResourceClaimTemplate ml/pair request gpus`.
    pub owner: String,
    pub selector: usize,
    pub code: &'static str,
    pub message: String,
}

/// What the drivers publish, per domain: names with their types, and how many devices have
/// each.
#[derive(Debug, Default)]
struct Published {
    /// domain -> attribute id -> (types seen, devices with it).
    attributes: BTreeMap<String, BTreeMap<String, (BTreeSet<&'static str>, usize)>>,
    capacity: BTreeMap<String, BTreeMap<String, usize>>,
    /// driver -> devices.
    devices: BTreeMap<String, usize>,
}

fn kind(a: &Attr) -> &'static str {
    match a {
        Attr::Int(_) => "int",
        Attr::Bool(_) => "bool",
        Attr::Str(_) => "string",
        Attr::Version(_) => "version",
    }
}

fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

impl Published {
    fn of(set: &DraSet) -> Published {
        let mut p = Published::default();
        for s in &set.slices {
            for d in &s.devices {
                *p.devices.entry(s.driver.clone()).or_default() += 1;
                for (name, a) in &d.attributes {
                    let (dom, id) = qualified(name, &s.driver);
                    let e = p
                        .attributes
                        .entry(dom.to_string())
                        .or_default()
                        .entry(id.to_string())
                        .or_default();
                    e.0.insert(kind(a));
                    e.1 += 1;
                }
                for name in d.capacity.keys() {
                    let (dom, id) = qualified(name, &s.driver);
                    *p.capacity
                        .entry(dom.to_string())
                        .or_default()
                        .entry(id.to_string())
                        .or_default() += 1;
                }
            }
        }
        p
    }

    /// Devices a domain's names can be on: its driver's, or (a shared domain such as
    /// `resource.kubernetes.io`) every device.
    fn devices_of(&self, domain: &str) -> usize {
        match self.devices.get(domain) {
            Some(n) => *n,
            None => self.devices.values().sum(),
        }
    }
}

/// Checks every selector of the claims, templates and classes of `files` against `cluster`.
pub fn check(files: &DraSet, cluster: &DraSet) -> Vec<Finding> {
    let published = Published::of(cluster);
    let mut out = Vec::new();
    for c in &files.classes {
        for (i, (expr, at)) in c.selectors.iter().zip(&c.selector_at).enumerate() {
            lint(
                &published,
                expr,
                at,
                &format!("DeviceClass {}", c.name),
                i,
                &mut out,
            );
        }
    }
    let mut claim =
        |kind: &str, ns: &Option<String>, name: &str, spec: &super::draobjects::ClaimSpec| {
            let who = match ns {
                Some(ns) => format!("{kind} {ns}/{name}"),
                None => format!("{kind} {name}"),
            };
            for r in &spec.requests {
                let subs: Vec<(String, &SubRequest)> = match &r.exactly {
                    Some(e) => vec![(r.name.clone(), e)],
                    None => r
                        .first_available
                        .iter()
                        .map(|s| (format!("{}/{}", r.name, s.name), s))
                        .collect(),
                };
                for (rname, s) in subs {
                    for (i, (expr, at)) in s.selectors.iter().zip(&s.selector_at).enumerate() {
                        lint(
                            &published,
                            expr,
                            at,
                            &format!("{who} request {rname}"),
                            i,
                            &mut out,
                        );
                    }
                }
            }
        };
    for c in &files.claims {
        claim("ResourceClaim", &c.namespace, &c.name, &c.spec);
    }
    for t in &files.templates {
        claim("ResourceClaimTemplate", &t.namespace, &t.name, &t.spec);
    }
    // In file order: by file, line and column.
    out.sort_by_key(|f| {
        let mut parts = f.at.rsplitn(3, ':');
        let col: u64 = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
        let line: u64 = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
        (parts.next().unwrap_or_default().to_string(), line, col)
    });
    out
}

fn lint(p: &Published, expr: &str, at: &str, owner: &str, index: usize, out: &mut Vec<Finding>) {
    let mut push = |code: &'static str, message: String| {
        out.push(Finding {
            at: at.to_string(),
            owner: owner.to_string(),
            selector: index,
            code,
            message,
        })
    };
    let sel = match dracel::compile(expr) {
        Ok(s) => s,
        Err(e) => {
            push("compile", e);
            return;
        }
    };
    let e = sel.expression();
    // Names tested with has() or `in`: guarded.
    let mut guarded: BTreeSet<(String, String, String)> = BTreeSet::new();
    dracel::walk(e, &mut |x| {
        if dracel::is_has_test(x)
            && let Some((w, d, n)) = dracel::device_access(x)
        {
            guarded.insert((w.into(), d.into(), n.into()));
        }
        if let Expr::Call(c) = &x.expr
            && c.func_name == "@in"
            && let [key, map] = c.args.as_slice()
            && let Expr::Literal(LiteralValue::String(k)) = &key.expr
            && let Some((w, d)) = map_of(map)
        {
            guarded.insert((w.into(), d.into(), k.to_string()));
        }
    });
    let mut seen = BTreeSet::new();
    dracel::walk(e, &mut |x| {
        if dracel::is_has_test(x) {
            return;
        }
        let Some((which, domain, name)) = dracel::device_access(x) else {
            return;
        };
        let key = (which.to_string(), domain.to_string(), name.to_string());
        if !seen.insert(key.clone()) {
            return;
        }
        let what = if which == "attributes" {
            "attribute"
        } else {
            "capacity"
        };
        let have = if which == "attributes" {
            p.attributes
                .get(domain)
                .and_then(|m| m.get(name))
                .map(|e| e.1)
        } else {
            p.capacity.get(domain).and_then(|m| m.get(name)).copied()
        };
        let total = p.devices_of(domain);
        match have {
            None => {
                let names: Vec<&String> = if which == "attributes" {
                    p.attributes
                        .get(domain)
                        .map(|m| m.keys().collect())
                        .unwrap_or_default()
                } else {
                    p.capacity
                        .get(domain)
                        .map(|m| m.keys().collect())
                        .unwrap_or_default()
                };
                let other = if which == "attributes" {
                    p.capacity.get(domain).is_some_and(|m| m.contains_key(name))
                } else {
                    p.attributes
                        .get(domain)
                        .is_some_and(|m| m.contains_key(name))
                };
                let mut m = if names.is_empty() && !other {
                    format!(
                        "{what} {domain}/{name}: no driver of the cluster publishes anything in {domain}"
                    )
                } else {
                    format!("{what} {domain}/{name} is published by no device")
                };
                if other {
                    let o = if which == "attributes" {
                        "a capacity"
                    } else {
                        "an attribute"
                    };
                    m.push_str(&format!(
                        "; it is {o}: device.{}[\"{domain}\"].{name}",
                        if which == "attributes" {
                            "capacity"
                        } else {
                            "attributes"
                        }
                    ));
                } else if let Some(best) = names
                    .iter()
                    .map(|n| (crate::names::edit_distance(name, n), *n))
                    .filter(|(d, _)| *d <= 2)
                    .min()
                {
                    m.push_str(&format!("; did you mean {}?", best.1));
                }
                push("unknown-name", m);
            }
            Some(n) if n < total && !guarded.contains(&key) => push(
                "unguarded",
                format!(
                    "{what} {domain}/{name} is read without has(): {} of {total} devices do not \
                     publish it, and an allocation that reaches one of them is aborted \
                     (guard it: has(device.{which}[\"{domain}\"].{name}) && ...)",
                    total - n
                ),
            ),
            Some(_) => {}
        }
    });
    // Versions and strings compared.
    dracel::walk(e, &mut |x| {
        let Expr::Call(c) = &x.expr else { return };
        let ops = ["_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"];
        let methods = ["compareTo", "isGreaterThan", "isLessThan"];
        let pairs: Vec<(&IdedExpr, &IdedExpr)> = if ops.contains(&c.func_name.as_str()) {
            match c.args.as_slice() {
                [a, b] => vec![(a, b), (b, a)],
                _ => Vec::new(),
            }
        } else if methods.contains(&c.func_name.as_str()) {
            match (c.target.as_deref(), c.args.as_slice()) {
                (Some(t), [a]) => vec![(t, a), (a, t)],
                _ => Vec::new(),
            }
        } else {
            Vec::new()
        };
        for (side, other) in pairs {
            let Some(("attributes", domain, name)) = dracel::device_access(side) else {
                continue;
            };
            let Some((types, _)) = p.attributes.get(domain).and_then(|m| m.get(name)) else {
                continue;
            };
            let is_string_lit = matches!(&other.expr, Expr::Literal(LiteralValue::String(_)));
            let is_semver = matches!(&other.expr, Expr::Call(k) if k.func_name == "semver");
            if types.contains("version") && is_string_lit {
                push(
                    "version-as-string",
                    format!(
                        "{domain}/{name} is a version, compared with a string: compare \
                         semver(\"...\") with compareTo, isGreaterThan or isLessThan"
                    ),
                );
            } else if types.contains("string") && !types.contains("version") && is_semver {
                push(
                    "version-as-string",
                    format!(
                        "{domain}/{name} is a string, not a version: semver() cannot be compared \
                         with it"
                    ),
                );
            }
        }
    });
}

/// `device.attributes["d"]` / `device.capacity["d"]`: (which, domain).
fn map_of(e: &IdedExpr) -> Option<(&str, &str)> {
    let Expr::Call(c) = &e.expr else { return None };
    if c.func_name != "_[_]" || c.args.len() != 2 {
        return None;
    }
    let which = dracel::device_map(&c.args[0])?;
    match &c.args[1].expr {
        Expr::Literal(LiteralValue::String(d)) => Some((which, d)),
        _ => None,
    }
}

/// `file:line:col: OWNER selector #N: MESSAGE [code]`, one a line, and a count.
pub fn render_text(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        out.push_str(&format!(
            "{}: {} selector #{}: {} [{}]\n",
            f.at, f.owner, f.selector, f.message, f.code
        ));
    }
    out.push_str(&match findings.len() {
        0 => "no problems found\n".to_string(),
        1 => "1 problem\n".to_string(),
        n => format!("{n} problems\n"),
    });
    out
}

pub fn render_json(findings: &[Finding]) -> String {
    let list: Vec<serde_json::Value> = findings
        .iter()
        .map(|f| {
            serde_json::json!({"location": f.at, "object": f.owner, "selector": f.selector,
                               "code": f.code, "message": f.message})
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "problems": list })).unwrap_or_default()
        + "\n"
}
