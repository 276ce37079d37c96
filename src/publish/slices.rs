//! Reading DRA from the API server, as the node sink reads the Node: this node's ResourceSlices
//! (field selector `spec.nodeName`), the DeviceClasses and the Node's allocatable, each by one
//! bounded request, as `resource.k8s.io/v1` where served and `v1beta2` otherwise. Nothing is
//! written. The daemon lists them, then watches the slices (`watch::watch_dra`).

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams};
use kube::core::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use super::error::bounded;
use crate::dra::DraObjects;

/// The API group of DRA.
pub const GROUP: &str = "resource.k8s.io";

/// The version of `resource.k8s.io` to read ResourceSlices and DeviceClasses at: `v1` where
/// served, `v1beta2` otherwise (the shapes `dra::objects` reads alike); `None`: the cluster
/// serves neither, so no DRA facts.
pub async fn version(client: &Client, timeout: Duration) -> Result<Option<&'static str>, String> {
    serving(client, "resourceslices", timeout).await
}

/// The version of `resource.k8s.io` that serves `plural` (`v1`, else `v1beta2`), asked of the
/// API server's discovery: `None` where neither does (no DRA, or a kind whose feature gate is
/// off, as `DeviceTaintRule`'s was before 1.37). Every DRA kind the agent reads or writes is
/// found this one way.
pub async fn serving(
    client: &Client,
    plural: &str,
    timeout: Duration,
) -> Result<Option<&'static str>, String> {
    for v in ["v1", "v1beta2"] {
        let group_version = format!("{GROUP}/{v}");
        let what = format!("list the resources of {group_version}");
        match bounded(
            &what,
            timeout,
            client.list_api_group_resources(&group_version),
        )
        .await
        {
            Ok(list) if list.resources.iter().any(|r| r.name == plural) => return Ok(Some(v)),
            Ok(_) => {}
            // A server without the group (or without API groups at all) answers 404.
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.message),
        }
    }
    Ok(None)
}

/// The API of one kind of `resource.k8s.io` at `version`.
pub fn api(client: &Client, version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::all_with(client.clone(), &resource)
}

/// `spec.nodeName=<node>`: the field selector kube-apiserver indexes for ResourceSlices.
pub fn node_selector(node: &str) -> String {
    format!("spec.nodeName={node}")
}

/// This node's slices, the DeviceClasses and the Node's allocatable, with the slice list's
/// resourceVersion (where a watch of the slices starts).
pub async fn read(
    client: &Client,
    node: &str,
    version: &str,
    timeout: Duration,
) -> Result<(DraObjects, String), String> {
    let slices = bounded(
        "list this node's ResourceSlices",
        timeout,
        api(client, version, "ResourceSlice", "resourceslices")
            .list(&ListParams::default().fields(&node_selector(node))),
    )
    .await?;
    let classes = bounded(
        "list the DeviceClasses",
        timeout,
        api(client, version, "DeviceClass", "deviceclasses").list(&ListParams::default()),
    )
    .await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let n = bounded(&format!("GET node {node}"), timeout, nodes.get(node)).await?;
    let mut items: Vec<Value> = Vec::new();
    for (kind, list) in [
        ("ResourceSlice", &slices.items),
        ("DeviceClass", &classes.items),
    ] {
        for o in list {
            // A list's items carry no kind.
            let mut v = serde_json::to_value(o).map_err(|e| e.to_string())?;
            v["kind"] = json!(kind);
            items.push(v);
        }
    }
    let mut v = serde_json::to_value(&n).map_err(|e| e.to_string())?;
    v["kind"] = json!("Node");
    items.push(v);
    let objects = crate::dra::objects::from_json(
        &format!("the API server's {GROUP}/{version}"),
        &json!({"kind": "List", "items": items}),
    )
    .map_err(|e| e.to_string())?;
    let rv = slices.metadata.resource_version.unwrap_or_default();
    Ok((objects, rv))
}
