/-
Agenra.Label: labels and the flow check (`rust/core/src/label.rs`, the
flow part of `rust/core/src/spec/reference.rs`).

A label is ⟨sensitivity, categories, trust⟩. `l1 ⊑ l2` (`Label.flowsTo`)
iff `s1 ≤ s2`, `C1 ⊆ C2`, and `l2` trusted ⇒ `l1` trusted. The join takes
the larger sensitivity, the union of categories, and is trusted only if
both sides are.

Simpler than Rust: a category set is a membership function `Nat → Bool`
(Rust: a `u64` bit set, categories `0..64`), and `⊑` is a proposition
(Rust: a `bool`), so that the lattice laws are stated for all sets.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/

namespace Agenra

/-- `label::Label`. -/
structure Label where
  /-- Index into the policy's levels (0: lowest). -/
  sensitivity : Nat
  /-- Which categories the data carries. -/
  categories : Nat → Bool
  /-- Untrusted is higher: a join is trusted only when both sides are. -/
  trusted : Bool

/-- `Label::flows_to` (`self ⊑ other`): data labeled `a` may be treated as labeled `b`. -/
structure Label.flowsTo (a b : Label) : Prop where
  sens : a.sensitivity ≤ b.sensitivity
  cats : ∀ (i : Nat), a.categories i = true → b.categories i = true
  trust : b.trusted = true → a.trusted = true

/-- `Label::join`: the least upper bound. -/
def Label.join (a b : Label) : Label :=
  { sensitivity := max a.sensitivity b.sensitivity,
    categories := fun i => a.categories i || b.categories i,
    trusted := a.trusted && b.trusted }

/-- `label::LabelPattern`: an upward-closed condition on labels (deny
rules and path steps use these). `anyCategory` lists category indexes;
empty means no condition. -/
structure LabelPattern where
  minSensitivity : Option Nat
  anyCategory : List Nat
  untrusted : Bool

/-- `LabelPattern::matches` (`matches` is a Lean keyword). -/
def LabelPattern.matchesLabel (p : LabelPattern) (l : Label) : Prop :=
  (∀ (m : Nat), p.minSensitivity = some m → m ≤ l.sensitivity) ∧
  (p.anyCategory = [] ∨ ∃ (i : Nat), i ∈ p.anyCategory ∧ l.categories i = true) ∧
  (p.untrusted = true → l.trusted = false)

/-- The flow check of one labeled flow into a sink (the loop over `flows`
in `spec/reference.rs`, for one call): the flow is exempt when some allow
rule's ceiling is above its label, and denied when it is not exempt and
some deny pattern matches. The rules' `when` conditions are about the
call, not the label, and are left out (they are the same for both labels
compared below). -/
def flowDenied (allows : List Label) (denies : List LabelPattern) (l : Label) : Prop :=
  (¬ ∃ (c : Label), c ∈ allows ∧ l.flowsTo c) ∧ (∃ (p : LabelPattern), p ∈ denies ∧ p.matchesLabel l)

/-! ## The flow check of one call (`Reference::flows`, step 3)

The whole flow loop of `spec/reference.rs` for one call, given the labels it
reads: the call's input label (`input`), the resource's own label (`own`)
and the argument labels (`args`). How those three are computed (lineage,
per-agent contexts, provenance by value, sanitizers) is NOT modelled: they
are inputs here. -/

/-- `FlowEffect`: an allow rule's ceiling, a deny pattern or a pause pattern. -/
inductive FlowEffect where
  | allow (ceiling : Label)
  | deny (p : LabelPattern)
  | pause (p : LabelPattern)

/-- A flow or receive rule as the flow check of one call sees it: its effect
and whether its `when` condition holds on this call. The condition reads the
call's arguments, agent and discovered sets (`cond_holds`), never a label,
so it is the same `Bool` for every labelling of the call. -/
structure FlowRuleOn where
  effect : FlowEffect
  holds : Bool

/-- The `exempt` test: an allow rule whose ceiling is above the label and
whose condition holds. -/
def FlowRuleOn.exempts (r : FlowRuleOn) (l : Label) : Prop :=
  match r.effect with
  | .allow c => l.flowsTo c ∧ r.holds = true
  | _ => False

/-- The deny `hit`: a deny rule whose pattern matches the label and whose
condition holds. -/
def FlowRuleOn.denies (r : FlowRuleOn) (l : Label) : Prop :=
  match r.effect with
  | .deny p => p.matchesLabel l ∧ r.holds = true
  | _ => False

/-- One flow (a label and the rules on its sink) is denied: no rule exempts
it and some deny rule hits it. -/
def flowDeniedBy (rules : List FlowRuleOn) (l : Label) : Prop :=
  (¬ ∃ (r : FlowRuleOn), r ∈ rules ∧ r.exempts l) ∧ (∃ (r : FlowRuleOn), r ∈ rules ∧ r.denies l)

/-- `Label::BOTTOM`: sensitivity 0, no category, trusted. -/
def Label.bottom : Label :=
  { sensitivity := 0, categories := fun _ => false, trusted := true }

/-- `args[p]` (`Label.bottom` out of range; Rust panics there, and
validation keeps `params` in range). -/
def labelAt : List Label → Nat → Label
  | [], _ => Label.bottom
  | l :: _, 0 => l
  | _ :: ls, i + 1 => labelAt ls i

/-- `ps.iter().fold(acc, |a, &p| a.join(&args[p]))`. -/
def joinParams (args : List Label) : Label → List Nat → Label
  | acc, [] => acc
  | acc, p :: ps => joinParams args (acc.join (labelAt args p)) ps

/-- A sink the tool reaches (`tool.sinks`): the parameters whose labels flow
into it (`none`: the call's whole input) and the flow rules on it. -/
structure SinkUse where
  params : Option (List Nat)
  rules : List FlowRuleOn

/-- The label of a sink's flow: `bound.join(&own)`, where `bound` is the
input or the join of the named parameters' labels. -/
def sinkLabel (input own : Label) (args : List Label) (u : SinkUse) : Label :=
  match u.params with
  | none => input.join own
  | some ps => (joinParams args Label.bottom ps).join own

/-- `flows(..).0.is_some()`: the flow check of step 3 denies the call. The
loop returns at the first denied flow; a flow that is exempt or only
pauses does not stop it, so the call is denied exactly when some flow (a
sink's, or what the calling agent receives, `received`) is denied. -/
def flowsDenied (sinks : List SinkUse) (received : List FlowRuleOn) (input own : Label)
    (args : List Label) : Prop :=
  (∃ (u : SinkUse), u ∈ sinks ∧ flowDeniedBy u.rules (sinkLabel input own args u)) ∨
    flowDeniedBy received (input.join own)

end Agenra
