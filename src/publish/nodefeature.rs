//! The `nodefeature` sink: an NFD `NodeFeature` (`nfd.k8s-sigs.io/v1alpha1`) named after the node,
//! with the `nfd.node.kubernetes.io/node-name` label, our features and our labels. nfd-master
//! turns it into Node labels, so clusters that already run NFD keep one writer of Node labels.
//!
//! Written by server-side apply (field manager `gpu-labeler`), only when the object would change:
//! the sink remembers what it applied, and after a start reads the object once to compare.
//!
//! The object is owned by its Node (an ownerReference to the Node's uid, read once), not by the
//! pod: deleting or replacing the pod never removes it, and so never the labels nfd-master
//! derives from it; deleting the Node lets the garbage collector remove it (NFD issue 2039).

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::error::{PublishError, bounded};
use super::node::FIELD_MANAGER;
use super::outcome::{LabelDiff, Outcome, OutcomeKind};
use crate::features::FeatureSet;
use crate::output::{LabelMap, NodeOutput};

pub const GROUP: &str = "nfd.k8s-sigs.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "NodeFeature";
/// The label nfd-master reads to find the node a NodeFeature belongs to.
pub const NODE_NAME_LABEL: &str = "nfd.node.kubernetes.io/node-name";
/// NFD's namespace, used when `POD_NAMESPACE` is not set.
pub const DEFAULT_NAMESPACE: &str = "node-feature-discovery";

fn resource() -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.into(),
        plural: "nodefeatures".into(),
    }
}

/// The whole object we apply; `owner_uid` is the Node's, when it could be read.
pub fn object(
    node: &str,
    namespace: &str,
    owner_uid: Option<&str>,
    features: &FeatureSet,
    labels: &LabelMap,
) -> Value {
    let mut o = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {
            "name": node,
            "namespace": namespace,
            "labels": { NODE_NAME_LABEL: node },
        },
        "spec": { "features": features, "labels": labels },
    });
    if let Some(uid) = owner_uid {
        o["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]);
    }
    o
}

/// Whether `obj` names the Node `uid` as its owner.
fn owned_by(obj: &DynamicObject, uid: Option<&str>) -> bool {
    let refs = obj.metadata.owner_references.as_deref().unwrap_or_default();
    match uid {
        Some(uid) => refs.iter().any(|r| r.kind == "Node" && r.uid == uid),
        None => true,
    }
}

/// What an existing object holds, when it is ours in shape: (features, labels).
fn read_spec(obj: &DynamicObject, node: &str) -> Option<(FeatureSet, LabelMap)> {
    let label_ok = obj
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODE_NAME_LABEL))
        .is_some_and(|v| v == node);
    if !label_ok {
        return None;
    }
    let spec = obj.data.get("spec")?;
    let features: FeatureSet =
        serde_json::from_value(spec.get("features").cloned().unwrap_or(json!({}))).ok()?;
    let labels: LabelMap =
        serde_json::from_value(spec.get("labels").cloned().unwrap_or(json!({}))).ok()?;
    Some((features, labels))
}

pub struct NodeFeatureSink {
    api: Api<DynamicObject>,
    nodes: Api<k8s_openapi::api::core::v1::Node>,
    /// The Node's uid for the ownerReference: `None` until read, `Some(None)` when it could not
    /// be (said once; the object is then published without an owner).
    owner_uid: Option<Option<String>>,
    node: String,
    namespace: String,
    timeout: Duration,
    /// What the object holds (after our last apply, or as read); `None` until known. The inner
    /// `None`: the object does not exist, or is not in our shape.
    known: Option<Option<(FeatureSet, LabelMap)>>,
}

impl NodeFeatureSink {
    pub fn new(
        client: Client,
        node: impl Into<String>,
        namespace: impl Into<String>,
        timeout: Duration,
    ) -> NodeFeatureSink {
        let namespace = namespace.into();
        NodeFeatureSink {
            nodes: Api::all(client.clone()),
            owner_uid: None,
            api: Api::namespaced_with(client, &namespace, &resource()),
            node: node.into(),
            namespace,
            timeout,
            known: None,
        }
    }

    async fn read(&self) -> Result<Option<(FeatureSet, LabelMap)>, PublishError> {
        let what = format!("GET nodefeature {}/{}", self.namespace, self.node);
        let uid = self.owner_uid.clone().flatten();
        let obj = bounded(&what, self.timeout, self.api.get_opt(&self.node)).await?;
        // An object without our owner is re-applied once, to gain it.
        Ok(obj
            .filter(|o| owned_by(o, uid.as_deref()))
            .and_then(|o| read_spec(&o, &self.node)))
    }

    /// The Node's uid, read once. A failure (no `get nodes` permission, say) is reported and
    /// the object published without an owner; a timeout or a 5xx is tried again next cycle.
    async fn owner(&mut self) -> Result<Option<String>, PublishError> {
        if let Some(uid) = &self.owner_uid {
            return Ok(uid.clone());
        }
        let what = format!("GET node {} (the NodeFeature's owner)", self.node);
        let uid = match bounded(&what, self.timeout, self.nodes.get(&self.node)).await {
            Ok(n) => n.metadata.uid,
            Err(e) if e.reason.transient() => return Err(e),
            Err(e) => {
                tracing::warn!("{e}; the NodeFeature is published without an owner");
                None
            }
        };
        self.owner_uid = Some(uid.clone());
        Ok(uid)
    }

    pub async fn publish(
        &mut self,
        features: &FeatureSet,
        output: &NodeOutput,
        dry_run: bool,
    ) -> Result<Outcome, PublishError> {
        let owner = self.owner().await?;
        let current = match self.known.take() {
            Some(k) => k,
            None => self.read().await?,
        };
        let want = (features.clone(), output.labels.clone());
        let old_labels = current.as_ref().map(|c| c.1.clone()).unwrap_or_default();
        if current.as_ref() == Some(&want) {
            self.known = Some(current);
            return Ok(Outcome::unchanged());
        }
        let diff = LabelDiff::between(&old_labels, &want.1);
        if dry_run {
            // Remember the wish so the same diff is not logged every cycle.
            self.known = Some(Some(want));
            return Ok(Outcome::of(OutcomeKind::DryRun, diff));
        }
        let what = format!("apply nodefeature {}/{}", self.namespace, self.node);
        let body = object(
            &self.node,
            &self.namespace,
            owner.as_deref(),
            features,
            &output.labels,
        );
        let params = PatchParams::apply(FIELD_MANAGER);
        let patch = Patch::Apply(&body);
        let call = self.api.patch(&self.node, &params, &patch);
        let result = bounded(&what, self.timeout, call).await.map(|_| ());
        match result {
            Ok(()) => {
                self.known = Some(Some(want));
                Ok(Outcome::of(OutcomeKind::Written, diff))
            }
            Err(e) => {
                // Unknown state after a failure: read again next time.
                self.known = None;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_has_nfds_shape() {
        let mut f = FeatureSet::default();
        f.insert_attribute("gpu.node", "count", "8");
        let labels: LabelMap = [(
            "feature.node.kubernetes.io/gpu.count".to_string(),
            "8".to_string(),
        )]
        .into_iter()
        .collect();
        assert_eq!(
            object("n1", "nfd", Some("4f1c"), &f, &labels),
            json!({
                "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
                "kind": "NodeFeature",
                "metadata": {"name": "n1", "namespace": "nfd",
                             "labels": {"nfd.node.kubernetes.io/node-name": "n1"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                                  "name": "n1", "uid": "4f1c"}]},
                "spec": {
                    "features": {"flags": {}, "attributes": {"gpu.node": {"elements": {"count": "8"}}},
                                 "instances": {}},
                    "labels": {"feature.node.kubernetes.io/gpu.count": "8"}
                }
            })
        );
    }

    #[test]
    fn an_object_of_another_node_is_not_ours() {
        let obj: DynamicObject = serde_json::from_value(object(
            "n2",
            "nfd",
            None,
            &FeatureSet::default(),
            &LabelMap::new(),
        ))
        .unwrap();
        assert_eq!(read_spec(&obj, "n1"), None);
        assert_eq!(
            read_spec(&obj, "n2"),
            Some((FeatureSet::default(), LabelMap::new()))
        );
    }
}
