//! Step 3: flows into every sink the call reaches.
//!
//! The label checked at a sink joins the labels of the arguments bound to
//! it (every argument, unless the tool binds the sink to some) and the
//! label of the resource the call itself touches: a call that reads
//! `~/.ssh/id_rsa` and uploads it is one step and one flow.
//!
//! Per sink: an allow rule whose condition holds and whose ceiling the label
//! flows to exempts the flow; otherwise a matching deny rule denies it, and
//! else a matching pause rule asks a human. Across sinks, a DENY beats a
//! PAUSE.

use super::lineage::{ArgSource, CallLabels};
use super::wellformed::Resolved;
use super::Monitor;
use crate::graph::{NodeId, NO_PARAM};
use crate::label::{Label, LabelPattern};
use crate::policy::{FlowEffect, SinkId, SinkUse};
use crate::spec;

/// A flow rule that stops the call.
#[derive(Clone, Debug)]
pub(crate) struct FlowHit {
    pub rule: usize,
    pub sink: SinkId,
    /// The label that reached the sink.
    pub label: Label,
    /// The rule's pattern.
    pub pattern: LabelPattern,
    /// The sink's bound parameters (`None`: all).
    pub params: Option<Vec<usize>>,
    /// The call's own resource, when its label alone matches the pattern.
    pub resource: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct FlowCheck {
    pub deny: Option<FlowHit>,
    pub pause: Option<FlowHit>,
}

/// The label that reaches `sink`: the bound arguments' join (or the whole
/// input) joined with the call's own resource label.
pub(crate) fn sink_label(sink: &SinkUse, labels: &CallLabels) -> Label {
    let args = match &sink.params {
        None => labels.input,
        Some(ps) => ps
            .iter()
            .filter_map(|&p| labels.args.get(p))
            .fold(Label::BOTTOM, |acc, l| acc.join(l)),
    };
    match labels.resource {
        Some((l, _)) => args.join(&l),
        None => args,
    }
}

impl Monitor {
    /// The first flow rule that denies the call, and the first that pauses it.
    pub(crate) fn check_flows(&self, r: &Resolved, labels: &CallLabels) -> FlowCheck {
        let policy = &*self.policy;
        let req = &r.req;
        let spec = &policy.tools[req.tool];
        let holds = |rule: usize| {
            self.index.flow_when[rule][req.tool].eval(&req.args, req.agent, &self.session.sets)
        };
        let mut out = FlowCheck::default();
        for sink in &spec.sinks {
            let label = sink_label(sink, labels);
            let rules = &self.index.flows_for_sink[sink.sink];
            let exempt = rules.iter().any(|&a| match policy.flow_rules[a].effect {
                FlowEffect::Allow(ceiling) => label.flows_to(&ceiling) && holds(a),
                _ => false,
            });
            if exempt {
                continue;
            }
            let hit = |rule: usize, pattern: LabelPattern| FlowHit {
                rule,
                sink: sink.sink,
                label,
                pattern,
                params: sink.params.clone(),
                resource: labels
                    .resource
                    .filter(|(l, _)| pattern.matches(l))
                    .and_then(|_| spec::resource_of(policy, req.tool, &req.args))
                    .map(str::to_string),
            };
            for &d in rules {
                if let FlowEffect::Deny(p) = policy.flow_rules[d].effect {
                    if p.matches(&label) && holds(d) {
                        out.deny = Some(hit(d, p));
                        return out;
                    }
                }
            }
            if out.pause.is_none() {
                for &d in rules {
                    if let FlowEffect::Pause(p) = policy.flow_rules[d].effect {
                        if p.matches(&label) && holds(d) {
                            out.pause = Some(hit(d, p));
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    /// The path that explains a flow hit: from the labeled source along data
    /// edges into the bound arguments, to the call. When the call's own
    /// resource carries the label, the call is its own source.
    pub(crate) fn flow_path(
        &self,
        node: NodeId,
        hit: &FlowHit,
        labels: &CallLabels,
    ) -> Vec<NodeId> {
        if hit.resource.is_some() {
            return vec![node];
        }
        let bound = |param: u16| match &hit.params {
            None => true,
            Some(ps) => {
                if param == NO_PARAM {
                    ps.iter()
                        .any(|&p| labels.sources.get(p) == Some(&ArgSource::Context))
                } else {
                    ps.contains(&(param as usize))
                }
            }
        };
        self.session
            .graph
            .explain_path(node, |l| hit.pattern.matches(l), |e| bound(e.param))
    }
}
