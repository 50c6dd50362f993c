//! Typed calls: tools, parameters and agents resolved once by name into
//! handles, so that deciding a call compares indexes, not strings. Owned
//! JSON calls ([`crate::event::Call`]) stay accepted; both resolve to the same
//! [`Resolved`] request, and so get the same decision.

use super::wellformed::{argument, malformed, object_argument, Lineage, Malformed, Resolved};
use super::{CompiledPolicy, Session};
use crate::decision::{Reason, StepError};
use crate::event::Call;
use crate::graph::NodeId;
use crate::policy::{AgentId, ToolId};
use crate::value::{Decimal, ParamType, TypeMismatch, Value};
use std::borrow::Cow;

/// Identifies the policy a handle was resolved in: handles are indexes, so
/// one used with another policy would name the wrong tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Stamp(u64);

impl Stamp {
    fn of(policy: &CompiledPolicy) -> Stamp {
        Stamp::of_hash(policy.0.hash)
    }

    fn of_hash(hash: crate::hash::Hash) -> Stamp {
        let bytes = hash.0;
        let mut first = [0u8; 8];
        first.copy_from_slice(&bytes[..8]);
        Stamp(u64::from_le_bytes(first))
    }
}

/// A tool of a compiled policy, found once by name ([`CompiledPolicy::tool`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ToolHandle {
    stamp: Stamp,
    tool: ToolId,
    params: usize,
}

/// A parameter of one tool ([`CompiledPolicy::param`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamHandle {
    stamp: Stamp,
    tool: ToolId,
    index: usize,
}

/// An agent of a compiled policy ([`CompiledPolicy::agent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AgentHandle {
    stamp: Stamp,
    agent: AgentId,
}

/// A name that the policy does not declare.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// No tool of that name.
    #[error("the policy has no tool `{0}`")]
    Tool(String),
    /// The tool has no parameter of that name.
    #[error("tool `{tool}` has no parameter `{param}`")]
    Param {
        /// The tool's name.
        tool: String,
        /// The parameter asked for.
        param: String,
    },
    /// No agent of that name.
    #[error("the policy has no agent `{0}`")]
    Agent(String),
}

impl CompiledPolicy {
    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Result<ToolHandle, LookupError> {
        let tool = *self
            .0
            .index
            .tools
            .get(name)
            .ok_or_else(|| LookupError::Tool(name.to_string()))?;
        Ok(ToolHandle {
            stamp: Stamp::of(self),
            tool,
            params: self.0.policy.tools[tool].params.len(),
        })
    }

    /// Parameter `name` of `tool`.
    pub fn param(&self, tool: ToolHandle, name: &str) -> Result<ParamHandle, LookupError> {
        let spec = self
            .0
            .policy
            .tools
            .get(tool.tool)
            .filter(|_| tool.stamp == Stamp::of(self));
        let index = spec
            .and_then(|_| self.0.index.param(tool.tool, name))
            .ok_or_else(|| LookupError::Param {
                tool: spec.map_or_else(|| "?".to_string(), |t| t.name.clone()),
                param: name.to_string(),
            })?;
        Ok(ParamHandle {
            stamp: tool.stamp,
            tool: tool.tool,
            index,
        })
    }

    /// The agent named `name` (`main` is always there).
    pub fn agent(&self, name: &str) -> Result<AgentHandle, LookupError> {
        let agent = *self
            .0
            .index
            .agents
            .get(name)
            .ok_or_else(|| LookupError::Agent(name.to_string()))?;
        Ok(AgentHandle {
            stamp: Stamp::of(self),
            agent,
        })
    }
}

/// A call built from handles: arguments by parameter index, typed values.
#[derive(Clone, Debug, PartialEq)]
pub struct TypedCall {
    id: String,
    time: u64,
    tool: ToolHandle,
    agent: Option<AgentHandle>,
    /// By parameter index; `Value::Null` where not given (moved as is into
    /// the resolved request: nothing is copied).
    args: Vec<Value>,
    /// Parameters given an explicit `Value::Null` (told apart from absent
    /// ones only for a required parameter: null is ill-typed, absence is a
    /// missing argument). Usually empty, and then never allocated.
    nulls: Vec<usize>,
    /// Observed lineage: (parameter index, call id), grouped by parameter
    /// (one flat list: a call with lineage allocates it once). `None`
    /// stands for a parameter given an empty lineage.
    lineage: Vec<(usize, Option<String>)>,
    /// A parameter handle of another tool or policy was passed.
    foreign: Option<&'static str>,
}

impl TypedCall {
    /// A call of `tool` with id `id` (unique in the session) at `time`.
    pub fn new(tool: ToolHandle, id: impl Into<String>, time: u64) -> TypedCall {
        TypedCall {
            id: id.into(),
            time,
            tool,
            agent: None,
            args: vec![Value::Null; tool.params],
            nulls: Vec::new(),
            lineage: Vec::new(),
            foreign: None,
        }
    }

    /// The calling agent (default: `main`).
    pub fn agent(mut self, agent: AgentHandle) -> TypedCall {
        if agent.stamp != self.tool.stamp {
            self.foreign = Some("agent");
        }
        self.agent = Some(agent);
        self
    }

    /// Sets argument `param` (a later value for the same parameter replaces
    /// an earlier one).
    pub fn arg(mut self, param: ParamHandle, value: impl Into<Value>) -> TypedCall {
        match self.slot(param) {
            Some(i) => {
                let value = value.into();
                let null = value == Value::Null;
                if null != self.nulls.contains(&i) {
                    if null {
                        self.nulls.push(i);
                    } else {
                        self.nulls.retain(|&n| n != i);
                    }
                }
                self.args[i] = value;
            }
            None => self.foreign = Some("parameter"),
        }
        self
    }

    /// Observed lineage of argument `param`: the calls (or tasks) whose
    /// outputs it came from. Without it, the argument reads the context.
    pub fn lineage<S: Into<String>>(
        mut self,
        param: ParamHandle,
        calls: impl IntoIterator<Item = S>,
    ) -> TypedCall {
        match self.slot(param) {
            Some(i) => {
                // A parameter's entries stay where its first lineage put them.
                let at = self
                    .lineage
                    .iter()
                    .position(|(p, _)| *p == i)
                    .unwrap_or(self.lineage.len());
                let calls = calls.into_iter().map(|c| (i, Some(c.into())));
                if at == self.lineage.len() {
                    self.lineage.extend(calls);
                    if self.lineage.len() == at {
                        self.lineage.push((i, None));
                    }
                } else {
                    self.lineage.retain(|(p, _)| *p != i);
                    let mut run: Vec<_> = calls.collect();
                    if run.is_empty() {
                        run.push((i, None));
                    }
                    self.lineage.splice(at..at, run);
                }
            }
            None => self.foreign = Some("parameter"),
        }
        self
    }

    /// The call's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn slot(&self, param: ParamHandle) -> Option<usize> {
        (param.stamp == self.tool.stamp && param.tool == self.tool.tool).then_some(param.index)
    }
}

/// A call as [`Session::authorize`] and [`Session::check`] take it: a JSON
/// [`Call`], a [`TypedCall`] by reference (its values are copied) or by
/// value (moved, nothing copied).
pub struct CallArg<'a>(Input<'a>);

enum Input<'a> {
    Json(&'a Call),
    Typed(&'a TypedCall),
    Owned(TypedCall),
}

impl<'a> From<&'a Call> for CallArg<'a> {
    fn from(c: &'a Call) -> Self {
        CallArg(Input::Json(c))
    }
}

impl<'a> From<&'a TypedCall> for CallArg<'a> {
    fn from(c: &'a TypedCall) -> Self {
        CallArg(Input::Typed(c))
    }
}

impl From<TypedCall> for CallArg<'_> {
    fn from(c: TypedCall) -> Self {
        CallArg(Input::Owned(c))
    }
}

impl<'a> CallArg<'a> {
    /// The call's id.
    pub fn id(&self) -> &str {
        match &self.0 {
            Input::Json(c) => &c.id,
            Input::Typed(c) => &c.id,
            Input::Owned(c) => &c.id,
        }
    }

    /// The tool the call names, as far as the policy knows it (no check).
    pub(crate) fn tool_hint(&self, session: &Session) -> Option<ToolId> {
        match &self.0 {
            Input::Json(c) => session.tool_of(&c.tool),
            Input::Typed(c) => Some(c.tool.tool),
            Input::Owned(c) => Some(c.tool.tool),
        }
    }

    pub(crate) fn time(&self) -> u64 {
        match &self.0 {
            Input::Json(c) => c.time,
            Input::Typed(c) => c.time,
            Input::Owned(c) => c.time,
        }
    }

    fn typed(&self) -> Option<&TypedCall> {
        match &self.0 {
            Input::Json(_) => None,
            Input::Typed(c) => Some(c),
            Input::Owned(c) => Some(c),
        }
    }

    /// A handle that does not belong to the session's policy: a programming
    /// error, not a call to decide.
    pub(crate) fn foreign(&self, session: &Session) -> Option<StepError> {
        let c = self.typed()?;
        let stamp = Stamp::of_hash(session.policy_hash());
        let what = if c.tool.stamp != stamp {
            Some("tool")
        } else {
            c.foreign
        };
        what.map(|handle| StepError::ForeignHandle {
            call: c.id.clone(),
            handle,
        })
    }

    /// The call's id (moved out of an owned call) and its resolution; a
    /// call that is not well-formed comes back with its tool and agent, as
    /// far as they are known, for the record.
    pub(crate) fn into_parts(self, session: &Session) -> (Cow<'a, str>, Result<Resolved, Failed>) {
        match self.0 {
            Input::Json(c) => (
                Cow::Borrowed(c.id.as_str()),
                session.resolve(c).map_err(|m| {
                    let agent = session.agent_of(c.agent.as_deref()).unwrap_or(0);
                    (m, session.tool_of(&c.tool), agent)
                }),
            ),
            Input::Typed(c) => (
                Cow::Borrowed(c.id.as_str()),
                resolve_owned(session, c.clone()),
            ),
            Input::Owned(mut c) => (
                Cow::Owned(std::mem::take(&mut c.id)),
                resolve_owned(session, c),
            ),
        }
    }
}

/// A call that is not well-formed: why, and its tool and agent.
pub(crate) type Failed = (Malformed, Option<ToolId>, AgentId);

fn resolve_owned(session: &Session, c: TypedCall) -> Result<Resolved, Failed> {
    let (tool, agent) = (c.tool.tool, c.agent.map_or(0, |a| a.agent));
    session.resolve_typed(c).map_err(|m| (m, Some(tool), agent))
}

/// Checks a typed value against a parameter's declared type, as
/// [`Value::from_json_typed`] does for JSON: decimals accept integers and
/// exact decimal strings.
fn conform(value: Value, ty: ParamType, list: bool) -> Result<Value, TypeMismatch> {
    if list {
        let Value::List(items) = value else {
            return Err(TypeMismatch {
                got: crate::object::value_kind(&value).into(),
            });
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            out.push(conform_scalar(item, ty).map_err(|e| TypeMismatch {
                got: format!("element {i} is {}", e.got),
            })?);
        }
        return Ok(Value::List(out));
    }
    conform_scalar(value, ty)
}

fn conform_scalar(value: Value, ty: ParamType) -> Result<Value, TypeMismatch> {
    match (ty, value) {
        (ParamType::Str, v @ Value::Str(_))
        | (ParamType::Int, v @ Value::Int(_))
        | (ParamType::Bool, v @ Value::Bool(_))
        | (ParamType::Decimal, v @ Value::Decimal(_)) => Ok(v),
        (ParamType::Decimal, Value::Int(i)) => Ok(Value::Decimal(Decimal::from(i))),
        (ParamType::Decimal, Value::Str(s)) => {
            s.parse::<Decimal>()
                .map(Value::Decimal)
                .map_err(|e| TypeMismatch {
                    got: format!("string {s:?} ({e})"),
                })
        }
        (_, v) => Err(TypeMismatch {
            got: crate::object::value_kind(&v).into(),
        }),
    }
}

impl Session {
    /// Resolves a typed call: the same checks as for JSON, by index.
    fn resolve_typed(&self, call: TypedCall) -> Result<Resolved, Malformed> {
        let tool = call.tool.tool;
        let agent = call.agent.map_or(0, |a| a.agent);
        self.check_static_scope(agent, tool)?;
        let spec = &self.shared.0.policy.tools[tool];
        // The call's own vector becomes the request's: an argument of its
        // declared scalar type stays where it is; only the others (absent,
        // null, lists, integers for decimals, ...) go through `argument`.
        let mut args = call.args;
        args.resize(spec.params.len(), Value::Null);
        for (i, (p, slot)) in spec.params.iter().zip(args.iter_mut()).enumerate() {
            let exact = !p.list
                && matches!(
                    (p.ty, &*slot),
                    (ParamType::Str, Value::Str(_))
                        | (ParamType::Int, Value::Int(_))
                        | (ParamType::Bool, Value::Bool(_))
                        | (ParamType::Decimal, Value::Decimal(_))
                );
            if exact {
                continue;
            }
            let value = std::mem::replace(slot, Value::Null);
            let given = value != Value::Null || call.nulls.contains(&i);
            if p.ty == ParamType::Object {
                *slot = object_argument(
                    p,
                    given.then_some(value),
                    |v| *v == Value::Null,
                    |v| crate::object::conform(p, v, &conform),
                )?;
                continue;
            }
            *slot = argument(
                p,
                given.then_some(value),
                |v| *v == Value::Null,
                |v| conform(v, p.ty, p.list),
            )?;
        }
        self.check_task_scope(tool, &args)?;
        let mut lineage = Lineage::with_capacity(spec.params.len(), call.lineage.len());
        for (param, id) in &call.lineage {
            match id {
                Some(id) => lineage.add(*param, self.lineage_node(*param, tool, id)?),
                None => lineage.mark(*param),
            }
        }
        Ok(Resolved {
            req: crate::spec::Request {
                agent,
                tool,
                args,
                time: call.time,
            },
            lineage,
            inferred: Vec::new(),
        })
    }

    /// The node of call `id`, or why lineage cannot name it.
    pub(crate) fn lineage_node(
        &self,
        param: usize,
        tool: ToolId,
        id: &str,
    ) -> Result<NodeId, Malformed> {
        self.state.calls.get(id).copied().ok_or_else(|| {
            malformed(Reason::UnknownLineage {
                param: self.shared.0.policy.tools[tool].params[param].name.clone(),
                call: id.to_string(),
            })
        })
    }
}
