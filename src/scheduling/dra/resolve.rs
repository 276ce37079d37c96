//! The pod's `resourceClaims`, resolved to the claims and templates they name.

use super::{DeviceId, PodClaimSpec, Why};
use crate::scheduling::draobjects::DraSet;
use crate::scheduling::objects::PodClaim;

/// The pod's claims, resolved against the claims and templates of the workload's file and of
/// the DRA source: a claim by its name (in the pod's namespace), a template by its name.
pub fn resolve(
    pod_claims: &[PodClaim],
    namespace: Option<&str>,
    sources: &[&DraSet],
) -> Vec<Result<PodClaimSpec, (String, Box<Why>)>> {
    let ns_ok = |ns: &Option<String>| match (ns.as_deref(), namespace) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    pod_claims
        .iter()
        .map(|pc| {
            if let Some(name) = &pc.claim_name {
                let found = sources
                    .iter()
                    .flat_map(|s| &s.claims)
                    .find(|c| c.name == *name && ns_ok(&c.namespace));
                match found {
                    Some(c) => Ok(PodClaimSpec {
                        name: pc.name.clone(),
                        source: format!("ResourceClaim {name}"),
                        spec: c.spec.clone(),
                        allocated: c.allocation.as_ref().map(|a| {
                            a.iter()
                                .map(|d| DeviceId {
                                    driver: d.driver.clone(),
                                    pool: d.pool.clone(),
                                    device: d.device.clone(),
                                })
                                .collect()
                        }),
                    }),
                    None => Err((
                        pc.name.clone(),
                        Box::new(Why::Missing(format!("ResourceClaim {name}"))),
                    )),
                }
            } else if let Some(name) = &pc.template_name {
                let found = sources
                    .iter()
                    .flat_map(|s| &s.templates)
                    .find(|t| t.name == *name && ns_ok(&t.namespace));
                match found {
                    Some(t) => Ok(PodClaimSpec {
                        name: pc.name.clone(),
                        source: format!("ResourceClaimTemplate {name}"),
                        spec: t.spec.clone(),
                        allocated: None,
                    }),
                    None => Err((
                        pc.name.clone(),
                        Box::new(Why::Missing(format!("ResourceClaimTemplate {name}"))),
                    )),
                }
            } else {
                Err((
                    pc.name.clone(),
                    Box::new(Why::Missing(
                        "a resourceClaimName or resourceClaimTemplateName".into(),
                    )),
                ))
            }
        })
        .collect()
}
