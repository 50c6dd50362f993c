//! Step 1: well-formedness. The call is resolved against the policy: tool,
//! agent, task scope, every argument present (or optional) and of its
//! declared type, lineage naming known calls. Anything else is a DENY that
//! names the field (fail closed).

use super::Session;
use crate::decision::{Reason, Rule};
use crate::event::Call;
use crate::graph::NodeId;
use crate::policy::{AgentId, Param, ToolId};
use crate::spec::Request;
use crate::value::{TypeMismatch, Value};

/// Why a call is not well-formed.
pub(crate) type Malformed = (Rule, Reason);

/// A well-formed call, resolved against the policy.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Resolved {
    /// Agent, tool, typed arguments in parameter order (`Null` for absent
    /// optional ones) and time.
    pub req: Request,
    /// Observed data sources of the parameters that have some (the
    /// others read the context).
    pub lineage: Lineage,
    /// Inferred sources: recorded, never used to narrow a flow.
    pub inferred: Vec<(u16, NodeId)>,
}

/// Observed lineage, by parameter: only the parameters the call gave
/// lineage for are stored, in one flat list (usually empty or a few
/// entries, so a call allocates at most once for its lineage, never per
/// parameter of its tool).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Lineage {
    /// The tool's parameter count.
    params: usize,
    /// (parameter, source), grouped by parameter in ascending parameter
    /// order, each parameter's sources in the order given. A parameter
    /// given an empty lineage has one entry with source [`NO_SOURCE`].
    given: Vec<(u32, NodeId)>,
}

/// Marks a parameter whose lineage names no call (it has observed lineage,
/// of no data). Never a real node: the graph holds fewer than 2^32 nodes.
const NO_SOURCE: NodeId = NodeId(u32::MAX);

impl Lineage {
    /// No lineage for any of `params` parameters.
    #[cfg(test)]
    pub fn new(params: usize) -> Lineage {
        Lineage::with_capacity(params, 0)
    }

    /// No lineage yet, with room for `sources` sources.
    pub fn with_capacity(params: usize, sources: usize) -> Lineage {
        Lineage {
            params,
            given: Vec::with_capacity(sources),
        }
    }

    /// The tool's parameter count.
    pub fn len(&self) -> usize {
        self.params
    }

    /// Sets parameter `i`'s sources (a later call for `i` replaces them).
    #[cfg(test)]
    pub fn set(&mut self, i: usize, nodes: impl IntoIterator<Item = NodeId>) {
        let p = i as u32;
        self.given.retain(|(q, _)| *q != p);
        self.mark(i);
        for n in nodes {
            self.add(i, n);
        }
    }

    /// Marks parameter `i` as having observed lineage (of no source yet).
    pub fn mark(&mut self, i: usize) {
        if !self.has(i) {
            let p = i as u32;
            let at = self.given.partition_point(|(q, _)| *q <= p);
            self.given.insert(at, (p, NO_SOURCE));
        }
    }

    /// Adds `node` to parameter `i`'s sources, after those it has.
    pub fn add(&mut self, i: usize, node: NodeId) {
        let p = i as u32;
        let at = self.given.partition_point(|(q, _)| *q <= p);
        if at > 0 && self.given[at - 1] == (p, NO_SOURCE) {
            self.given[at - 1].1 = node;
        } else {
            self.given.insert(at, (p, node));
        }
    }

    /// Parameter `i`'s observed sources (`None`: it reads the context).
    pub fn get(&self, i: usize) -> Option<impl Iterator<Item = NodeId> + '_> {
        let p = i as u32;
        self.has(i).then(|| {
            self.given
                .iter()
                .filter(move |(q, n)| *q == p && *n != NO_SOURCE)
                .map(|(_, n)| *n)
        })
    }

    /// Whether parameter `i` has observed lineage.
    pub fn has(&self, i: usize) -> bool {
        let p = i as u32;
        self.given.iter().any(|(q, _)| *q == p)
    }

    /// Every (parameter, source) pair, in parameter order.
    pub fn given(&self) -> impl Iterator<Item = (usize, NodeId)> + '_ {
        self.given
            .iter()
            .filter(|(_, n)| *n != NO_SOURCE)
            .map(|(p, n)| (*p as usize, *n))
    }

    /// Every observed source, in parameter order.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.given().map(|(_, n)| n)
    }
}

pub(crate) fn malformed(reason: Reason) -> Malformed {
    (Rule::WellFormed, reason)
}

/// One argument of parameter `p`: an absent (or null) optional one is
/// `Null`, an absent required one is missing, any other is converted to the
/// declared type. JSON and typed calls share it, so they fail alike.
pub(crate) fn argument<V>(
    p: &Param,
    value: Option<V>,
    is_null: impl Fn(&V) -> bool,
    convert: impl FnOnce(V) -> Result<Value, TypeMismatch>,
) -> Result<Value, Malformed> {
    match value {
        None if p.optional => Ok(Value::Null),
        Some(v) if p.optional && is_null(&v) => Ok(Value::Null),
        None => Err(malformed(Reason::MissingArg {
            param: p.name.clone(),
        })),
        Some(v) => convert(v).map_err(|e| ill_typed(p, e)),
    }
}

/// The refusal of an argument of `p` that does not have its type.
fn ill_typed(p: &Param, e: TypeMismatch) -> Malformed {
    malformed(Reason::IllTyped {
        param: p.name.clone(),
        expected: p.type_name(),
        got: e.got,
    })
}

/// [`argument`] for a parameter of object type (or a list of objects):
/// the refusal names the path inside the argument (`edits[1].newText`).
pub(crate) fn object_argument<V>(
    p: &Param,
    value: Option<V>,
    is_null: impl Fn(&V) -> bool,
    convert: impl FnOnce(V) -> Result<Value, crate::object::Mismatch>,
) -> Result<Value, Malformed> {
    match value {
        None if p.optional => Ok(Value::Null),
        Some(v) if p.optional && is_null(&v) => Ok(Value::Null),
        None => Err(malformed(Reason::MissingArg {
            param: p.name.clone(),
        })),
        Some(v) => convert(v).map_err(|e| {
            malformed(Reason::IllTyped {
                param: format!("{}{}", p.name, e.at),
                expected: e.expected,
                got: e.got,
            })
        }),
    }
}

impl Session {
    pub(crate) fn tool_of(&self, name: &str) -> Option<ToolId> {
        self.shared.0.index.tools.get(name).copied()
    }

    pub(crate) fn agent_of(&self, name: Option<&str>) -> Option<AgentId> {
        match name {
            None => Some(0),
            Some(n) => self.shared.0.index.agents.get(n).copied(),
        }
    }

    /// The static scopes: the first on the agent's chain that excludes the tool.
    pub(crate) fn check_static_scope(&self, agent: AgentId, tool: ToolId) -> Result<(), Malformed> {
        match self.shared.0.index.scope_ok[agent]
            .as_ref()
            .and_then(|t| t[tool])
        {
            Some(scope) => Err((Rule::Scope(scope), Reason::OutOfScope { agent })),
            None => Ok(()),
        }
    }

    /// The scope the session's latest task opened.
    pub(crate) fn check_task_scope(&self, tool: ToolId, args: &[Value]) -> Result<(), Malformed> {
        if let Some(scope) = &self.state.task_scope {
            let resource = crate::spec::resource_of(&self.shared.0.policy, tool, args);
            if let Some(forbidden) =
                scope.excludes(&self.shared.0.policy.tools[tool].name, resource)
            {
                return Err((Rule::TaskScope, Reason::OutOfTaskScope { forbidden }));
            }
        }
        Ok(())
    }

    /// Resolves a call, or says why it is not well-formed. Argument names
    /// are looked up once each, in the tool's name table.
    pub(crate) fn resolve(&self, call: &Call) -> Result<Resolved, Malformed> {
        let policy = &*self.shared.0.policy;
        let tool = self
            .tool_of(&call.tool)
            .ok_or_else(|| malformed(Reason::UnknownTool(call.tool.clone())))?;
        let agent = self.agent_of(call.agent.as_deref()).ok_or_else(|| {
            malformed(Reason::UnknownAgent(call.agent.clone().unwrap_or_default()))
        })?;
        self.check_static_scope(agent, tool)?;
        let spec = &policy.tools[tool];
        // Each argument by parameter index; on the stack for most tools.
        let n = spec.params.len();
        let mut stack: [Option<&serde_json::Value>; 32] = [None; 32];
        let mut heap: Vec<Option<&serde_json::Value>> = Vec::new();
        let raw: &mut [Option<&serde_json::Value>] = if n <= stack.len() {
            &mut stack[..n]
        } else {
            heap.resize(n, None);
            &mut heap
        };
        let mut names = super::index::ParamCursor::new(&self.shared.0.index, tool);
        for (name, value) in &call.args {
            let i = names.param(name).ok_or_else(|| {
                malformed(Reason::UnknownArg {
                    param: name.clone(),
                })
            })?;
            raw[i] = Some(value);
        }
        let mut args = Vec::with_capacity(spec.params.len());
        for (p, value) in spec.params.iter().zip(raw.iter().copied()) {
            if p.ty == crate::value::ParamType::Object {
                args.push(object_argument(
                    p,
                    value,
                    |v| v.is_null(),
                    |v| crate::object::from_json(p, v),
                )?);
                continue;
            }
            match value {
                // The common case, converted in place (as `argument` does).
                Some(v) if !(p.optional && v.is_null()) => {
                    match Value::from_json_typed(v, p.ty, p.list) {
                        Ok(x) => args.push(x),
                        Err(e) => return Err(ill_typed(p, e)),
                    }
                }
                _ => args.push(argument(
                    p,
                    value,
                    |v| v.is_null(),
                    |v| Value::from_json_typed(v, p.ty, p.list),
                )?),
            }
        }
        self.check_task_scope(tool, &args)?;
        let index_of = |param: &str| {
            self.shared.0.index.param(tool, param).ok_or_else(|| {
                malformed(Reason::UnknownArg {
                    param: param.to_string(),
                })
            })
        };
        // The first id that names no call refuses the call.
        let node_of = |param: &str, id: &String| {
            self.state.calls.get(id).copied().ok_or_else(|| {
                malformed(Reason::UnknownLineage {
                    param: param.to_string(),
                    call: id.clone(),
                })
            })
        };
        let sources = call.lineage.values().map(Vec::len).sum();
        let mut lineage = Lineage::with_capacity(spec.params.len(), sources);
        for (param, ids) in &call.lineage {
            let index = index_of(param)?;
            // Each map key is one parameter: its sources are set once.
            lineage.mark(index);
            for id in ids {
                lineage.add(index, node_of(param, id)?);
            }
        }
        let mut inferred = Vec::new();
        for (param, ids) in &call.inferred {
            let index = index_of(param)?;
            for id in ids {
                inferred.push((index as u16, node_of(param, id)?));
            }
        }
        Ok(Resolved {
            req: Request {
                agent,
                tool,
                args,
                time: call.time,
            },
            lineage,
            inferred,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parameter's first source takes the place of its placeholder: the
    /// list holds one entry per source, never a placeholder beside one.
    #[test]
    fn a_first_source_replaces_the_placeholder() {
        let mut l = Lineage::new(3);
        l.set(1, []);
        assert_eq!(l.given, vec![(1, NO_SOURCE)]);
        l.add(1, NodeId(7));
        l.set(2, [NodeId(4), NodeId(5)]);
        l.set(0, [NodeId(9)]);
        assert_eq!(
            l.given,
            vec![
                (0, NodeId(9)),
                (1, NodeId(7)),
                (2, NodeId(4)),
                (2, NodeId(5))
            ]
        );
        assert!(l.get(1).is_some_and(|mut s| s.next() == Some(NodeId(7))));
    }
}
