//! The nodes of a cluster, listed through the API server (read-only: `list nodes`), a page of
//! 500 at a time as kubectl does, and the DeviceTaintRules on their devices, every request
//! bounded by the timeout.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use super::objects::{NodeInfo, attach_device_taint_rules, nodes_of};
use crate::error::Error;
use crate::publish::client::block_on_client;
use crate::publish::error::bounded;
use crate::yaml::document::from_json;

/// Nodes a page; kubectl's own chunk size.
const PAGE: u32 = 500;
/// A page of 500 Nodes with all their labels and images stays far below this.
const MAX_PAGE_BYTES: usize = 64 << 20;

/// Lists every Node. Errors are runtime errors naming the server's answer.
pub fn list_nodes(kubeconfig: Option<&Path>, timeout: Duration) -> Result<Vec<NodeInfo>, Error> {
    block_on_client(kubeconfig, timeout, MAX_PAGE_BYTES, |client| async move {
        let api: Api<Node> = Api::all(client.clone());
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(PAGE);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = bounded("listing nodes", timeout, api.list(&params))
                .await
                .map_err(|e| Error::Runtime(e.message))?;
            let trees: Vec<_> = page
                .items
                .iter()
                .filter_map(|n| serde_json::to_value(n).ok())
                .map(|mut v| {
                    // The typed list leaves out each item's kind.
                    v["kind"] = "Node".into();
                    from_json(&v)
                })
                .collect();
            out.extend(
                nodes_of("the API server's node list", &trees)
                    .map_err(|e| Error::Runtime(e.to_string()))?,
            );
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
        }
        // The DRA device taints on the nodes' devices (GPUs taken out of allocation): named by
        // `match`; a cluster that serves none has none, one that does not answer costs only them.
        match device_taint_rules(&client, timeout).await {
            Ok(trees) => {
                attach_device_taint_rules("the API server's DeviceTaintRules", &mut out, &trees)
                    .map_err(|e| Error::Runtime(e.to_string()))?
            }
            Err(e) => eprintln!(
                "warning: cannot list DeviceTaintRules ({e}); GPUs tainted out of DRA allocation \
                 are not named"
            ),
        }
        Ok(out)
    })
}

/// Every `DeviceTaintRule`, as `resource.k8s.io/v1` where served, else `v1beta2`; none where
/// neither is.
async fn device_taint_rules(
    client: &kube::Client,
    timeout: Duration,
) -> Result<Vec<crate::yaml::document::Node>, String> {
    for version in ["v1", "v1beta2"] {
        let resource = kube::core::ApiResource {
            group: "resource.k8s.io".into(),
            version: version.into(),
            api_version: format!("resource.k8s.io/{version}"),
            kind: "DeviceTaintRule".into(),
            plural: "devicetaintrules".into(),
        };
        let api: Api<kube::core::DynamicObject> = Api::all_with(client.clone(), &resource);
        let what = format!("resource.k8s.io/{version}");
        match bounded(&what, timeout, api.list(&ListParams::default())).await {
            Ok(list) => {
                return Ok(list
                    .items
                    .iter()
                    .filter_map(|o| serde_json::to_value(o).ok())
                    .map(|v| from_json(&v))
                    .collect());
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.message),
        }
    }
    Ok(Vec::new())
}

/// The DRA objects `match` allocates from: ResourceSlices, DeviceClasses, ResourceClaims (for
/// the devices already allocated, and the claims pods name) and ResourceClaimTemplates, each as
/// `resource.k8s.io/v1` where served, else `v1beta2`, else `v1beta1`; a cluster that serves none
/// has none. Read-only (`list`), with the user's kubeconfig.
pub fn list_dra(
    kubeconfig: Option<&Path>,
    timeout: Duration,
) -> Result<super::draobjects::DraSet, Error> {
    block_on_client(kubeconfig, timeout, MAX_PAGE_BYTES, |client| async move {
        let mut docs = Vec::new();
        for (kind, plural) in [
            ("ResourceSlice", "resourceslices"),
            ("DeviceClass", "deviceclasses"),
            ("ResourceClaim", "resourceclaims"),
            ("ResourceClaimTemplate", "resourceclaimtemplates"),
        ] {
            docs.extend(
                list_resource(&client, kind, plural, timeout)
                    .await
                    .map_err(|e| Error::Runtime(format!("listing {plural}: {e}")))?,
            );
        }
        super::draobjects::read_docs("the API server's DRA objects", &docs)
            .map_err(|e| Error::Runtime(e.to_string()))
    })
}

/// Every object of one `resource.k8s.io` kind, a page at a time, in the newest version served.
async fn list_resource(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    timeout: Duration,
) -> Result<Vec<crate::yaml::document::Node>, String> {
    'versions: for version in ["v1", "v1beta2", "v1beta1"] {
        let resource = kube::core::ApiResource {
            group: "resource.k8s.io".into(),
            version: version.into(),
            api_version: format!("resource.k8s.io/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<kube::core::DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(PAGE);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let what = format!("resource.k8s.io/{version}");
            match bounded(&what, timeout, api.list(&params)).await {
                Ok(list) => {
                    out.extend(
                        list.items
                            .iter()
                            .filter_map(|o| serde_json::to_value(o).ok())
                            .map(|mut v| {
                                v["kind"] = kind.into();
                                from_json(&v)
                            }),
                    );
                    token = list.metadata.continue_.filter(|t| !t.is_empty());
                    if token.is_none() {
                        return Ok(out);
                    }
                }
                Err(e) if e.is_not_found() => continue 'versions,
                Err(e) => return Err(e.message),
            }
        }
    }
    Ok(Vec::new())
}
