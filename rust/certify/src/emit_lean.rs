//! `agenra certify OLD NEW --emit-lean FILE`: a certificate as a Lean file
//! that `lake build` checks (docs/lean.md).
//!
//! The file holds, per component, the ledger abstraction of both policies
//! (`Agenra.Ctx`: grants, tested sets, task seeds, rule flags, call
//! classes) and the relation R as data (`List Agenra.PState`), and proves
//! `Agenra.Preserves ctx` by `Agenra.checkSimulationTree_sound` applied to
//! `checkSimulationTree ctx T = true` (T: the relation as a search tree),
//! evaluated by `native_decide`.
//!
//! Every certificate kind becomes a checked simulation: a `simulation`
//! certificate carries its relation; for `identical` and `construction`
//! certificates the relation is computed here (`simulation::explore`),
//! and emission fails if it does not close.

use crate::certificate::{Certificate, Proof};
use crate::classes::{components, enumerate, restrict, Class, Classes};
use crate::flags_of;
use crate::product::{Ctx, Flags, Held, State};
use crate::simulation::{explore, Outcome};
use agenra_core::policy::{Grant, Quota};
use agenra_core::Policy;
use std::fmt::Write as _;

/// At most this many pair states per Lean definition (long list literals
/// make deep terms).
pub const CHUNK: usize = 40;

/// Why no Lean file could be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The call classes could not be enumerated.
    #[error("the call classes cannot be enumerated: {0}")]
    Classes(String),
    /// The relation of a by-construction certificate could not be computed.
    #[error("no explicit relation for tools {tools:?}: {why}")]
    Relation { tools: Vec<usize>, why: String },
    /// OLD and NEW follow different delegation chains (they differ outside grants).
    #[error("agent {0} has different delegation chains in OLD and NEW")]
    Chain(usize),
}

/// The Lean file for `cert` (a certificate of `old` and `new`). `name`
/// becomes the namespace `AgenraCertificate.<Name>` (sanitized).
pub fn emit_lean(
    old: &Policy,
    new: &Policy,
    cert: &Certificate,
    name: &str,
) -> Result<String, EmitError> {
    let parts = relations(old, new, cert)?;
    let ns = lean_ident(name);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "/-\nCertificate written by `agenra certify --emit-lean` ({}).\n\nOLD: {}\nNEW: {}\nMethod of the certificate: {}\n\n\
         Each component's ledger abstraction (`ctxN`) and relation (`relN`) are data; the\n\
         theorem `preservesN : Agenra.Preserves ctxN` follows from the checker's soundness\n\
         (`Agenra.checkSimulationTree_sound`, proofs/AgenraProofs/Certify.lean) and the\n\
         evaluation of `checkSimulationTree ctxN treeN` by `native_decide`, which trusts the Lean\n\
         compiler (`#print axioms preserves` lists `Lean.ofReduceBool`; see docs/lean.md).\n\
         The call classes and the correspondence between the abstraction and the monitor are\n\
         trusted, as in `agenra check-cert` (docs/certify.md).\n-/",
        cert.format.replace("-/", "- /"),
        cert.old_hash.replace("-/", "- /"),
        cert.new_hash.replace("-/", "- /"),
        cert.method().replace("-/", "- /")
    );
    if let Some(side) = &cert.rules {
        // The rule side is not in Lean: say so where an auditor reads.
        let _ = writeln!(
            out,
            "/- Rule side (not in this file): {} — {} -/",
            side.method.replace("-/", "- /"),
            side.parts.join("; ").replace("-/", "- /")
        );
    }
    out.push_str("import AgenraProofs.Certify\n\n");
    let _ = writeln!(out, "namespace AgenraCertificate.{ns}\n\nopen Agenra\n");
    for (i, part) in parts.iter().enumerate() {
        emit_component(&mut out, old, new, i, part)?;
    }
    let names: Vec<String> = (0..parts.len()).map(|i| format!("preserves{i}")).collect();
    let props: Vec<String> = (0..parts.len())
        .map(|i| format!("Preserves ctx{i}"))
        .collect();
    out.push_str(
        "/-- NEW preserves every workflow OLD admits, in every component of the ledger\nabstraction. -/\n",
    );
    if parts.len() == 1 {
        let _ = writeln!(out, "theorem preserves : {} := {}\n", props[0], names[0]);
    } else {
        let _ = writeln!(
            out,
            "theorem preserves : {} :=\n  ⟨{}⟩\n",
            props.join(" ∧ "),
            names.join(", ")
        );
    }
    out.push_str(
        "-- What the proof rests on: Lean's axioms and `Lean.ofReduceBool` (native_decide).\n",
    );
    out.push_str("#print axioms preserves\n\n");
    let _ = writeln!(out, "end AgenraCertificate.{ns}");
    Ok(out)
}

/// One component: its tools, its classes (restricted), flags and relation.
pub struct Part {
    pub tools: Vec<usize>,
    pub classes: Classes,
    pub flags: Flags,
    pub relation: Vec<State>,
}

/// The relation of every component: the certificate's own for a
/// simulation, the reachable pairs otherwise.
///
/// An abstraction with no call class has no component; it still gets one
/// part (no tools, no classes, the relation explored from the initial
/// pair), so that its certificate is a Lean file like any other: the
/// theorem `Preserves ctx0` over no call class is vacuous in content but
/// checked the same way (it used to be an error, and `agenra certify
/// --emit-lean` exited 1 on a certified revision).
pub fn relations(old: &Policy, new: &Policy, cert: &Certificate) -> Result<Vec<Part>, EmitError> {
    let (parts, classes, flags) = component_relations(old, new, cert)?;
    if !parts.is_empty() {
        return Ok(parts);
    }
    let empty = restrict(&classes, &[]);
    Ok(vec![Part {
        tools: Vec::new(),
        relation: explored_part(old, new, Vec::new(), &empty, &flags)?,
        classes: empty,
        flags,
    }])
}

type Relations = (Vec<Part>, Classes, Flags);

fn component_relations(
    old: &Policy,
    new: &Policy,
    cert: &Certificate,
) -> Result<Relations, EmitError> {
    match &cert.proof {
        Proof::Simulation {
            classes,
            flags,
            components: parts,
        } => Ok((
            parts
                .iter()
                .map(|p| Part {
                    tools: p.tools.clone(),
                    classes: restrict(classes, &p.tools),
                    flags: flags.clone(),
                    relation: p.relation.clone(),
                })
                .collect(),
            classes.clone(),
            flags.clone(),
        )),
        Proof::Construction { classes, .. } => {
            Ok((explored(old, new, classes)?, classes.clone(), flags_of(old)))
        }
        Proof::Identical => {
            let classes = enumerate(old, new).map_err(|e| EmitError::Classes(e.to_string()))?;
            Ok((explored(old, new, &classes)?, classes, flags_of(old)))
        }
    }
}

fn explored(old: &Policy, new: &Policy, classes: &Classes) -> Result<Vec<Part>, EmitError> {
    let flags = flags_of(old);
    let mut parts = Vec::new();
    for tools in components(old, new, classes) {
        let sub = restrict(classes, &tools);
        let relation = explored_part(old, new, tools.clone(), &sub, &flags)?;
        parts.push(Part {
            tools,
            classes: sub,
            flags: flags.clone(),
            relation,
        });
    }
    Ok(parts)
}

/// The reachable pairs of one component (`tools`, its classes `sub`).
fn explored_part(
    old: &Policy,
    new: &Policy,
    tools: Vec<usize>,
    sub: &Classes,
    flags: &Flags,
) -> Result<Vec<State>, EmitError> {
    let ctx = Ctx {
        old,
        new,
        classes: sub,
        flags,
    };
    match explore(&ctx) {
        Outcome::Closed { states, unknown } if unknown.is_empty() => Ok(states),
        Outcome::Closed { unknown, .. } => Err(EmitError::Relation {
            tools,
            why: unknown.join("; "),
        }),
        Outcome::Lost { .. } => Err(EmitError::Relation {
            tools,
            why: "the abstraction loses a workflow".into(),
        }),
        Outcome::TooLarge => Err(EmitError::Relation {
            tools,
            why: "too many state pairs".into(),
        }),
    }
}

fn emit_component(
    out: &mut String,
    old: &Policy,
    new: &Policy,
    i: usize,
    part: &Part,
) -> Result<(), EmitError> {
    let tools: Vec<String> = part
        .tools
        .iter()
        .map(|&t| old.tools.get(t).map_or("?", |x| x.name.as_str()))
        // A name must not close the doc comment it is printed in.
        .map(|n| n.replace("-/", "- /"))
        .collect();
    if tools.is_empty() {
        let _ = writeln!(
            out,
            "/-- Component {i} (no call class: no grant of OLD or NEW matches any call): the\n\
             ledger abstraction. -/"
        );
    } else {
        let _ = writeln!(
            out,
            "/-- Component {i} (tools {}): the ledger abstraction. -/",
            tools.join(", ")
        );
    }
    let _ = writeln!(out, "def ctx{i} : Ctx :=");
    let _ = writeln!(out, "  {{ old := {},", grants(&old.grants));
    let _ = writeln!(out, "    new := {},", grants(&new.grants));
    let _ = writeln!(out, "    tested := {},", nats(&part.classes.tested_sets));
    let _ = writeln!(out, "    seeds := {},", nats(&old.task_seeds));
    let _ = writeln!(out, "    flags := {},", flags(&part.flags));
    let mut classes = Vec::new();
    for c in &part.classes.classes {
        classes.push(class(old, new, c)?);
    }
    let _ = writeln!(out, "    classes := {} }}\n", list(&classes, "      "));
    let mut sorted: Vec<&State> = part.relation.iter().collect();
    sorted.sort_by(|a, b| lean_order(a, b));
    let chunks: Vec<&[&State]> = sorted.chunks(CHUNK).collect();
    for (j, chunk) in chunks.iter().enumerate() {
        let states: Vec<String> = chunk.iter().map(|s| state(s)).collect();
        let _ = writeln!(
            out,
            "def rel{i}_{j} : List PState :=\n  {}\n",
            list(&states, "    ")
        );
    }
    // Join the chunks in groups of at most CHUNK names per definition, so
    // that no term is deep or long.
    let mut names: Vec<String> = (0..chunks.len()).map(|j| format!("rel{i}_{j}")).collect();
    let mut level = 0;
    while names.len() > CHUNK {
        let mut next = Vec::new();
        for (k, group) in names.chunks(CHUNK).enumerate() {
            let name = format!("rel{i}_g{level}_{k}");
            let _ = writeln!(
                out,
                "def {name} : List PState :=\n  concatAll [{}]\n",
                group.join(", ")
            );
            next.push(name);
        }
        names = next;
        level += 1;
    }
    let _ = writeln!(
        out,
        "/-- Component {i}: the relation R ({} pairs, sorted by `Agenra.stateCmp`). -/",
        part.relation.len()
    );
    let body = format!("concatAll [{}]", names.join(", "));
    let _ = writeln!(out, "def rel{i} : List PState :=\n  {body}\n");
    let _ = writeln!(
        out,
        "/-- Component {i}: the relation as a search tree. -/\n\
         def tree{i} : RelTree :=\n  RelTree.ofSorted rel{i}\n"
    );
    let _ = writeln!(
        out,
        "/-- Component {i}: NEW preserves every workflow OLD admits. -/\n\
         theorem preserves{i} : Preserves ctx{i} :=\n  \
         checkSimulationTree_sound ctx{i} tree{i} (by native_decide)\n"
    );
    Ok(())
}

fn list(items: &[String], indent: &str) -> String {
    if items.is_empty() {
        return "[]".into();
    }
    format!("[{}]", items.join(&format!(",\n{indent}")))
}

fn nats(v: &[usize]) -> String {
    let s: Vec<String> = v.iter().map(|n| n.to_string()).collect();
    format!("[{}]", s.join(", "))
}

fn quota(q: &Quota) -> String {
    match q {
        Quota::Limited(n) => format!("Quota.limited {n}"),
        Quota::Unlimited => "Quota.unlimited".into(),
    }
}

fn quotas(v: &[Quota]) -> String {
    let s: Vec<String> = v.iter().map(quota).collect();
    format!("[{}]", s.join(", "))
}

fn option_nat(o: Option<usize>) -> String {
    o.map_or("none".into(), |n| format!("some {n}"))
}

fn grants(gs: &[Grant]) -> String {
    let s: Vec<String> = gs
        .iter()
        .map(|g| {
            format!(
                "{{ agent := {}, quota := {}, approval := {}, discovers := {} }}",
                g.agent,
                quota(&g.quota),
                g.approval,
                option_nat(g.discovers)
            )
        })
        .collect();
    list(&s, "      ")
}

fn flags(f: &Flags) -> String {
    format!(
        "{{ rulePauses := {}, approvalDenials := {}, historyRules := {}, rulesReadSets := {} }}",
        f.rule_pauses, f.approval_denials, f.history_rules, f.rules_read_sets
    )
}

fn class(old: &Policy, new: &Policy, c: &Class) -> Result<String, EmitError> {
    let chain: Vec<usize> = old.chain_iter(c.agent).collect();
    let chain_new: Vec<usize> = new.chain_iter(c.agent).collect();
    if chain != chain_new {
        return Err(EmitError::Chain(c.agent));
    }
    Ok(format!(
        "{{ chain := {}, region := {}, old := {}, new := {}, types := {} }}",
        nats(&chain),
        c.region,
        nats(&c.old),
        nats(&c.new),
        c.types
    ))
}

fn held(h: &Held) -> String {
    format!(
        "⟨{}, {}, {}, {}⟩",
        h.old_paused,
        h.new_paused,
        nats(&h.old.to_vec()),
        nats(&h.new.to_vec())
    )
}

fn state(s: &State) -> String {
    let calls: Vec<String> = s
        .calls
        .iter()
        .map(|(h, n)| format!("({}, {n})", held(h)))
        .collect();
    format!(
        "{{ region := {}, old := {}, new := {}, calls := [{}], types := {} }}",
        s.region,
        quotas(&s.old),
        quotas(&s.new),
        calls.join(", "),
        s.types
    )
}

/// `Agenra.stateCmp`: region, types, OLD's ledger, NEW's ledger, held
/// calls, each lexicographically (limited quotas by count, below
/// unlimited; held calls by Rust's derived `Ord`, which `Agenra.heldCmp`
/// mirrors, then by count). The Lean tree is built from this order; a
/// mismatch would make the Lean check fail, never pass wrongly.
pub fn lean_order(a: &State, b: &State) -> std::cmp::Ordering {
    let quotas = |v: &[Quota]| -> Vec<(u8, u64)> {
        v.iter()
            .map(|q| match q {
                Quota::Limited(n) => (0, *n),
                Quota::Unlimited => (1, 0),
            })
            .collect()
    };
    let calls = |s: &State| -> Vec<(Held, u32)> { s.calls.iter().map(|(h, n)| (*h, *n)).collect() };
    (a.region, a.types, quotas(&a.old), quotas(&a.new), calls(a)).cmp(&(
        b.region,
        b.types,
        quotas(&b.old),
        quotas(&b.new),
        calls(b),
    ))
}

/// A Lean identifier from a file stem: letters, digits and `_`, starting
/// with an upper-case letter (`Cert` if nothing is left).
pub fn lean_ident(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut chars = cleaned.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => {
            format!("{}{}", c.to_ascii_uppercase(), chars.as_str())
        }
        Some(_) => format!("C{cleaned}"),
        None => "Cert".into(),
    }
}
