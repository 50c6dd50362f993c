//! Lookup tables computed once per policy, so that a step touches only what
//! applies to the call's tool and never looks a name up linearly.

use super::fast_map::FastMap;
use crate::pattern::glob_matches;
use crate::policy::{AgentId, GrantId, PathKind, Policy, StepPattern, ToolId};
use crate::value::{ArgCond, NamedCond};

/// One path-rule step, specialised to each tool: `None` when the tool can
/// never match it (name or sink), else the argument condition to check.
pub(crate) type StepByTool = Vec<Option<ArgCond>>;

#[derive(Debug)]
pub(crate) struct Index {
    /// Tool and agent names.
    pub tools: FastMap<String, ToolId>,
    pub agents: FastMap<String, AgentId>,
    /// Per tool: whether some sink of it takes only some arguments (the
    /// monitor then labels each argument).
    pub bound_sinks: Vec<bool>,
    /// Per tool: parameter name -> index.
    pub params: Vec<FastMap<String, usize>>,
    /// Per tool: (name, index) in name order, for resolving the arguments
    /// of a JSON call (a map in name order) by a merge, one string
    /// comparison per argument instead of a hash ([`ParamCursor`]).
    pub params_by_name: Vec<Vec<(String, usize)>>,
    /// Grants per tool, in policy order.
    pub grants_for_tool: Vec<Vec<GrantId>>,
    /// Per sink: its flow rules, in policy order.
    pub flows_for_sink: Vec<Vec<usize>>,
    /// Per flow rule, per tool: the rule's `when`, resolved for the tool.
    pub flow_when: Vec<Vec<ArgCond>>,
    /// `scope_ok[agent][tool]`: the first scope on the agent's chain that
    /// excludes the tool; `None` for an agent with no scope on its chain
    /// (most of them), so the table stays small.
    pub scope_ok: Vec<Option<Vec<Option<usize>>>>,
    /// Call rules per tool.
    pub call_rules_for_tool: Vec<Vec<usize>>,
    /// Per path rule: each step (the count's one step) by tool.
    pub path_steps: Vec<Vec<StepByTool>>,
    pub path_reset: Vec<Option<StepByTool>>,
    /// Per obligation: tools matching `before` and `since`.
    pub obligation_before: Vec<Vec<bool>>,
    pub obligation_since: Vec<Option<Vec<bool>>>,
    /// Whether the policy labels any resources.
    pub has_resource_labels: bool,
    /// Per agent: the nearest agent on its chain (itself first) with its own
    /// context, whose context its arguments read (`None`: the shared one).
    pub context_owner: Vec<Option<AgentId>>,
    /// Per agent: the agents on its chain with their own context; a result
    /// of its call merges into each of them and into the shared context.
    pub merge_into: Vec<Vec<AgentId>>,
    /// Per agent: the receive rules about it, in policy order.
    pub receive_for_agent: Vec<Vec<usize>>,
    /// Per receive rule, per tool: its `when`, resolved for the tool.
    pub receive_when: Vec<Vec<ArgCond>>,
    /// Whether some rule tests token origins: only then are task texts and
    /// outputs indexed by token.
    pub has_token_tests: bool,
}

fn step_by_tool(policy: &Policy, step: &StepPattern) -> StepByTool {
    policy
        .tools
        .iter()
        .map(|t| {
            step.matches_tool(t).then(|| match &step.when {
                Some(c) => c.resolve(&|name| t.param_index(name)),
                None => ArgCond::TRUE,
            })
        })
        .collect()
}

/// A condition by parameter name, resolved for each tool.
fn by_tool(policy: &Policy, cond: &NamedCond) -> Vec<ArgCond> {
    policy
        .tools
        .iter()
        .map(|t| cond.resolve(&|name| t.param_index(name)))
        .collect()
}

fn tools_globbed(policy: &Policy, glob: &str) -> Vec<bool> {
    policy
        .tools
        .iter()
        .map(|t| glob_matches(glob, &t.name))
        .collect()
}

impl Index {
    pub fn new(policy: &Policy) -> Index {
        let params = policy
            .tools
            .iter()
            .map(|t| {
                t.params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p.name.clone(), i))
                    .collect()
            })
            .collect();
        let params_by_name = policy
            .tools
            .iter()
            .map(|t| {
                let mut names: Vec<(String, usize)> = t
                    .params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p.name.clone(), i))
                    .collect();
                names.sort_unstable();
                names
            })
            .collect();
        let mut grants_for_tool = vec![Vec::new(); policy.tools.len()];
        for (g, grant) in policy.grants.iter().enumerate() {
            grants_for_tool[grant.tool].push(g);
        }
        let mut flows_for_sink = vec![Vec::new(); policy.sinks.len()];
        for (r, rule) in policy.flow_rules.iter().enumerate() {
            flows_for_sink[rule.sink].push(r);
        }
        let flow_when = policy
            .flow_rules
            .iter()
            .map(|r| by_tool(policy, &r.when))
            .collect();
        let mut call_rules_for_tool = vec![Vec::new(); policy.tools.len()];
        for (r, rule) in policy.call_rules.iter().enumerate() {
            call_rules_for_tool[rule.tool].push(r);
        }
        let scope_ok = (0..policy.agents.len())
            .map(|a| {
                let scopes: Vec<usize> = policy
                    .chain_iter(a)
                    .filter_map(|x| policy.agents[x].scope)
                    .collect();
                (!scopes.is_empty()).then(|| {
                    policy
                        .tools
                        .iter()
                        .map(|t| {
                            scopes
                                .iter()
                                .copied()
                                .find(|&s| !policy.scopes[s].allows(&t.name))
                        })
                        .collect()
                })
            })
            .collect();
        let path_steps = policy
            .path_rules
            .iter()
            .map(|r| match &r.kind {
                PathKind::Sequence(steps) => {
                    steps.iter().map(|s| step_by_tool(policy, s)).collect()
                }
                PathKind::AtMost { step, .. } => vec![step_by_tool(policy, step)],
            })
            .collect();
        let path_reset = policy
            .path_rules
            .iter()
            .map(|r| r.reset.as_ref().map(|s| step_by_tool(policy, s)))
            .collect();
        Index {
            bound_sinks: policy
                .tools
                .iter()
                .map(|t| t.sinks.iter().any(|s| s.params.is_some()))
                .collect(),
            tools: policy
                .tools
                .iter()
                .enumerate()
                .map(|(i, t)| (t.name.clone(), i))
                .collect(),
            agents: policy
                .agents
                .iter()
                .enumerate()
                .map(|(i, a)| (a.name.clone(), i))
                .collect(),
            params,
            params_by_name,
            grants_for_tool,
            flows_for_sink,
            flow_when,
            scope_ok,
            call_rules_for_tool,
            path_steps,
            path_reset,
            obligation_before: policy
                .obligations
                .iter()
                .map(|o| tools_globbed(policy, &o.before))
                .collect(),
            obligation_since: policy
                .obligations
                .iter()
                .map(|o| o.since.as_deref().map(|g| tools_globbed(policy, g)))
                .collect(),
            has_resource_labels: !policy.resources.is_empty(),
            has_token_tests: policy.has_token_tests(),
            context_owner: (0..policy.agents.len())
                .map(|a| policy.chain_iter(a).find(|&x| policy.agents[x].own_context))
                .collect(),
            merge_into: (0..policy.agents.len())
                .map(|a| {
                    policy
                        .chain_iter(a)
                        .filter(|&x| policy.agents[x].own_context)
                        .collect()
                })
                .collect(),
            receive_for_agent: (0..policy.agents.len())
                .map(|a| {
                    (0..policy.receive_rules.len())
                        .filter(|&r| policy.receive_rules[r].agent == a)
                        .collect()
                })
                .collect(),
            receive_when: policy
                .receive_rules
                .iter()
                .map(|r| by_tool(policy, &r.when))
                .collect(),
        }
    }

    /// The parameter index of `name` in `tool`.
    pub fn param(&self, tool: ToolId, name: &str) -> Option<usize> {
        self.params.get(tool)?.get(name).copied()
    }
}

/// Resolves the argument names of one call of `tool`, in any order; names
/// given in name order (as a JSON map keeps them) cost one comparison each,
/// others one hash lookup.
pub(crate) struct ParamCursor<'a> {
    index: &'a Index,
    tool: ToolId,
    sorted: &'a [(String, usize)],
    next: usize,
}

impl<'a> ParamCursor<'a> {
    pub fn new(index: &'a Index, tool: ToolId) -> ParamCursor<'a> {
        let sorted = index
            .params_by_name
            .get(tool)
            .map_or(&[][..], Vec::as_slice);
        ParamCursor {
            index,
            tool,
            sorted,
            next: 0,
        }
    }

    /// The parameter index of `name` (as [`Index::param`] answers it).
    #[inline]
    pub fn param(&mut self, name: &str) -> Option<usize> {
        // Skip the names the call left out (absent optional parameters):
        // one comparison per name passed.
        while let Some((n, i)) = self.sorted.get(self.next) {
            // The usual case, the next name itself: told by words, no call.
            if same_name(n.as_bytes(), name.as_bytes()) {
                self.next += 1;
                return Some(*i);
            }
            match cmp_names(n.as_bytes(), name.as_bytes()) {
                std::cmp::Ordering::Less => self.next += 1,
                std::cmp::Ordering::Equal => {
                    self.next += 1;
                    return Some(*i);
                }
                std::cmp::Ordering::Greater => break,
            }
        }
        // Out of order, or unknown: the table decides.
        self.index.param(self.tool, name)
    }
}

/// `a == b`, by 8-byte words for names of 8 to 32 bytes (the first and
/// last words overlap for lengths that are not a multiple of 8).
#[inline]
fn same_name(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if !(8..=32).contains(&n) {
        return a == b;
    }
    // Offsets 0, 8, 16 and n-8 (clamped into range) cover every byte.
    let word = |s: &[u8], at: usize| {
        s.get(at..)
            .and_then(<[u8]>::first_chunk::<8>)
            .map(|w| u64::from_ne_bytes(*w))
    };
    [0, 8.min(n - 8), 16.min(n - 8), n - 8]
        .into_iter()
        .all(|at| word(a, at) == word(b, at))
}

/// `a.cmp(b)`, deciding most pairs of parameter names by their first
/// eight bytes as one integer instead of a call to `memcmp`.
#[inline]
fn cmp_names(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if let (Some(pa), Some(pb)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        // Big-endian: integer order is byte order.
        let ord = u64::from_be_bytes(*pa).cmp(&u64::from_be_bytes(*pb));
        if ord.is_ne() {
            return ord;
        }
        return a[8..].cmp(&b[8..]);
    }
    a.cmp(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::Label;
    use crate::policy::{Param, Tool};
    use crate::value::ParamType;

    proptest::proptest! {
        /// Names compare by their prefix as they compare byte by byte.
        #[test]
        fn names_compare_as_bytes(a in "[a-c_]{0,12}", b in "[a-c_]{0,12}") {
            proptest::prop_assert_eq!(cmp_names(a.as_bytes(), b.as_bytes()), a.cmp(&b));
        }

        /// Names are the same by words exactly when they are byte by byte,
        /// at every length around the word sizes (`b` is often `a` with one
        /// byte changed, so near misses are tried).
        #[test]
        fn names_are_the_same_as_bytes(
            a in "[a-c_]{0,40}",
            flip in proptest::option::of(0usize..40),
        ) {
            let mut b = a.clone().into_bytes();
            if let Some(i) = flip.filter(|i| *i < b.len()) {
                b[i] = if b[i] == b'a' { b'b' } else { b'a' };
            }
            proptest::prop_assert_eq!(same_name(a.as_bytes(), &b), a.as_bytes() == b.as_slice());
        }
    }

    fn policy(names: &[&str]) -> Policy {
        let mut p = Policy::empty("cursor");
        p.tools.push(Tool {
            name: "t".into(),
            params: names
                .iter()
                .map(|n| Param {
                    name: (*n).into(),
                    ty: ParamType::Str,
                    list: false,
                    optional: true,
                    fields: Vec::new(),
                })
                .collect(),
            resource: None,
            sinks: vec![],
            output: Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        });
        p
    }

    /// The cursor answers as the hash table for names in any order, with
    /// gaps, repeated or unknown: the merge only saves work.
    #[test]
    fn the_cursor_answers_as_the_table_in_any_order() {
        let names = ["to", "body", "amount", "cc", "subject"];
        let index = Index::new(&policy(&names));
        let orders: [&[&str]; 4] = [
            &["amount", "body", "cc", "subject", "to"],
            &["amount", "cc", "to"],
            &["to", "amount", "zeta", "body", "body", "", "cc"],
            &["subject", "nope", "amount", "to", "cc"],
        ];
        for order in orders {
            let mut cursor = ParamCursor::new(&index, 0);
            for name in order {
                assert_eq!(
                    cursor.param(name),
                    index.param(0, name),
                    "{name} in {order:?}"
                );
            }
        }
        assert_eq!(ParamCursor::new(&index, 1).param("to"), None);
    }
}
