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

end Agenra
