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

use super::lineage::CallLabels;
use super::wellformed::Resolved;
use super::Session;
use crate::decision::{DecisionPath, FlowTrace, Reason, Rule};
use crate::graph::{NodeId, NO_PARAM};
use crate::label::{Label, LabelPattern};
use crate::policy::{AgentId, FlowEffect, RuleEffect, SinkId, SinkUse, ToolId};
use crate::spec;

/// Where a flow goes: a sink, or (a receive rule) the calling agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Sink(SinkId),
    Agent(AgentId),
}

/// A flow rule that stops the call.
#[derive(Clone, Debug)]
pub(crate) struct FlowHit {
    /// An index into the flow rules (sinks) or the receive rules (agents).
    pub rule: usize,
    pub target: Target,
    /// The label that reached the sink.
    pub label: Label,
    /// The rule's pattern.
    pub pattern: LabelPattern,
    /// The call's tool, and the index of the sink use in its declaration
    /// (its bound parameters; `None`: every argument).
    pub tool: ToolId,
    pub sink_use: Option<usize>,
    /// The call's own resource, when its label alone matches the pattern.
    pub resource: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct FlowCheck {
    pub deny: Option<FlowHit>,
    pub pause: Option<FlowHit>,
    /// Every rule that stops the call, when asked for (`check_all`); the
    /// first deny and the first pause are the same as without it.
    pub all: Option<Vec<(FlowHit, RuleEffect)>>,
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

impl Session {
    /// The first flow rule that denies the call, and the first that pauses
    /// it; with `collect`, every rule that stops it as well.
    pub(crate) fn check_flows(
        &self,
        r: &Resolved,
        labels: &CallLabels,
        collect: bool,
    ) -> FlowCheck {
        let policy = &*self.shared.0.policy;
        let req = &r.req;
        let spec = &policy.tools[req.tool];
        let mut out = FlowCheck {
            all: collect.then(Vec::new),
            ..FlowCheck::default()
        };
        for (k, sink) in spec.sinks.iter().enumerate() {
            let label = sink_label(sink, labels);
            let rules = self.shared.0.index.flows_for_sink[sink.sink]
                .iter()
                .map(|&i| {
                    let rule = &policy.flow_rules[i];
                    (i, rule.effect, &self.shared.0.index.flow_when[i][req.tool])
                });
            let target = Target::Sink(sink.sink);
            if self.judge(r, labels, label, target, Some(k), rules, &mut out) {
                return out;
            }
        }
        // What the calling agent receives: everything its call carries.
        let received = match labels.resource {
            Some((l, _)) => labels.input.join(&l),
            None => labels.input,
        };
        let rules = self.shared.0.index.receive_for_agent[req.agent]
            .iter()
            .map(|&i| {
                let rule = &policy.receive_rules[i];
                (
                    i,
                    rule.effect,
                    &self.shared.0.index.receive_when[i][req.tool],
                )
            });
        self.judge(
            r,
            labels,
            received,
            Target::Agent(req.agent),
            None,
            rules,
            &mut out,
        );
        out
    }

    /// Judges one flow under its rules (exempt, else deny, else pause);
    /// true when a rule denies it.
    #[allow(clippy::too_many_arguments)]
    fn judge<'a>(
        &self,
        r: &Resolved,
        labels: &CallLabels,
        label: Label,
        target: Target,
        sink_use: Option<usize>,
        rules: impl Iterator<Item = (usize, FlowEffect, &'a crate::value::ArgCond)> + Clone,
        out: &mut FlowCheck,
    ) -> bool {
        let req = &r.req;
        let holds = |c: &crate::value::ArgCond| {
            c.eval_with(&req.args, req.agent, &self.state.sets, &self.state.tokens)
        };
        let exempt = rules.clone().any(|(_, effect, when)| match effect {
            FlowEffect::Allow(ceiling) => label.flows_to(&ceiling) && holds(when),
            _ => false,
        });
        if exempt {
            return false;
        }
        let hit = |rule: usize, pattern: LabelPattern| FlowHit {
            rule,
            target,
            label,
            pattern,
            tool: req.tool,
            sink_use,
            resource: labels
                .resource
                .filter(|(l, _)| pattern.matches(l))
                .and_then(|_| spec::resource_of(&self.shared.0.policy, req.tool, &req.args))
                .map(str::to_string),
        };
        if let Some(all) = &mut out.all {
            for (i, effect, when) in rules {
                let (p, effect) = match effect {
                    FlowEffect::Deny(p) => (p, RuleEffect::Deny),
                    FlowEffect::Pause(p) => (p, RuleEffect::Pause),
                    FlowEffect::Allow(_) => continue,
                };
                if p.matches(&label) && holds(when) {
                    let first = match effect {
                        RuleEffect::Deny => &mut out.deny,
                        RuleEffect::Pause => &mut out.pause,
                    };
                    first.get_or_insert_with(|| hit(i, p));
                    all.push((hit(i, p), effect));
                }
            }
            // Keep going: every sink's rules are collected.
            return false;
        }
        for (i, effect, when) in rules.clone() {
            if let FlowEffect::Deny(p) = effect {
                if p.matches(&label) && holds(when) {
                    out.deny = Some(hit(i, p));
                    return true;
                }
            }
        }
        if out.pause.is_none() {
            for (i, effect, when) in rules {
                if let FlowEffect::Pause(p) = effect {
                    if p.matches(&label) && holds(when) {
                        out.pause = Some(hit(i, p));
                        break;
                    }
                }
            }
        }
        false
    }

    /// The path that explains a flow hit, built now (`check_all`, approvals).
    pub(crate) fn flow_path(
        &self,
        node: NodeId,
        hit: &FlowHit,
        labels: &CallLabels,
        r: &Resolved,
    ) -> Vec<NodeId> {
        match self.flow_trace(node, hit, labels, r).trace() {
            Some(t) => self.trace_path(t),
            None => vec![node],
        }
    }

    /// What the path of a flow hit is found from, without walking the
    /// graph: the walk is done when the path is read (`trace_path`).
    pub(crate) fn flow_trace(
        &self,
        node: NodeId,
        hit: &FlowHit,
        labels: &CallLabels,
        r: &Resolved,
    ) -> DecisionPath {
        let params = self.bound_params(hit.tool, hit.sink_use);
        // The call's edge from the context is followed when an argument
        // bound to the sink reads the context.
        let context = params.is_none_or(|ps| ps.iter().any(|&p| labels.reads_context(p, r)));
        DecisionPath::flow(FlowTrace {
            node,
            tool: hit.tool,
            sink_use: hit.sink_use.map(|k| k as u32),
            pattern: hit.pattern,
            context,
            own_resource: hit.resource.is_some(),
            horizon: self.state.graph.edge_count() as u32,
        })
    }

    /// The parameters bound to sink use `k` of `tool` (`None`: all).
    fn bound_params(&self, tool: ToolId, k: Option<usize>) -> Option<&[usize]> {
        let sink = self.shared.0.policy.tools.get(tool)?.sinks.get(k?)?;
        sink.params.as_deref()
    }

    /// The path that explains a flow: from the labeled source along data
    /// edges into the bound arguments, to the call, as the graph was when
    /// the flow was judged. When the call's own resource carries the label,
    /// the call is its own source.
    pub(crate) fn trace_path(&self, t: &FlowTrace) -> Vec<NodeId> {
        if t.own_resource {
            return vec![t.node];
        }
        let params = self.bound_params(t.tool, t.sink_use.map(|k| k as usize));
        let bound = |param: u16| match params {
            None => true,
            Some(_) if param == NO_PARAM => t.context,
            Some(ps) => ps.contains(&(param as usize)),
        };
        self.state.graph.explain_path_before(
            t.node,
            t.horizon as usize,
            |l| t.pattern.matches(l),
            |e| bound(e.param),
        )
    }
}

impl FlowHit {
    /// The rule and reason a decision names.
    pub(crate) fn rule_and_reason(&self) -> (Rule, Reason) {
        match self.target {
            Target::Sink(sink) => (
                Rule::Flow(self.rule),
                Reason::Flow {
                    sink,
                    label: self.label,
                    resource: self.resource.clone(),
                },
            ),
            Target::Agent(agent) => (
                Rule::Receive(self.rule),
                Reason::Received {
                    agent,
                    label: self.label,
                },
            ),
        }
    }
}
