//! The compiled policy: the core model that the policy language compiles to
//! and that the monitor, the verifiers and the Lean spec interpret.
//!
//! Everything is referenced by index into the policy's own lists, so a
//! compiled policy is self-contained, cheap to evaluate and serializes
//! deterministically (no hash maps).

use crate::label::{Label, LabelPattern, Level, Sanitizer};
use crate::pattern::{glob_matches, Pattern};
use crate::value::{ArgCond, ArgOp, NamedCond, ParamType, SetId};
use serde::{Deserialize, Serialize};

pub type ToolId = usize;
pub type SinkId = usize;
pub type FactId = usize;
pub type AgentId = usize;
pub type ScopeId = usize;
pub type GrantId = usize;
pub type SanitizerId = usize;

/// The name of the root agent every policy has (agent 0).
pub const ROOT_AGENT: &str = "main";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub name: String,
    /// Sensitivity levels, lowest first; a `Level` indexes this list.
    pub levels: Vec<String>,
    /// Declared categories; bit `i` of a `CategorySet` is `categories[i]`.
    pub categories: Vec<String>,
    pub sinks: Vec<String>,
    /// Discovered-resource sets, filled by results at run time.
    pub sets: Vec<String>,
    /// Facts that results establish (`Seen(fact)`).
    pub facts: Vec<String>,
    pub tools: Vec<Tool>,
    /// Labels of resources, joined into the output label of any call whose
    /// resource argument matches.
    pub resources: Vec<ResourceLabel>,
    pub sanitizers: Vec<Sanitizer>,
    /// `agents[0]` is the root agent `main`; the others are delegates.
    pub agents: Vec<Agent>,
    pub scopes: Vec<Scope>,
    /// Ordered: an admitted call consumes the first matching grant with quota.
    pub grants: Vec<Grant>,
    pub flow_rules: Vec<FlowRule>,
    pub path_rules: Vec<PathRule>,
    pub obligations: Vec<Obligation>,
    /// `deny call` / `pause call` rules.
    #[serde(default)]
    pub call_rules: Vec<CallRule>,
    /// Flow rules into agents (`-> agent NAME`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receive_rules: Vec<ReceiveRule>,
    /// Provenance by value (`provenance by value;`): an argument whose value
    /// occurs in the user's task text, or only in trusted outputs, takes
    /// that source's label instead of the whole context's.
    #[serde(default, skip_serializing_if = "is_false")]
    pub provenance_by_value: bool,
    /// Discovered sets a `task` event may seed (`task seeds SET;`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_seeds: Vec<SetId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub name: String,
    /// The scalar type (of each element, for a list).
    pub ty: ParamType,
    /// `list<ty>`: a JSON array of values of `ty`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub list: bool,
    /// `name?: ty`: the argument may be absent or `null` (it is then `Value::Null`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub optional: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Param {
    /// The type as written: `string`, `list<int>`.
    pub fn type_name(&self) -> String {
        if self.list {
            format!("list<{}>", self.ty)
        } else {
            self.ty.to_string()
        }
    }
}

/// A sink a tool reaches, and the arguments that flow into it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkUse {
    pub sink: SinkId,
    /// Parameter indexes bound to the sink (`sink payments on recipient,
    /// amount`); `None`: every argument flows into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<usize>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub name: String,
    pub params: Vec<Param>,
    /// The parameter that names the resource the call acts on (grants'
    /// resource patterns and resource labels apply to it).
    pub resource: Option<usize>,
    /// Sinks the call's arguments flow into.
    pub sinks: Vec<SinkUse>,
    /// Source rule: the label of what the tool returns (joined with the
    /// labels of its inputs and of the resource it reads).
    pub output: Label,
    /// A trusted sanitizer specification that transforms the inputs' label.
    pub sanitizer: Option<SanitizerId>,
    /// Facts a succeeded result establishes.
    pub facts: Vec<FactRule>,
}

impl Tool {
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// Whether the call reaches `sink`.
    pub fn reaches(&self, sink: SinkId) -> bool {
        self.sinks.iter().any(|s| s.sink == sink)
    }
}

/// `fact F [when output.FIELD OP VALUE]`: a succeeded result establishes
/// `F`, if the output field satisfies the test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactRule {
    pub fact: FactId,
    pub when: Option<OutputTest>,
}

/// A test on a result's JSON output: the value at a JSON pointer (RFC
/// 6901; `""` is the whole output, which may be a text string). An array
/// there is tested like a list argument (every element, or some with
/// `Quant::Any`); a missing value fails the test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputTest {
    pub pointer: String,
    #[serde(default)]
    pub quant: crate::value::Quant,
    pub op: ArgOp,
}

impl OutputTest {
    pub fn holds(
        &self,
        output: &serde_json::Value,
        sets: &[std::collections::BTreeSet<String>],
    ) -> bool {
        let Some(found) = output.pointer(&self.pointer) else {
            return false;
        };
        let value = match found {
            serde_json::Value::Array(items) => {
                match items.iter().map(crate::value::Value::from_json).collect() {
                    Some(list) => crate::value::Value::List(list),
                    None => return false,
                }
            }
            other => match crate::value::Value::from_json(other) {
                Some(v) => v,
                None => return false,
            },
        };
        self.op.eval(self.quant, &value, sets)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLabel {
    pub pattern: Pattern,
    pub label: Label,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub name: String,
    /// The delegator; `None` only for the root agent.
    pub parent: Option<AgentId>,
    /// Task scope: the tools this agent may call at all.
    pub scope: Option<ScopeId>,
    /// `own context`: the agent has its own context node (what it and its
    /// delegates have read), for adapters that know which agent saw what.
    /// Default: the session's shared context.
    #[serde(default, skip_serializing_if = "is_false")]
    pub own_context: bool,
}

/// A task scope: tool-name globs an agent is confined to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    pub name: String,
    pub tools: Vec<String>,
}

impl Scope {
    pub fn allows(&self, tool: &str) -> bool {
        self.tools.iter().any(|g| glob_matches(g, tool))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Quota {
    Limited(u64),
    Unlimited,
}

impl Quota {
    pub fn is_available(self) -> bool {
        self != Quota::Limited(0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    pub name: String,
    pub agent: AgentId,
    pub tool: ToolId,
    /// Pattern on the tool's resource argument (`None`: any resource).
    pub resource: Option<Pattern>,
    /// Conditions on the arguments (and calling agent); all must hold.
    pub args: Vec<ArgCond>,
    pub quota: Quota,
    /// Admission needs a human approval: the unit is reserved, the call PAUSEs.
    pub approval: bool,
    /// The grant matches no call at or after this time (seconds).
    pub expires_at: Option<u64>,
    /// A succeeded result of a call admitted by this grant adds the values it
    /// reports as discovered to this set.
    pub discovers: Option<SetId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlowEffect {
    /// Forbid flows whose label matches the (upward-closed) pattern.
    Deny(LabelPattern),
    /// Ask a human about flows whose label matches the pattern: the call
    /// still needs a grant, and then PAUSEs. A deny rule that also matches
    /// wins.
    Pause(LabelPattern),
    /// Exempt flows whose label is at most this ceiling, when the conditions
    /// hold. Downward closed, so exemptions never break taint monotonicity.
    Allow(Label),
}

/// A flow rule on one sink. A flow into the sink is denied (paused) when
/// some deny (pause) rule matches its label and no allow rule whose
/// conditions hold has a ceiling above the label.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowRule {
    pub name: String,
    pub sink: SinkId,
    pub effect: FlowEffect,
    /// Condition on the call's arguments, by parameter name; a test on a
    /// parameter the tool lacks is false.
    pub when: NamedCond,
}

/// A flow rule about what an agent may receive (`-> agent NAME`): judged
/// on the input label of every call that agent makes, like a sink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiveRule {
    pub name: String,
    pub agent: AgentId,
    pub effect: FlowEffect,
    pub when: NamedCond,
}

/// `deny call TOOL when COND` (or `pause call`): forbid calls on their
/// arguments, without a sink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRule {
    pub name: String,
    pub effect: RuleEffect,
    pub tool: ToolId,
    pub when: ArgCond,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RuleEffect {
    Deny,
    Pause,
}

/// One step of a path pattern: a call that satisfies every given part.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepPattern {
    /// Glob over the tool name.
    pub tool: Option<String>,
    /// The call reaches this sink.
    pub sink: Option<SinkId>,
    /// The call's output label matches (what it reads).
    pub reads: Option<LabelPattern>,
    /// A condition on the call's arguments (`where ...`), by parameter name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<NamedCond>,
}

impl StepPattern {
    /// The static part: the tool name and the sinks it reaches.
    pub fn matches_tool(&self, tool: &Tool) -> bool {
        self.tool
            .as_deref()
            .is_none_or(|g| glob_matches(g, &tool.name))
            && self.sink.is_none_or(|s| tool.reaches(s))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PathKind {
    /// The steps occur in this order among admitted calls, with anything in
    /// between; the last step is the call being decided.
    Sequence(Vec<StepPattern>),
    /// At most `max` admitted calls match `step`; the call that would be
    /// number `max + 1` is stopped.
    AtMost { max: u64, step: StepPattern },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRule {
    pub name: String,
    pub effect: RuleEffect,
    pub kind: PathKind,
    /// An admitted call matching this pattern starts the history afresh
    /// ("since the last X").
    pub reset: Option<StepPattern>,
}

/// `require FACT [since X] before TOOL`: a call matching `before` needs
/// `Seen(fact)` after the last admitted call matching `since` (or ever).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Obligation {
    pub name: String,
    pub effect: RuleEffect,
    pub fact: FactId,
    /// Glob over tool names.
    pub before: String,
    /// Glob over tool names.
    pub since: Option<String>,
}

impl Policy {
    /// An empty policy with the root agent and one sensitivity level.
    pub fn empty(name: &str) -> Policy {
        Policy {
            name: name.to_string(),
            levels: vec!["public".into()],
            categories: vec![],
            sinks: vec![],
            sets: vec![],
            facts: vec![],
            tools: vec![],
            resources: vec![],
            sanitizers: vec![],
            agents: vec![Agent {
                name: ROOT_AGENT.into(),
                parent: None,
                scope: None,
                own_context: false,
            }],
            scopes: vec![],
            grants: vec![],
            flow_rules: vec![],
            path_rules: vec![],
            obligations: vec![],
            call_rules: vec![],
            receive_rules: vec![],
            provenance_by_value: false,
            task_seeds: vec![],
        }
    }

    pub fn tool_id(&self, name: &str) -> Option<ToolId> {
        self.tools.iter().position(|t| t.name == name)
    }
    pub fn agent_id(&self, name: &str) -> Option<AgentId> {
        self.agents.iter().position(|a| a.name == name)
    }

    /// The agent and its delegators, nearest first, ending at the root.
    /// A cycle (rejected by the compiler and by `validate`) is cut off after
    /// as many steps as there are agents.
    pub fn agent_chain(&self, agent: AgentId) -> Vec<AgentId> {
        self.chain_iter(agent).collect()
    }

    /// `agent_chain` without allocating.
    pub fn chain_iter(&self, agent: AgentId) -> impl Iterator<Item = AgentId> + '_ {
        std::iter::successors(Some(agent), |&a| self.agents.get(a).and_then(|x| x.parent))
            .take(self.agents.len().max(1))
    }

    pub fn level_name(&self, l: Level) -> &str {
        self.levels.get(l as usize).map_or("?", String::as_str)
    }

    /// `<level, {cat, ...}, trusted|untrusted>`, the surface syntax of a label.
    pub fn show_label(&self, l: &Label) -> String {
        let cats: Vec<&str> = l
            .categories
            .indexes()
            .map(|i| self.categories.get(i).map_or("?", String::as_str))
            .collect();
        format!(
            "<{}, {{{}}}, {}>",
            self.level_name(l.sensitivity),
            cats.join(", "),
            if l.trusted { "trusted" } else { "untrusted" }
        )
    }
}
