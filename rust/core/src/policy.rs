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

pub use crate::ids::{AgentId, FactId, GrantId, SanitizerId, ScopeId, SinkId, ToolId};

/// The name of the root agent every policy has (agent 0).
pub const ROOT_AGENT: &str = "main";

/// A compiled policy: everything the monitor needs to decide calls.
///
/// Its parts refer to each other by index (the `*Id` aliases of this
/// module), so a policy read from JSON or CBOR must pass
/// [`validate`](crate::validate::validate) before use; the order of
/// grants and rules is significant (the first match decides). Its content
/// hash, carried by every decision, is the SHA-256 of its canonical CBOR.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The policy's name (`policy "NAME";`, by default the file stem).
    pub name: String,
    /// Sensitivity levels, lowest first; a `Level` indexes this list.
    pub levels: Vec<String>,
    /// Declared categories; bit `i` of a `CategorySet` is `categories[i]`.
    pub categories: Vec<String>,
    /// Declared sink names (`sinks network, email;`); a [`SinkId`] indexes
    /// this list.
    pub sinks: Vec<String>,
    /// Discovered-resource sets, filled by results at run time.
    pub sets: Vec<String>,
    /// Facts that results establish (`Seen(fact)`).
    pub facts: Vec<String>,
    /// The tools agents may call, with their parameters, sinks and source
    /// rules; a call naming any other tool is denied as ill-formed.
    pub tools: Vec<Tool>,
    /// Labels of resources, joined into the output label of any call whose
    /// resource argument matches.
    pub resources: Vec<ResourceLabel>,
    /// Declared sanitizer specifications, referenced by
    /// [`Tool::sanitizer`].
    pub sanitizers: Vec<Sanitizer>,
    /// `agents[0]` is the root agent `main`; the others are delegates.
    pub agents: Vec<Agent>,
    /// Declared scopes, referenced by [`Agent::scope`].
    pub scopes: Vec<Scope>,
    /// Ordered: an admitted call consumes the first matching grant with quota.
    pub grants: Vec<Grant>,
    /// `deny|pause|allow flow` rules on sinks, in policy order.
    pub flow_rules: Vec<FlowRule>,
    /// `deny|pause path` and `deny|pause count` rules, in policy order.
    pub path_rules: Vec<PathRule>,
    /// `obligation` rules, in policy order.
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
    /// Grants whose quota all sessions of a tenant share (`quota N per
    /// tenant`), by index, strictly ascending; every other grant's quota is
    /// per session. Each is limited and has a name no other grant has: a
    /// tenant's pool counts units by grant name (`docs/semantics.md`,
    /// "Quota scope"). Omitted from the encoding when empty, so policies
    /// without shared quotas keep their content hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_grants: Vec<GrantId>,
    /// Amount budgets (`budget 5000.00 on amount`), strictly ascending by
    /// grant, at most one per grant. Omitted from the encoding when empty,
    /// so policies without budgets keep their content hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<Budget>,
    /// Per-parameter provenance by value (`provenance MODE on PARAM;` in a
    /// tool body), strictly ascending by (tool, parameter); every other
    /// parameter has [`ProvenanceMode::Words`]. Omitted from the encoding
    /// when empty, so policies without it keep their content hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub param_provenance: Vec<ParamProvenance>,
    /// Renewing quotas and budgets (`quota 20 per 10m`, `budget 5000.00 on
    /// amount per day`), sorted by grant, units before amounts, at most one
    /// of each per grant. Omitted from the encoding when empty, so policies
    /// without windows keep their content hash. `docs/semantics.md`,
    /// "Renewing quotas and budgets".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renewals: Vec<Renewal>,
    /// Count rules over a sliding time window (`deny count big: at most 2
    /// call pay within 1h;`): the count rule `path_rules[rule]` counts only
    /// the admitted calls admitted less than `secs` seconds before the
    /// call it judges. Strictly ascending by rule, each a count. Omitted from
    /// the encoding when empty, so policies without them keep their content
    /// hash. `docs/semantics.md`, "Counts over time windows".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub count_windows: Vec<CountWindow>,
    /// Per-field output labels (`output FIELD.PATH: LABEL;` in a tool
    /// body), strictly ascending by (tool, path): for provenance only, a
    /// leaf of an output takes the label of the longest declared path
    /// that leads to it in place of the tool's `output` label. Omitted from
    /// the encoding when empty, so policies without them keep their
    /// content hash. `docs/semantics.md`, "Per-field output labels".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_fields: Vec<OutputField>,
    /// Declared token kinds (`token NAME = SHAPE;`), in declaration order;
    /// [`TokenKind::Declared`](crate::tokens::TokenKind::Declared) indexes
    /// this list. Omitted from the encoding when empty, so policies
    /// without them keep their content hash. `docs/semantics.md`,
    /// "Token provenance inside text".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_shapes: Vec<crate::tokens::TokenShape>,
}

/// `output PATH: LABEL;` in a tool body: the label that provenance gives
/// the values under one field of the tool's output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputField {
    /// The tool.
    pub tool: ToolId,
    /// Object keys from the output's root (not empty); arrays on the way
    /// are descended into element-wise and add no key.
    pub path: Vec<String>,
    /// The label that replaces the tool's `output` label for the values
    /// under the path (joined, like it, with the call's sanitized inputs
    /// and resource labels).
    pub label: Label,
}

/// A count rule's sliding window (`within 10m`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountWindow {
    /// The count rule: an index into `Policy::path_rules` whose kind is
    /// [`PathKind::AtMost`].
    pub rule: usize,
    /// The window's length in seconds (at least 1): a call at time `t`
    /// counts the calls admitted at times `a` with `t - a < secs`.
    pub secs: u64,
}

/// How a parameter's value gains trust by value (with `provenance by
/// value;`): `docs/semantics.md`, "Per-parameter provenance".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProvenanceMode {
    /// Never by value: the argument takes the context's label.
    Off,
    /// The whole value, short values included (a number of at most two
    /// digits, a word of at most two characters).
    Exact,
    /// The whole value, but a short value never confers trust (the
    /// default).
    #[default]
    Words,
    /// Only a value that is one typed token (an e-mail address, a URL, an
    /// IBAN) gains trust by value.
    Tokens,
}

impl ProvenanceMode {
    /// The mode's keyword (`off`, `exact`, `words`, `tokens`).
    pub fn keyword(self) -> &'static str {
        match self {
            ProvenanceMode::Off => "off",
            ProvenanceMode::Exact => "exact",
            ProvenanceMode::Words => "words",
            ProvenanceMode::Tokens => "tokens",
        }
    }
}

/// `provenance MODE on PARAM` for one parameter of one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamProvenance {
    /// The tool.
    pub tool: ToolId,
    /// The parameter's index in the tool.
    pub param: usize,
    /// How its value gains trust by value.
    pub mode: ProvenanceMode,
}

/// A limit of a grant that renews in fixed calendar windows of `secs`
/// seconds (UTC-aligned: the window of time `t` is `t / secs`). At most
/// `limit` is held (reserved or kept) in each window; a call's units or
/// amount are lent by the window of its admission and go back to that
/// window only. A grant with a units renewal has `quota unlimited` in its
/// `quota` field (the renewal is its quota).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Renewal {
    /// The grant the limit is on.
    pub grant: GrantId,
    /// The window's length in seconds (at least 1).
    pub secs: u64,
    /// What each window holds at most.
    pub limit: RenewLimit,
    /// `per tenant`: every session of the tenant draws on one window (kept
    /// in the tenant's pool); otherwise each session has its own.
    #[serde(default, skip_serializing_if = "is_false")]
    pub per_tenant: bool,
}

/// What a renewing limit counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum RenewLimit {
    /// `quota N per WINDOW`: at most N calls served per window.
    Units(u64),
    /// `budget B on PARAM per WINDOW`: at most B of the calls' `param`
    /// values per window (a `decimal` or `int` parameter of the grant's tool).
    Amount {
        /// The budget of each window (not negative).
        amount: crate::decimal::Decimal,
        /// The parameter whose value a call spends.
        param: usize,
    },
}

impl RenewLimit {
    /// Whether this counts amounts (`budget ... per WINDOW`).
    pub fn is_amount(&self) -> bool {
        matches!(self, RenewLimit::Amount { .. })
    }
}

/// `budget AMOUNT on PARAM [per session|per tenant]` on a grant: every call
/// the grant serves spends the value of its `param` argument from
/// `amount`. The value is reserved when the call is admitted or paused,
/// kept on success or an unknown outcome, and returned on failure,
/// rejection, expiry or a denied approval. A call whose value exceeds what
/// is left, or whose value is negative or absent, is not served by the
/// grant (the next matching grant may serve it). `docs/semantics.md`,
/// "Budgets".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The grant that spends from the budget.
    pub grant: GrantId,
    /// The budget: the most that the calls it serves may hold at once
    /// (reserved by pauses and running calls, or kept). Not negative.
    pub amount: crate::decimal::Decimal,
    /// The parameter of the grant's tool whose value a call spends
    /// (`decimal` or `int`, not a list).
    pub param: usize,
    /// `per tenant`: every session of the tenant spends from one budget
    /// (kept in the tenant's pool by grant name); otherwise each session
    /// has the whole budget.
    #[serde(default, skip_serializing_if = "is_false")]
    pub per_tenant: bool,
}

/// A declared parameter of a tool (`name: ty`, `name?: list<ty>`). A call
/// must pass an argument of this type (or none, if optional).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// The parameter's name, unique within its tool; arguments and
    /// conditions by name refer to it.
    pub name: String,
    /// The scalar type (of each element, for a list).
    pub ty: ParamType,
    /// `list<ty>`: a JSON array of values of `ty`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub list: bool,
    /// `name?: ty`: the argument may be absent or `null` (it is then `Value::Null`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub optional: bool,
    /// For `ty == Object`: the object's fields, each a parameter of its own
    /// (name, type, `list`, `optional`, nested `fields`). An argument with a
    /// field not declared here is ill-typed (objects are closed). Empty and
    /// omitted from the encoding for every other type, so policies without
    /// objects keep their content hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Param>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Param {
    /// The type as written: `string`, `list<int>`, `{a: string, b?: int}`,
    /// `list<{a: string}>`.
    pub fn type_name(&self) -> String {
        let one = if self.ty == ParamType::Object {
            shape_name(&self.fields)
        } else {
            self.ty.to_string()
        };
        if self.list {
            format!("list<{one}>")
        } else {
            one
        }
    }
}

/// The type of an object with these fields, as written: `{a: string, b?: list<int>}`.
pub fn shape_name(fields: &[Param]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|f| {
            format!(
                "{}{}: {}",
                field_name(&f.name),
                if f.optional { "?" } else { "" },
                f.type_name()
            )
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// A field name as written in the policy language: bare when it is an
/// identifier, in backticks otherwise.
fn field_name(name: &str) -> String {
    let ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ident {
        name.to_string()
    } else {
        format!("`{}`", name.replace('\\', "\\\\").replace('`', "\\`"))
    }
}

/// A sink a tool reaches, and the arguments that flow into it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkUse {
    /// The sink reached.
    pub sink: SinkId,
    /// Parameter indexes bound to the sink (`sink payments on recipient,
    /// amount`); `None`: every argument flows into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<usize>>,
}

/// A tool agents may call (`tool NAME(PARAMS) { ... }`): its signature and
/// what the policy says about the data flowing into and out of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// The tool's name as calls give it, e.g. `fs.read`; unique.
    pub name: String,
    /// The declared parameters, in order; parameter indexes elsewhere in the
    /// policy index this list.
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
    /// The index of the parameter called `name`, if the tool has one.
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
    /// The fact established.
    pub fact: FactId,
    /// The test the output must pass; `None`: every succeeded result
    /// establishes the fact.
    pub when: Option<OutputTest>,
}

/// A test on a result's JSON output: the value at a JSON pointer (RFC
/// 6901; `""` is the whole output, which may be a text string). An array
/// there is tested like a list argument (every element, or some with
/// `Quant::Any`); a missing value fails the test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputTest {
    /// The JSON pointer selecting the tested value (`output.a.b` is `/a/b`).
    pub pointer: String,
    /// For an array: whether every element (the default) or some element
    /// must pass.
    #[serde(default)]
    pub quant: crate::value::Quant,
    /// The test applied to the selected value.
    pub op: ArgOp,
}

impl OutputTest {
    /// Whether the test holds on a result's `output`. `sets` are the
    /// session's discovered sets, indexed by set id, for `in SET` tests. A
    /// missing value, or one that is neither a scalar nor an array of
    /// scalars (e.g. an object), fails the test.
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

/// `resource PATTERN label LABEL`: the label of the resources a pattern
/// matches, joined into the output label of a call whose resource argument
/// matches it, and into the label its flows carry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLabel {
    /// Matched against a call's resource argument.
    pub pattern: Pattern,
    /// The label of the matching resources, e.g. `<secret, {credential},
    /// trusted>` for `~/.ssh/*`.
    pub label: Label,
}

/// An agent that makes calls: the root agent `main` or a delegate (`agent
/// NAME from PARENT`). A delegate's call consumes a grant unit of every
/// agent on its delegation chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The agent's name, as calls and conditions (`agent == NAME`) give it.
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
    /// The scope's name; a call outside the scope is denied with this name
    /// as the rule.
    pub name: String,
    /// Globs over tool names; a tool is in the scope if any matches.
    pub tools: Vec<String>,
}

impl Scope {
    /// Whether the tool called `tool` is in the scope.
    pub fn allows(&self, tool: &str) -> bool {
        self.tools.iter().any(|g| glob_matches(g, tool))
    }
}

/// How many calls a grant may admit: its quota in the policy, and in the
/// ledger the units it has left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Quota {
    /// At most this many units (`quota N`); each admitted call takes one.
    Limited(u64),
    /// `quota unlimited`: never decremented.
    Unlimited,
}

impl Quota {
    /// Whether a unit can be taken: unlimited, or at least one left.
    pub fn is_available(self) -> bool {
        self != Quota::Limited(0)
    }
}

/// `grant NAME: TOOL ...`: authority for an agent to call a tool, limited
/// by resource pattern, conditions, quota, approval and expiry. Grants are
/// the only source of authority: a call no grant covers is denied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// The grant's name, reported in decisions that use it.
    pub name: String,
    /// The agent holding the grant (`agent A`; default `main`).
    pub agent: AgentId,
    /// The tool it covers.
    pub tool: ToolId,
    /// Pattern on the tool's resource argument (`None`: any resource).
    pub resource: Option<Pattern>,
    /// Conditions on the arguments (and calling agent); all must hold.
    pub args: Vec<ArgCond>,
    /// How many calls it may admit. A unit comes back when the call fails,
    /// its pause is rejected, or its approval is denied.
    pub quota: Quota,
    /// Admission needs a human approval: the unit is reserved, the call PAUSEs.
    pub approval: bool,
    /// The grant matches no call at or after this time (seconds).
    pub expires_at: Option<u64>,
    /// A succeeded result of a call admitted by this grant adds the values it
    /// reports as discovered to this set.
    pub discovers: Option<SetId>,
}

/// What a flow rule (or receive rule) does with the flows it judges.
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
    /// The rule's name, reported in the decisions it makes.
    pub name: String,
    /// The sink whose incoming flows the rule judges.
    pub sink: SinkId,
    /// Deny, pause or allow, with the rule's pattern or ceiling.
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
    /// The rule's name, reported in the decisions it makes.
    pub name: String,
    /// The receiving agent: the rule judges the calls this agent makes.
    pub agent: AgentId,
    /// Deny, pause or allow, with the rule's pattern or ceiling.
    pub effect: FlowEffect,
    /// Condition on the call's arguments, by parameter name, as for
    /// [`FlowRule::when`].
    pub when: NamedCond,
}

/// `deny call TOOL when COND` (or `pause call`): forbid calls on their
/// arguments, without a sink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRule {
    /// The rule's name, reported in the decisions it makes.
    pub name: String,
    /// Whether a matching call is denied or paused.
    pub effect: RuleEffect,
    /// The tool whose calls the rule judges.
    pub tool: ToolId,
    /// Condition on the call's arguments (by parameter index) and calling
    /// agent; the rule fires when it holds.
    pub when: ArgCond,
}

/// What a call rule, path rule, count or obligation does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RuleEffect {
    /// The call is denied.
    Deny,
    /// The call still needs a grant, and then PAUSEs for a human.
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

/// What a [`PathRule`] looks for in the history of admitted calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PathKind {
    /// The steps occur in this order among admitted calls, with anything in
    /// between; the last step is the call being decided.
    Sequence(Vec<StepPattern>),
    /// At most `max` admitted calls match `step`; the call that would be
    /// number `max + 1` is stopped.
    AtMost {
        /// The number of matching admitted calls allowed.
        max: u64,
        /// The calls counted.
        step: StepPattern,
    },
}

/// `deny|pause path NAME: S1 -> ... -> Sn` or `deny|pause count NAME: at
/// most K S`: a rule over the session's history of admitted calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRule {
    /// The rule's name, reported in the decisions it makes.
    pub name: String,
    /// Whether the stopped call is denied or paused.
    pub effect: RuleEffect,
    /// A sequence of steps, or a count.
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
    /// The obligation's name, reported in the decisions it makes.
    pub name: String,
    /// [`RuleEffect::Deny`], or [`RuleEffect::Pause`] with `else pause`.
    pub effect: RuleEffect,
    /// The fact required.
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
            shared_grants: vec![],
            budgets: vec![],
            param_provenance: vec![],
            renewals: vec![],
            count_windows: vec![],
            output_fields: vec![],
            token_shapes: vec![],
        }
    }

    /// The labels of an output of `tool` for provenance: `whole` is the
    /// call's label, `base` the call's sanitized inputs joined with its
    /// resource labels (its label without the tool's `output` label), which
    /// each declared field's label joins.
    pub fn output_labels(
        &self,
        tool: ToolId,
        whole: Label,
        base: Label,
    ) -> crate::fields::OutputLabels {
        crate::fields::OutputLabels {
            whole,
            fields: self
                .output_fields_of(tool)
                .iter()
                .map(|f| (f.path.clone(), base.join(&f.label)))
                .collect(),
        }
    }

    /// The declared output fields of `tool` (`output PATH: LABEL;`), by
    /// path.
    pub fn output_fields_of(&self, tool: ToolId) -> &[OutputField] {
        if self.output_fields.is_empty() {
            return &[];
        }
        let start = self.output_fields.partition_point(|f| f.tool < tool);
        let end = self.output_fields.partition_point(|f| f.tool <= tool);
        &self.output_fields[start..end]
    }

    /// The sliding window of path rule `rule` in seconds, if it is a count
    /// `within` a window.
    pub fn count_window(&self, rule: usize) -> Option<u64> {
        if self.count_windows.is_empty() {
            return None;
        }
        self.count_windows
            .binary_search_by_key(&rule, |w| w.rule)
            .ok()
            .map(|i| self.count_windows[i].secs)
    }

    /// Whether some rule tests token origins (`any url in body from
    /// untrusted`): in a flow, receive or call rule, or a path step or
    /// reset. (Grants may not: `validate` refuses it.)
    pub fn has_token_tests(&self) -> bool {
        let step = |s: &StepPattern| s.when.as_ref().is_some_and(|c| c.has_tokens());
        self.flow_rules.iter().any(|r| r.when.has_tokens())
            || self.receive_rules.iter().any(|r| r.when.has_tokens())
            || self.call_rules.iter().any(|r| r.when.has_tokens())
            || self
                .grants
                .iter()
                .any(|g| g.args.iter().any(|c| c.has_tokens()))
            || self.path_rules.iter().any(|r| {
                r.reset.as_ref().is_some_and(step)
                    || match &r.kind {
                        PathKind::Sequence(steps) => steps.iter().any(step),
                        PathKind::AtMost { step: s, .. } => step(s),
                    }
            })
    }

    /// How parameter `param` of tool `tool` gains trust by value (the
    /// default, [`ProvenanceMode::Words`], unless the policy says otherwise).
    pub fn provenance_mode(&self, tool: ToolId, param: usize) -> ProvenanceMode {
        if self.param_provenance.is_empty() {
            return ProvenanceMode::Words;
        }
        self.param_provenance
            .binary_search_by_key(&(tool, param), |p| (p.tool, p.param))
            .ok()
            .and_then(|i| self.param_provenance.get(i))
            .map_or(ProvenanceMode::Words, |p| p.mode)
    }

    /// The renewing limits of grant `g` (indexes into `renewals`, at most
    /// two: units, then amount).
    pub fn renewals_of(&self, g: GrantId) -> impl Iterator<Item = usize> + '_ {
        let start = self.renewals.partition_point(|r| r.grant < g);
        (start..self.renewals.len()).take_while(move |&i| self.renewals[i].grant == g)
    }

    /// Whether grant `g` has a renewing limit.
    pub fn renews(&self, g: GrantId) -> bool {
        !self.renewals.is_empty() && self.renewals_of(g).next().is_some()
    }

    /// Whether some renewing limit is shared by the tenant's sessions.
    pub fn has_tenant_renewals(&self) -> bool {
        self.renewals.iter().any(|r| r.per_tenant)
    }

    /// Grant `g`'s amount budget, if it has one.
    pub fn budget_of(&self, g: GrantId) -> Option<&Budget> {
        if self.budgets.is_empty() {
            return None;
        }
        self.budgets
            .binary_search_by_key(&g, |b| b.grant)
            .ok()
            .and_then(|i| self.budgets.get(i))
    }

    /// Whether some grant spends from a budget the tenant's sessions share.
    pub fn has_tenant_budgets(&self) -> bool {
        self.budgets.iter().any(|b| b.per_tenant)
    }

    /// Whether grant `g`'s quota is shared by the tenant's sessions
    /// (`quota N per tenant`).
    pub fn is_shared(&self, g: GrantId) -> bool {
        !self.shared_grants.is_empty() && self.shared_grants.binary_search(&g).is_ok()
    }

    /// The id of the tool called `name`, if declared. A linear scan; the
    /// monitor uses its own index.
    pub fn tool_id(&self, name: &str) -> Option<ToolId> {
        self.tools.iter().position(|t| t.name == name)
    }
    /// The id of the agent called `name`, if declared. A linear scan.
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

    /// The name of sensitivity level `l`, or `?` if it is out of range.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::CategorySet;
    use crate::value::{Quant, Value};
    use serde_json::json;

    fn param(name: &str, ty: ParamType, list: bool, optional: bool) -> Param {
        Param {
            name: name.into(),
            ty,
            list,
            optional,
            fields: Vec::new(),
        }
    }

    fn tool(name: &str, sinks: &[SinkId]) -> Tool {
        Tool {
            name: name.into(),
            params: vec![
                param("to", ParamType::Str, false, false),
                param("n", ParamType::Int, true, true),
            ],
            resource: None,
            sinks: sinks
                .iter()
                .map(|&sink| SinkUse { sink, params: None })
                .collect(),
            output: Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        }
    }

    #[test]
    fn parameters_print_their_type_and_omit_defaults_in_json() {
        let t = tool("send", &[]);
        assert_eq!(t.params[0].type_name(), "string");
        assert_eq!(t.params[1].type_name(), "list<int>");
        assert_eq!(
            serde_json::to_value(&t.params[0]).unwrap(),
            json!({"name": "to", "ty": "Str"})
        );
        assert_eq!(
            serde_json::to_value(&t.params[1]).unwrap(),
            json!({"name": "n", "ty": "Int", "list": true, "optional": true})
        );
        assert_eq!(t.param_index("n"), Some(1));
        assert_eq!(t.param_index("to"), Some(0));
        assert_eq!(t.param_index("x"), None);
        let mut p = Policy::empty("p");
        let v = serde_json::to_value(&p).unwrap();
        assert!(v.get("provenance_by_value").is_none());
        p.provenance_by_value = true;
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["provenance_by_value"], json!(true));
    }

    #[test]
    fn tools_reach_their_sinks_only() {
        let t = tool("send", &[1, 3]);
        assert!(t.reaches(1) && t.reaches(3));
        assert!(!t.reaches(0) && !t.reaches(2));
        assert!(!tool("read", &[]).reaches(0));
        let step = |tool: Option<&str>, sink: Option<SinkId>| StepPattern {
            tool: tool.map(String::from),
            sink,
            ..StepPattern::default()
        };
        assert!(step(None, None).matches_tool(&t));
        assert!(step(Some("se*"), None).matches_tool(&t));
        assert!(!step(Some("read*"), None).matches_tool(&t));
        assert!(step(Some("se*"), Some(3)).matches_tool(&t));
        assert!(!step(Some("se*"), Some(2)).matches_tool(&t));
        assert!(!step(None, Some(2)).matches_tool(&t));
        assert!(step(None, Some(1)).matches_tool(&t));
    }

    #[test]
    fn output_tests_look_at_the_pointed_value() {
        let sets = [std::collections::BTreeSet::from(["a".to_string()])];
        let test = |pointer: &str, quant, op| OutputTest {
            pointer: pointer.into(),
            quant,
            op,
        };
        let out = json!({"status": "ok", "ids": ["a", "b"], "n": 3, "deep": {"x": [1, {"y": 2}]}});
        let ok = ArgOp::Eq(Value::Str("ok".into()));
        assert!(test("/status", Quant::All, ok.clone()).holds(&out, &sets));
        assert!(
            !test("/status", Quant::All, ArgOp::Eq(Value::Str("no".into()))).holds(&out, &sets)
        );
        assert!(
            !test("/missing", Quant::All, ArgOp::Ne(Value::Str("x".into()))).holds(&out, &sets)
        );
        // An array is tested element by element.
        assert!(test("/ids", Quant::Any, ArgOp::InSet(0)).holds(&out, &sets));
        assert!(!test("/ids", Quant::All, ArgOp::InSet(0)).holds(&out, &sets));
        assert!(test("/n", Quant::All, ArgOp::Ge(3.into())).holds(&out, &sets));
        // An array holding an object, or an object, is never a value.
        assert!(!test("/deep/x", Quant::Any, ArgOp::Ne(Value::Int(5))).holds(&out, &sets));
        assert!(!test("/deep", Quant::All, ArgOp::Ne(Value::Null)).holds(&out, &sets));
        // `""` is the whole output: a text result.
        assert!(test("", Quant::All, ok.clone()).holds(&json!("ok"), &sets));
        assert!(!test("", Quant::All, ok).holds(&json!("nok"), &sets));
    }

    #[test]
    fn scopes_and_quotas() {
        let s = Scope {
            name: "s".into(),
            tools: vec!["read_*".into(), "list".into()],
        };
        assert!(s.allows("read_file") && s.allows("list"));
        assert!(!s.allows("send") && !s.allows("lists"));
        assert!(Quota::Unlimited.is_available());
        assert!(Quota::Limited(1).is_available());
        assert!(!Quota::Limited(0).is_available());
    }

    #[test]
    fn policies_look_up_names_and_chains() {
        let mut p = Policy::empty("demo");
        assert_eq!(p.name, "demo");
        assert_eq!(p.levels, vec!["public".to_string()]);
        assert_eq!(p.agents.len(), 1);
        assert_eq!(p.agents[0].name, ROOT_AGENT);
        assert_eq!(p.agents[0].parent, None);
        assert!(p.tools.is_empty() && p.grants.is_empty() && !p.provenance_by_value);
        p.tools = vec![tool("read", &[]), tool("send", &[0])];
        for (name, parent) in [("helper", 0), ("sub", 1)] {
            p.agents.push(Agent {
                name: name.into(),
                parent: Some(parent),
                scope: None,
                own_context: false,
            });
        }
        assert_eq!(p.tool_id("send"), Some(1));
        assert_eq!(p.tool_id("read"), Some(0));
        assert_eq!(p.tool_id("nope"), None);
        assert_eq!(p.agent_id("sub"), Some(2));
        assert_eq!(p.agent_id(ROOT_AGENT), Some(0));
        assert_eq!(p.agent_id("nope"), None);
        assert_eq!(p.agent_chain(2), vec![2, 1, 0]);
        assert_eq!(p.agent_chain(0), vec![0]);
        // A cycle is cut off after as many steps as there are agents.
        p.agents[1].parent = Some(2);
        assert_eq!(p.agent_chain(2), vec![2, 1, 2]);
        assert_eq!(p.chain_iter(1).count(), 3);
        // With no agents at all, the chain is still the agent asked about.
        p.agents.clear();
        assert_eq!(p.agent_chain(0), vec![0]);
    }

    #[test]
    fn labels_print_in_the_surface_syntax() {
        let mut p = Policy::empty("p");
        p.levels = vec!["public".into(), "secret".into()];
        p.categories = vec!["pii".into(), "finance".into()];
        assert_eq!(p.level_name(1), "secret");
        assert_eq!(p.level_name(0), "public");
        assert_eq!(p.level_name(2), "?");
        assert_eq!(p.show_label(&Label::BOTTOM), "<public, {}, trusted>");
        assert_eq!(
            p.show_label(&Label::new(1, CategorySet(0b111), false)),
            "<secret, {pii, finance, ?}, untrusted>"
        );
    }
}
