//! The `resource.k8s.io` objects gpu-labeler reads, reduced to what it looks at: ResourceSlices
//! (`v1`, and the `v1beta1` shape whose device attributes sit under `basic`, and `v1beta2`),
//! DeviceClasses (their `extendedResourceName`) and the Node's allocatable. Read from a file
//! (`--dra FILE`: a `kubectl get ... -o json` List or several YAML documents) or from the API
//! server's JSON, by one reader whose errors name the file, line and column and the field.

use std::collections::BTreeMap;

use crate::kobject::{ObjectError, Quantity, Reader, Res, documents, join};
use crate::yaml::document::{self, Node, Pos, Val};

/// A device attribute's typed value (`resource.k8s.io`'s DeviceAttribute: exactly one of `int`,
/// `bool`, `string`, `version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attr {
    Int(i64),
    Bool(bool),
    Str(String),
    /// A semantic version, as written (`535.161.8`).
    Version(String),
}

impl std::fmt::Display for Attr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attr::Int(i) => write!(f, "{i}"),
            Attr::Bool(b) => write!(f, "{b}"),
            Attr::Str(s) | Attr::Version(s) => f.write_str(s),
        }
    }
}

/// One device of a slice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    /// Attribute name as written (`productName`, `resource.kubernetes.io/pciBusID`) -> value.
    pub attributes: BTreeMap<String, Attr>,
    /// Capacity name -> quantity (`memory`).
    pub capacity: BTreeMap<String, Quantity>,
}

impl Device {
    /// The attribute `name` in the driver's own domain: written bare (`productName`) or with
    /// the driver's name as its domain (`gpu.nvidia.com/productName`), as the API resolves it.
    pub fn attr(&self, driver: &str, name: &str) -> Option<&Attr> {
        self.attributes
            .get(name)
            .or_else(|| self.attributes.get(&format!("{driver}/{name}")))
    }

    /// A string attribute (or a version's text).
    pub fn text(&self, driver: &str, name: &str) -> Option<&str> {
        match self.attr(driver, name)? {
            Attr::Str(s) | Attr::Version(s) => Some(s),
            _ => None,
        }
    }

    pub fn int(&self, driver: &str, name: &str) -> Option<i64> {
        match self.attr(driver, name)? {
            Attr::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// A capacity written bare or in the driver's domain.
    pub fn capacity(&self, driver: &str, name: &str) -> Option<&Quantity> {
        self.capacity
            .get(name)
            .or_else(|| self.capacity.get(&format!("{driver}/{name}")))
    }
}

/// One ResourceSlice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slice {
    pub name: String,
    pub driver: String,
    /// `spec.nodeName` (`None`: a slice for several nodes or for none, such as a network
    /// attached device's).
    pub node_name: Option<String>,
    pub pool: String,
    pub generation: i64,
    pub devices: Vec<Device>,
}

/// One DeviceClass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceClass {
    pub name: String,
    /// `spec.extendedResourceName` (KEP-5004): pods asking for this extended resource get a
    /// device of this class.
    pub extended_resource_name: Option<String>,
    /// The CEL expressions of `spec.selectors`.
    pub selectors: Vec<String>,
}

/// A Node's name and allocatable resources.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeResources {
    pub name: String,
    pub allocatable: BTreeMap<String, Quantity>,
}

/// Everything of DRA one file or one cluster holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraObjects {
    pub slices: Vec<Slice>,
    pub classes: Vec<DeviceClass>,
    pub nodes: Vec<NodeResources>,
}

impl DraObjects {
    /// The slices published for `node` (`spec.nodeName`), as the daemon's field selector
    /// picks them.
    pub fn slices_of<'a>(&'a self, node: &str) -> Vec<&'a Slice> {
        self.slices
            .iter()
            .filter(|s| s.node_name.as_deref() == Some(node))
            .collect()
    }

    /// The node names the slices are for, each once, sorted.
    pub fn slice_nodes(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .slices
            .iter()
            .filter_map(|s| s.node_name.as_deref())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    pub fn node(&self, name: &str) -> Option<&NodeResources> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// The kinds a DRA file may hold besides these (read by `match`, not here): left alone.
const OTHER_DRA_KINDS: &[&str] = &["ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"];

/// Reads a DRA file: `kind: List` (`kubectl get resourceslices,deviceclasses -o json`) or
/// documents of ResourceSlices, DeviceClasses and Nodes.
pub fn read(source: &str, text: &str) -> Res<DraObjects> {
    let docs = if document::looks_like_json(text) {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) => vec![document::from_json(&v)],
            Err(_) => documents(source, text)?,
        }
    } else {
        documents(source, text)?
    };
    let reader = Reader { source };
    let mut out = DraObjects::default();
    for doc in &docs {
        reader.dra_object(doc, "", &mut out)?;
    }
    Ok(out)
}

/// Reads the objects of an API server's answer (a `ResourceSliceList`, or one object).
pub fn from_json(source: &str, value: &serde_json::Value) -> Res<DraObjects> {
    let reader = Reader { source };
    let mut out = DraObjects::default();
    reader.dra_object(&document::from_json(value), "", &mut out)?;
    Ok(out)
}

impl Reader<'_> {
    fn dra_object(&self, doc: &Node, path: &str, out: &mut DraObjects) -> Res<()> {
        if doc.val == Val::Null {
            return Ok(());
        }
        let kind = self.kind(doc, path)?;
        if kind == "List" || kind.ends_with("List") {
            let here = join(path, "items");
            if let Some(items) = self.field(doc, path, "items")? {
                for (i, item) in self.seq(items, &here)?.iter().enumerate() {
                    self.dra_object(item, &format!("{here}[{i}]"), out)?;
                }
            }
            return Ok(());
        }
        let name = self.name(doc, path)?;
        match kind.as_str() {
            "ResourceSlice" => out.slices.push(self.slice(doc, path, name)?),
            "DeviceClass" => out.classes.push(self.class(doc, path, name)?),
            "Node" => out.nodes.push(self.node_resources(doc, path, name)?),
            k if OTHER_DRA_KINDS.contains(&k) => {}
            _ => {
                let at = self.field(doc, path, "kind")?.unwrap_or(doc);
                return Err(self.err(
                    at,
                    &join(path, "kind"),
                    format!("{kind} is not a ResourceSlice, DeviceClass or Node"),
                ));
            }
        }
        Ok(())
    }

    fn name(&self, doc: &Node, path: &str) -> Res<String> {
        let here = join(path, "metadata");
        match self.field(doc, path, "metadata")? {
            Some(meta) => Ok(self.opt_string(meta, &here, "name")?.unwrap_or_default()),
            None => Ok(String::new()),
        }
    }

    fn spec<'n>(&self, doc: &'n Node, path: &str, kind: &str) -> Res<&'n Node> {
        self.field(doc, path, "spec")?
            .ok_or_else(|| self.err(doc, path, format!("a {kind} without spec")))
    }

    fn slice(&self, doc: &Node, path: &str, name: String) -> Res<Slice> {
        let spec = self.spec(doc, path, "ResourceSlice")?;
        let sp = join(path, "spec");
        let driver = self
            .opt_string(spec, &sp, "driver")?
            .ok_or_else(|| self.err(spec, &sp, "a ResourceSlice without spec.driver"))?;
        let (pool, generation) = match self.field(spec, &sp, "pool")? {
            Some(p) => {
                let here = join(&sp, "pool");
                (
                    self.opt_string(p, &here, "name")?.unwrap_or_default(),
                    match self.field(p, &here, "generation")? {
                        Some(g) => self.integer(g, &join(&here, "generation"))?,
                        None => 0,
                    },
                )
            }
            None => (String::new(), 0),
        };
        let mut devices = Vec::new();
        if let Some(list) = self.field(spec, &sp, "devices")? {
            let here = join(&sp, "devices");
            for (i, d) in self.seq(list, &here)?.iter().enumerate() {
                devices.push(self.device(d, &format!("{here}[{i}]"))?);
            }
        }
        Ok(Slice {
            name,
            driver,
            node_name: self.opt_string(spec, &sp, "nodeName")?,
            pool,
            generation,
            devices,
        })
    }

    fn device(&self, d: &Node, path: &str) -> Res<Device> {
        let name = self
            .opt_string(d, path, "name")?
            .ok_or_else(|| self.err(d, path, "a device without a name"))?;
        // v1beta1 keeps attributes and capacity under `basic`.
        let (body, bp) = match self.field(d, path, "basic")? {
            Some(b) => (b, join(path, "basic")),
            None => (d, path.to_string()),
        };
        let mut device = Device {
            name,
            ..Device::default()
        };
        if let Some(attrs) = self.field(body, &bp, "attributes")? {
            let here = join(&bp, "attributes");
            for (k, v) in self.map(attrs, &here)? {
                let key = k
                    .key_text()
                    .ok_or_else(|| self.err(k, &here, "a key must be a string"))?;
                let value = self.attribute(v, &join(&here, &key))?;
                device.attributes.insert(key, value);
            }
        }
        if let Some(cap) = self.field(body, &bp, "capacity")? {
            let here = join(&bp, "capacity");
            for (k, v) in self.map(cap, &here)? {
                let key = k
                    .key_text()
                    .ok_or_else(|| self.err(k, &here, "a key must be a string"))?;
                let at = join(&here, &key);
                // v1 and v1beta2: `{value: 80Gi}`; v1beta1 also took the bare quantity.
                let q = match &v.val {
                    Val::Map(_) => self
                        .field(v, &at, "value")?
                        .ok_or_else(|| self.err(v, &at, "a capacity without value"))?,
                    _ => v,
                };
                device.capacity.insert(key, self.quantity(q, &at)?);
            }
        }
        Ok(device)
    }

    fn attribute(&self, v: &Node, path: &str) -> Res<Attr> {
        let entries = self.map(v, path)?;
        let mut found = None;
        for (k, val) in entries {
            if val.val == Val::Null {
                continue;
            }
            let key = k.key_text().unwrap_or_default();
            let here = join(path, &key);
            let attr = match key.as_str() {
                "int" => Attr::Int(self.integer(val, &here)?),
                "bool" => match &val.val {
                    Val::Bool(b) => Attr::Bool(*b),
                    other => {
                        return Err(self.err(
                            val,
                            &here,
                            format!("expected a boolean, found {}", other.kind()),
                        ));
                    }
                },
                "string" => Attr::Str(self.string(val, &here)?),
                "version" => Attr::Version(self.string(val, &here)?),
                other => {
                    return Err(self.err(
                        k,
                        &here,
                        format!(
                            "unknown attribute type {other:?} (one of int, bool, string, version)"
                        ),
                    ));
                }
            };
            if found.is_some() {
                return Err(self.err(v, path, "an attribute with more than one value"));
            }
            found = Some(attr);
        }
        found.ok_or_else(|| self.err(v, path, "an attribute without a value"))
    }

    fn integer(&self, v: &Node, path: &str) -> Res<i64> {
        match &v.val {
            Val::Num(n) => n
                .parse()
                .map_err(|_| self.err(v, path, format!("{n} is not a 64-bit integer"))),
            other => Err(self.err(
                v,
                path,
                format!("expected an integer, found {}", other.kind()),
            )),
        }
    }

    fn quantity(&self, v: &Node, path: &str) -> Res<Quantity> {
        let text = match &v.val {
            Val::Str(s) | Val::Num(s) => s.clone(),
            other => {
                return Err(self.err(
                    v,
                    path,
                    format!("expected a quantity, found {}", other.kind()),
                ));
            }
        };
        let milli = crate::validate::quantity_milli(&text)
            .map_err(|e| self.err(v, path, format!("{text:?}: {e}")))?;
        Ok(Quantity { milli })
    }

    fn class(&self, doc: &Node, path: &str, name: String) -> Res<DeviceClass> {
        let mut class = DeviceClass {
            name,
            ..DeviceClass::default()
        };
        let Some(spec) = self.field(doc, path, "spec")? else {
            return Ok(class);
        };
        let sp = join(path, "spec");
        class.extended_resource_name = self.opt_string(spec, &sp, "extendedResourceName")?;
        if let Some(sel) = self.field(spec, &sp, "selectors")? {
            let here = join(&sp, "selectors");
            for (i, s) in self.seq(sel, &here)?.iter().enumerate() {
                let at = format!("{here}[{i}]");
                if let Some(cel) = self.field(s, &at, "cel")? {
                    let cp = join(&at, "cel");
                    if let Some(e) = self.opt_string(cel, &cp, "expression")? {
                        class.selectors.push(e);
                    }
                }
            }
        }
        Ok(class)
    }

    fn node_resources(&self, doc: &Node, path: &str, name: String) -> Res<NodeResources> {
        let mut node = NodeResources {
            name,
            ..NodeResources::default()
        };
        if let Some(status) = self.field(doc, path, "status")? {
            let here = join(path, "status");
            if let Some(a) = self.field(status, &here, "allocatable")? {
                node.allocatable = self.quantities(a, &join(&here, "allocatable"))?;
            }
        }
        Ok(node)
    }
}

/// An error of a DRA file that is not about one field (no slice for the node asked for).
pub fn file_error(source: &str, message: impl Into<String>) -> ObjectError {
    ObjectError {
        source: source.to_string(),
        pos: Pos::default(),
        path: String::new(),
        message: message.into(),
    }
}
