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
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    /// Agent, tool, typed arguments in parameter order (`Null` for absent
    /// optional ones) and time.
    pub req: Request,
    /// Observed data sources per parameter (`None`: the context).
    pub lineage: Vec<Option<Vec<NodeId>>>,
    /// Inferred sources: recorded, never used to narrow a flow.
    pub inferred: Vec<(u16, NodeId)>,
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
        Some(v) => convert(v).map_err(|e| {
            malformed(Reason::IllTyped {
                param: p.name.clone(),
                expected: p.type_name(),
                got: e.got,
            })
        }),
    }
}

impl Session {
    pub(crate) fn tool_of(&self, name: &str) -> Option<ToolId> {
        self.shared.index.tools.get(name).copied()
    }

    pub(crate) fn agent_of(&self, name: Option<&str>) -> Option<AgentId> {
        match name {
            None => Some(0),
            Some(n) => self.shared.index.agents.get(n).copied(),
        }
    }

    /// The static scopes: the first on the agent's chain that excludes the tool.
    pub(crate) fn check_static_scope(&self, agent: AgentId, tool: ToolId) -> Result<(), Malformed> {
        match self.shared.index.scope_ok[agent]
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
            let resource = crate::spec::resource_of(&self.shared.policy, tool, args);
            if let Some(forbidden) = scope.excludes(&self.shared.policy.tools[tool].name, resource)
            {
                return Err((Rule::TaskScope, Reason::OutOfTaskScope { forbidden }));
            }
        }
        Ok(())
    }

    /// Resolves a call, or says why it is not well-formed. Argument names
    /// are looked up once each, in the tool's name table.
    pub(crate) fn resolve(&self, call: &Call) -> Result<Resolved, Malformed> {
        let policy = &*self.shared.policy;
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
        for (name, value) in &call.args {
            let i = self.shared.index.param(tool, name).ok_or_else(|| {
                malformed(Reason::UnknownArg {
                    param: name.clone(),
                })
            })?;
            raw[i] = Some(value);
        }
        let mut args = Vec::with_capacity(spec.params.len());
        for (p, value) in spec.params.iter().zip(raw.iter().copied()) {
            args.push(argument(
                p,
                value,
                |v| v.is_null(),
                |v| Value::from_json_typed(v, p.ty, p.list),
            )?);
        }
        self.check_task_scope(tool, &args)?;
        let lookup = |param: &str, ids: &[String]| -> Result<(usize, Vec<NodeId>), Malformed> {
            let index = self.shared.index.param(tool, param).ok_or_else(|| {
                malformed(Reason::UnknownArg {
                    param: param.to_string(),
                })
            })?;
            let nodes = ids
                .iter()
                .map(|id| {
                    self.state.calls.get(id).copied().ok_or_else(|| {
                        malformed(Reason::UnknownLineage {
                            param: param.to_string(),
                            call: id.clone(),
                        })
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((index, nodes))
        };
        let mut lineage = vec![None; spec.params.len()];
        for (param, ids) in &call.lineage {
            let (index, nodes) = lookup(param, ids)?;
            lineage[index] = Some(nodes);
        }
        let mut inferred = Vec::new();
        for (param, ids) in &call.inferred {
            let (index, nodes) = lookup(param, ids)?;
            inferred.extend(nodes.into_iter().map(|n| (index as u16, n)));
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
