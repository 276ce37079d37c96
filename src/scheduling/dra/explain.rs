//! Why a claim cannot be allocated on a node: after the allocator's search fails, the first
//! claim that fails (with the claims before it) and, for it, the first request whose candidate
//! devices run out, stage by stage (the selectors, `count`, device taints, devices already
//! allocated), then its constraints, then the pod's other claims.

use super::*;

impl Dra<'_> {
    /// Names the first claim that fails, and why.
    pub(super) fn explain(
        &self,
        node: &NodeInfo,
        pools: &[Pool],
        claims: &[&PodClaimSpec],
        slots: &[usize],
        verdicts: &mut [ClaimVerdict],
    ) {
        // The first prefix of claims that cannot be allocated.
        let k = (1..claims.len())
            .find(|&n| {
                !matches!(
                    self.allocate(node, pools, &claims[..n], false),
                    Outcome::Done(_)
                )
            })
            .unwrap_or(claims.len())
            - 1;
        let claim = claims[k];
        let devices = node_devices(pools, self);
        let mut requests = Vec::new();
        let mut first: Option<Why> = None;
        for r in &claim.spec.requests {
            let subs = r.alternatives();
            let mut sub_whys = Vec::new();
            for (req, parent) in subs {
                let name = match parent {
                    Some(p) => format!("{p}/{}", req.name),
                    None => req.name.clone(),
                };
                let why = self.request_why(node, &devices, req);
                sub_whys.push(RequestVerdict {
                    name,
                    devices: Vec::new(),
                    why,
                });
            }
            // A firstAvailable request fails when each subrequest does: named by its first.
            let failed = sub_whys.iter().all(|s| s.why.is_some());
            if failed && first.is_none() {
                first = sub_whys.first().and_then(|s| s.why.clone());
            }
            requests.extend(sub_whys);
        }
        let why = match first {
            Some(w) => w,
            None => {
                if k > 0
                    && matches!(
                        self.allocate(node, pools, &[claim], false),
                        Outcome::Done(_)
                    )
                {
                    Why::OtherClaims
                } else if !claim.spec.constraints.is_empty()
                    && matches!(self.allocate(node, pools, &[claim], true), Outcome::Done(_))
                {
                    let c = &claim.spec.constraints[0];
                    let failing = claim
                        .spec
                        .constraints
                        .iter()
                        .find(|c| {
                            let mut only = (*claim).clone();
                            only.spec.constraints = vec![(*c).clone()];
                            !matches!(
                                self.allocate(node, pools, &[&only], false),
                                Outcome::Done(_)
                            )
                        })
                        .unwrap_or(c);
                    Why::Constraint {
                        kind: match failing.kind {
                            ConstraintKind::MatchAttribute => "matchAttribute".into(),
                            ConstraintKind::DistinctAttribute => "distinctAttribute".into(),
                        },
                        attribute: failing.attribute.clone(),
                    }
                } else {
                    let need: i64 = claim
                        .spec
                        .requests
                        .iter()
                        .filter_map(|r| match r.exactly.as_ref().map(|e| &e.mode) {
                            Some(Mode::Exact(n)) => Some(*n),
                            _ => None,
                        })
                        .sum();
                    Why::TooFew {
                        need: Some(need),
                        have: devices.len(),
                    }
                }
            }
        };
        let v = &mut verdicts[slots[k]];
        v.requests = requests;
        v.why = Some(why);
        for &later in &slots[k + 1..] {
            verdicts[later].why = Some(Why::NotReached);
        }
    }

    /// Why one request (alone) gets no devices here, stage by stage; `None` when it would.
    fn request_why(
        &self,
        node: &NodeInfo,
        devices: &[(usize, usize, usize)],
        req: &SubRequest,
    ) -> Option<Why> {
        let Some(&ci) = self.classes.get(req.class.as_str()) else {
            return Some(Why::Error(format!("device class {} not found", req.class)));
        };
        if devices.is_empty() {
            return Some(Why::NoDevices);
        }
        let class = &self.set.classes[ci];
        let mut left: Vec<(usize, usize, usize)> = devices
            .iter()
            .copied()
            .filter(|&(_, s, d)| !self.set.slices[s].devices[d].binding_conditions)
            .collect();
        let need = match req.mode {
            Mode::Exact(n) => Some(n),
            Mode::All => None,
        };
        let short = |left: &[(usize, usize, usize)]| match need {
            Some(n) => (left.len() as i64) < n,
            None => left.is_empty(),
        };
        for (owner, list) in [
            (Some(class.name.clone()), &class.selectors),
            (None, &req.selectors),
        ] {
            for (i, expr) in list.iter().enumerate() {
                let before = left.clone();
                left.retain(|&(_, s, d)| self.eval(expr, s, d) == Ok(true));
                if left.is_empty() {
                    let seen = before
                        .iter()
                        .map(|&(_, s, d)| {
                            (
                                self.device_id(s, d).to_string(),
                                self.values_read(expr, s, d),
                            )
                        })
                        .collect();
                    return Some(Why::Selector {
                        class: owner,
                        index: i,
                        expression: expr.clone(),
                        seen,
                    });
                }
            }
        }
        left.retain(|&(_, s, d)| {
            let slice = &self.set.slices[s];
            !slice.per_device_nodes || node_matches(&slice.devices[d].nodes, node)
        });
        if short(&left) {
            return Some(Why::TooFew {
                need,
                have: left.len(),
            });
        }
        let rd = ReqData {
            req,
            parent: None,
            num: 0,
            all: Vec::new(),
            matches: Vec::new(),
        };
        let tainted: Vec<(usize, usize, usize)> = left
            .iter()
            .copied()
            .filter(|&(_, s, d)| {
                self.set.slices[s].devices[d].taints.iter().any(|t| {
                    matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
                        && !rd.req.tolerations.iter().any(|tol| tol.tolerates(t))
                })
            })
            .collect();
        let untainted: Vec<_> = left
            .iter()
            .copied()
            .filter(|x| !tainted.contains(x))
            .collect();
        if !tainted.is_empty() && (short(&untainted) || need.is_none()) {
            return Some(Why::Taint {
                devices: tainted
                    .iter()
                    .map(|&(_, s, d)| {
                        let t = self.set.slices[s].devices[d]
                            .taints
                            .iter()
                            .map(|t| format!("{}={}:{}", t.key, t.value, t.effect))
                            .collect::<Vec<_>>()
                            .join(",");
                        (self.device_id(s, d).to_string(), t)
                    })
                    .collect(),
            });
        }
        let taken: Vec<DeviceId> = if req.admin_access {
            Vec::new()
        } else {
            untainted
                .iter()
                .map(|&(_, s, d)| self.device_id(s, d))
                .filter(|id| self.allocated.contains_key(id))
                .collect()
        };
        let free = untainted.len() - taken.len();
        let short_free = match need {
            Some(n) => (free as i64) < n,
            None => !taken.is_empty(),
        };
        if short_free && !taken.is_empty() {
            return Some(Why::Allocated {
                devices: taken
                    .iter()
                    .map(|id| (id.to_string(), self.allocated[id].clone()))
                    .collect(),
                free,
                need,
            });
        }
        None
    }

    /// What a selector reads of a device: `productName="A100", memory=80Gi` (or absent).
    fn values_read(&self, expr: &str, s: usize, d: usize) -> String {
        let Ok(sel) = &*self.selector(expr) else {
            return String::new();
        };
        let slice = &self.set.slices[s];
        let dev = &slice.devices[d];
        let mut reads: Vec<(String, String, String)> = Vec::new();
        if let Ok(program_reads) = accesses(sel) {
            for (which, domain, name) in program_reads {
                if !reads
                    .iter()
                    .any(|(w, dm, n)| *w == which && *dm == domain && *n == name)
                {
                    reads.push((which, domain, name));
                }
            }
        }
        let mut parts = Vec::new();
        if expr.contains("device.driver") {
            parts.push(format!("driver={}", slice.driver));
        }
        for (which, domain, name) in reads {
            let full = format!("{domain}/{name}");
            let value = if which == "attributes" {
                lookup_attr(&dev.attributes, &slice.driver, &full).map(|a| match a {
                    Attr::Str(s) => format!("{s:?}"),
                    other => other.to_string(),
                })
            } else {
                dev.capacity
                    .get(&full)
                    .or_else(|| {
                        (domain == slice.driver)
                            .then(|| dev.capacity.get(&name))
                            .flatten()
                    })
                    .map(|q| quantity_text(q.milli))
            };
            parts.push(match value {
                Some(v) => format!("{name}={v}"),
                None => format!("{name} absent"),
            });
        }
        parts.join(", ")
    }
}

/// `80Gi` where the value is a whole number of binary units, else the plain number.
pub fn quantity_text(milli: i128) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let v = milli / 1000;
    for (suffix, unit) in [
        ("Ti", 1i128 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if v != 0 && v % unit == 0 {
            return format!("{}{suffix}", v / unit);
        }
    }
    v.to_string()
}

/// The `device.attributes[...]`/`device.capacity[...]` reads of a selector.
fn accesses(sel: &Selector) -> Result<Vec<(String, String, String)>, ()> {
    let mut out = Vec::new();
    dracel::walk(sel.expression(), &mut |e| {
        if let Some((which, domain, name)) = dracel::device_access(e) {
            out.push((which.to_string(), domain.to_string(), name.to_string()));
        }
    });
    Ok(out)
}
