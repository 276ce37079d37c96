//! What a template reads that its data cannot have: a static walk of the parsed template
//! (`rules check`). The data of a rule's template is `{domain: {feature: [element, ...]}}`;
//! `range` over a feature sets dot to one element: `{Name}` for a flag, `{Name, Value}` for an
//! attribute, the attribute map of an instance (NFD's `MatchedElement`). A field no element can
//! have (`.Nmae`, `.vendr`, NFD's common `.Attributes.vendor`) is a missing key when the rule
//! runs: the rule fails. Where the walk cannot know what dot is (a function's result, `index`,
//! a feature of unknown kind), it says nothing.

use std::collections::HashMap;

use gtmpl_ng::node::{BranchNode, CommandNode, ListNode, Nodes, PipeNode};

/// The kind of a feature's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Flag,
    Attribute,
    Instance,
}

/// The kinds of the features this project discovers and of NFD's own (its documented feature
/// list), as their snapshots hold them.
pub const KINDS: &[(&str, Kind)] = &[
    ("pci.device", Kind::Instance),
    ("gpu.device", Kind::Instance),
    ("gpu.mig", Kind::Instance),
    ("gpu.migprofile", Kind::Attribute),
    ("gpu.node", Kind::Attribute),
    ("gpu.driver", Kind::Attribute),
    ("accel.device", Kind::Instance),
    ("accel.node", Kind::Attribute),
    ("accel.driver", Kind::Attribute),
    ("gpu.sharing", Kind::Attribute),
    ("dra.device", Kind::Instance),
    ("dra.node", Kind::Attribute),
    ("dra.mismatch", Kind::Instance),
    ("kernel.loadedmodule", Kind::Flag),
    ("system.dmiid", Kind::Attribute),
    ("rule.matched", Kind::Attribute),
    // NFD's sources (docs/reference/feature-discovery.md), those of one kind only: `cpu.cpuid`
    // and `cpu.rdt` have flags and attributes (`AVX10_VERSION`), and are left out.
    ("cpu.cstate", Kind::Attribute),
    ("cpu.pstate", Kind::Attribute),
    ("cpu.model", Kind::Attribute),
    ("cpu.topology", Kind::Attribute),
    ("cpu.security", Kind::Attribute),
    ("cpu.sst", Kind::Attribute),
    ("cpu.coprocessor", Kind::Attribute),
    ("kernel.config", Kind::Attribute),
    ("kernel.enabledmodule", Kind::Flag),
    ("kernel.selinux", Kind::Attribute),
    ("kernel.version", Kind::Attribute),
    ("memory.numa", Kind::Attribute),
    ("memory.nv", Kind::Instance),
    ("memory.swap", Kind::Attribute),
    ("network.device", Kind::Instance),
    ("network.virtual", Kind::Instance),
    ("storage.block", Kind::Instance),
    ("system.osrelease", Kind::Attribute),
    ("system.name", Kind::Attribute),
    ("usb.device", Kind::Instance),
];

fn kind_of(feature: &str) -> Option<Kind> {
    KINDS.iter().find(|(f, _)| *f == feature).map(|(_, k)| *k)
}

/// A field a template reads that no element can have: template line and byte column (as the
/// engine counts them), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typo {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// What dot (or a variable) is, as far as the walk knows.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
    /// The template's data.
    Root,
    /// The elements of a feature (what `range` walks).
    List(Kind, String),
    /// One element.
    Elem(Kind, String),
    Unknown,
}

/// Every field of `root` that no element of its feature can have; `.domain.feature` pairs the
/// template reads from its data root are the second result, in order.
pub fn check(root: &Nodes) -> (Vec<Typo>, Vec<(String, String)>) {
    let mut w = Walker::default();
    let vars = HashMap::from([("$".to_string(), Ty::Root)]);
    w.node(root, &Ty::Root, &mut vars.clone());
    (w.typos, w.roots)
}

#[derive(Default)]
struct Walker {
    typos: Vec<Typo>,
    roots: Vec<(String, String)>,
}

impl Walker {
    fn node(&mut self, n: &Nodes, dot: &Ty, vars: &mut HashMap<String, Ty>) {
        match n {
            Nodes::List(l) => self.list(l, dot, vars),
            Nodes::Action(a) => {
                let t = self.pipe(&a.pipe, dot, vars);
                declare(&a.pipe, t, vars);
            }
            Nodes::If(b) => self.branch(b, dot, dot.clone(), vars),
            Nodes::With(b) => {
                let t = self.pipe(&b.pipe, dot, vars);
                self.branch(b, dot, t, vars);
            }
            Nodes::Range(b) => {
                let t = self.pipe(&b.pipe, dot, vars);
                let elem = match t {
                    Ty::List(k, f) => Ty::Elem(k, f),
                    _ => Ty::Unknown,
                };
                let mut inner = vars.clone();
                match &b.pipe.decl[..] {
                    [v] => {
                        inner.insert(v.ident[0].clone(), elem.clone());
                    }
                    [i, v, ..] => {
                        inner.insert(i.ident[0].clone(), Ty::Unknown);
                        inner.insert(v.ident[0].clone(), elem.clone());
                    }
                    [] => {}
                }
                self.list(&b.list, &elem, &mut inner);
                if let Some(e) = &b.else_list {
                    self.list(e, dot, &mut vars.clone());
                }
            }
            _ => {}
        }
    }

    fn list(&mut self, l: &ListNode, dot: &Ty, vars: &mut HashMap<String, Ty>) {
        for n in &l.nodes {
            self.node(n, dot, vars);
        }
    }

    /// `if`/`with`: the pipeline checked with the outer dot, the body with `body`, `else` with
    /// the outer dot; variables declared inside stay inside.
    fn branch(&mut self, b: &BranchNode, dot: &Ty, body: Ty, vars: &HashMap<String, Ty>) {
        let mut inner = vars.clone();
        declare(&b.pipe, body.clone(), &mut inner);
        self.list(&b.list, &body, &mut inner);
        if let Some(e) = &b.else_list {
            self.list(e, dot, &mut vars.clone());
        }
    }

    /// Checks every field the pipeline reads; what it evaluates to, when that is known.
    fn pipe(&mut self, p: &PipeNode, dot: &Ty, vars: &HashMap<String, Ty>) -> Ty {
        let mut last = Ty::Unknown;
        for (i, c) in p.cmds.iter().enumerate() {
            let t = self.command(c, dot, vars);
            // A later command gets the earlier one's value as its last argument: unknown.
            last = if i == 0 { t } else { Ty::Unknown };
        }
        last
    }

    fn command(&mut self, c: &CommandNode, dot: &Ty, vars: &HashMap<String, Ty>) -> Ty {
        let mut first = Ty::Unknown;
        for (i, a) in c.args.iter().enumerate() {
            let t = match a {
                Nodes::Field(f) => self.fields(dot, &f.ident, a),
                Nodes::Variable(v) => match vars.get(&v.ident[0]) {
                    Some(t) => self.fields(t, &v.ident[1..], a),
                    None => Ty::Unknown,
                },
                Nodes::Dot(_) => dot.clone(),
                Nodes::Pipe(p) => self.pipe(p, dot, vars),
                _ => Ty::Unknown,
            };
            if i == 0 && c.args.len() == 1 {
                first = t;
            }
        }
        first
    }

    /// Follows `idents` from `t`, reporting the first field that cannot be there.
    fn fields(&mut self, t: &Ty, idents: &[String], at: &Nodes) -> Ty {
        let mut t = t.clone();
        let mut i = 0;
        while i < idents.len() {
            let id = &idents[i];
            t = match &t {
                Ty::Root => {
                    let Some(f) = idents.get(i + 1) else {
                        return Ty::Unknown;
                    };
                    let pair = (id.clone(), f.clone());
                    if !self.roots.contains(&pair) {
                        self.roots.push(pair);
                    }
                    i += 1;
                    let feature = format!("{id}.{f}");
                    match kind_of(&feature) {
                        Some(k) => Ty::List(k, feature),
                        None => Ty::Unknown,
                    }
                }
                Ty::List(_, feature) => {
                    self.typo(
                        at,
                        format!(
                            ".{id}: {feature} is a list of elements, which has no fields; range over it"
                        ),
                    );
                    return Ty::Unknown;
                }
                Ty::Elem(kind, feature) => {
                    if let Some(m) = element_field(*kind, feature, id) {
                        self.typo(at, m);
                        return Ty::Unknown;
                    }
                    if i + 1 < idents.len() {
                        self.typo(
                            at,
                            format!(
                                ".{id}.{}: .{id} of an element of {feature} is a string, which has no fields",
                                idents[i + 1]
                            ),
                        );
                    }
                    return Ty::Unknown;
                }
                Ty::Unknown => return Ty::Unknown,
            };
            i += 1;
        }
        t
    }

    fn typo(&mut self, at: &Nodes, message: String) {
        self.typos.push(Typo {
            line: at.line(),
            col: at.col(),
            message,
        });
    }
}

/// Why `.id` is not a field of an element of `feature`, if it is not.
fn element_field(kind: Kind, feature: &str, id: &str) -> Option<String> {
    let (fields, what): (&[&str], &str) = match kind {
        Kind::Flag => (&["Name"], "a flag, has only .Name"),
        Kind::Attribute => (
            &["Name", "Value"],
            "an attribute, has only .Name and .Value",
        ),
        Kind::Instance => {
            if id == "Attributes" {
                return Some(format!(
                    ".Attributes: an element of {feature} is the map of its attributes: write .vendor, not .Attributes.vendor"
                ));
            }
            let elements = crate::features::catalog_elements(feature)?;
            if crate::features::catalog_has(feature, id) != Some(false) {
                return None;
            }
            let hint = crate::names::closest(id, elements.iter().copied())
                .map(|c| format!(" (did you mean .{c}?)"))
                .unwrap_or_default();
            return Some(format!("{feature} has no attribute {id:?}{hint}"));
        }
    };
    if fields.contains(&id) {
        return None;
    }
    let hint = crate::names::closest(id, fields.iter().copied())
        .map(|c| format!(" (did you mean .{c}?)"))
        .unwrap_or_default();
    Some(format!(".{id}: an element of {feature}, {what}{hint}"))
}

/// `{{ $x := PIPE }}`: the variable is what the pipeline gives.
fn declare(p: &PipeNode, t: Ty, vars: &mut HashMap<String, Ty>) {
    if let [v] = &p.decl[..] {
        vars.insert(v.ident[0].clone(), t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds of this project's features are the catalog's (docs/catalog.md, which
    /// tests/catalog.rs holds to the real snapshots), for every feature of `CATALOG`.
    #[test]
    fn kinds_are_the_catalogs() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/catalog.md"))
            .unwrap();
        let documented: Vec<(String, Kind)> = doc
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let feature = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
                let kind = match *cells.get(2)? {
                    "`flags`" => Kind::Flag,
                    "`attributes`" => Kind::Attribute,
                    "`instances`" => Kind::Instance,
                    _ => return None,
                };
                Some((feature.to_string(), kind))
            })
            .collect();
        let ours: Vec<(String, Kind)> = crate::features::CATALOG
            .iter()
            .map(|(f, _)| {
                (
                    f.to_string(),
                    kind_of(f).expect("every catalog feature has a kind"),
                )
            })
            .collect();
        assert_eq!(ours, documented);
    }

    fn typos(source: &str) -> Vec<(usize, usize, String)> {
        let mut t = gtmpl_ng::Template::default();
        t.parse(source).unwrap();
        check(t.root("").unwrap())
            .0
            .into_iter()
            .map(|t| (t.line, t.col, t.message))
            .collect()
    }

    /// Dot through `range`, `with`, `if`, variables and `$`; nothing is said where dot is not
    /// known (a function's result, `index`, an unknown feature).
    #[test]
    fn dot_is_followed_through_the_template() {
        assert_eq!(
            typos(
                "{{ range .pci.device }}{{ .vendor }}{{ end }}{{ range .kernel.loadedmodule }}{{ .Name }}{{ end }}"
            ),
            vec![]
        );
        assert_eq!(
            typos("{{ range $i, $d := .gpu.device }}{{ $d.vendr }}{{ $.gpu.node }}{{ end }}"),
            vec![(
                1,
                37,
                "gpu.device has no attribute \"vendr\" (did you mean .vendor?)".to_string()
            )]
        );
        assert_eq!(
            typos("{{ range .pci.device }}{{ if .class }}{{ .Name }}{{ end }}{{ end }}"),
            vec![(1, 42, "pci.device has no attribute \"Name\"".to_string())]
        );
        assert_eq!(
            typos("{{ with $x := .gpu.node }}{{ range $x }}{{ .Nme }}{{ end }}{{ end }}"),
            vec![(1, 44, ".Nme: an element of gpu.node, an attribute, has only .Name and .Value (did you mean .Name?)".to_string())]
        );
        // Unknown: a function's result, index, an element of an unknown feature.
        assert_eq!(
            typos(
                "{{ range (index .pci.device 0) }}{{ .x }}{{ end }}{{ range .cpu.cpuid }}{{ .Value }}{{ end }}{{ range .my.thing }}{{ .zz }}{{ end }}"
            ),
            vec![]
        );
        // The features a template reads from its root, in order, through `$` too.
        let mut t = gtmpl_ng::Template::default();
        t.parse("{{ range .a.b }}{{ $.c.d }}{{ end }}{{ .a.b }}")
            .unwrap();
        assert_eq!(
            check(t.root("").unwrap()).1,
            vec![("a".into(), "b".into()), ("c".into(), "d".into())]
        );
    }
}
