//! The nodes of a cluster, listed through the API server (read-only: `list nodes`), a page of
//! 500 at a time as kubectl does, every request bounded by the timeout.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;

use super::objects::{NodeInfo, nodes_of};
use crate::error::Error;
use crate::publish::client::block_on_client;
use crate::yaml::document::from_json;

/// Nodes a page; kubectl's own chunk size.
const PAGE: u32 = 500;
/// A page of 500 Nodes with all their labels and images stays far below this.
const MAX_PAGE_BYTES: usize = 64 << 20;

/// Lists every Node. Errors are runtime errors naming the server's answer.
pub fn list_nodes(kubeconfig: Option<&Path>, timeout: Duration) -> Result<Vec<NodeInfo>, Error> {
    block_on_client(kubeconfig, timeout, MAX_PAGE_BYTES, |client| async move {
        let api: Api<Node> = Api::all(client);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut params = ListParams::default().limit(PAGE);
            if let Some(t) = &token {
                params = params.continue_token(t);
            }
            let page = tokio::time::timeout(timeout, api.list(&params))
                .await
                .map_err(|_| {
                    Error::Runtime(format!("listing nodes: no answer within {timeout:?}"))
                })?
                .map_err(|e| {
                    Error::Runtime(format!(
                        "listing nodes: {}",
                        crate::publish::node::error_chain(&e)
                    ))
                })?;
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
                return Ok(out);
            }
        }
    })
}
