/-
The label lattice and taint monotonicity of the flow check
(`lean/Agenra/Label.lean`).

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Label

namespace Agenra

/-- Two booleans that imply each other are equal. -/
theorem bool_eq_of_imp (x y : Bool) (h1 : x = true → y = true) (h2 : y = true → x = true) :
    x = y := by
  cases x with
  | false =>
    cases y with
    | false => rfl
    | true => exact h2 rfl
  | true =>
    cases y with
    | false => exact (h1 rfl).symm
    | true => rfl

theorem max_le_of (a b c : Nat) (ha : a ≤ c) (hb : b ≤ c) : max a b ≤ c := by
  rw [Nat.max_def]
  by_cases h : a ≤ b
  · rw [if_pos h] <;> exact hb
  · rw [if_neg h] <;> exact ha

theorem le_max_l (a b : Nat) : a ≤ max a b := by
  rw [Nat.max_def]
  by_cases h : a ≤ b
  · rw [if_pos h] <;> exact h
  · rw [if_neg h] <;> exact Nat.le_refl a

theorem le_max_r (a b : Nat) : b ≤ max a b := by
  rw [Nat.max_def]
  by_cases h : a ≤ b
  · rw [if_pos h] <;> exact Nat.le_refl b
  · rw [if_neg h] <;> omega

/-- **flowsTo_refl.** ⊑ is reflexive. -/
theorem flowsTo_refl (a : Label) : a.flowsTo a :=
  ⟨Nat.le_refl a.sensitivity, fun _ h => h, fun h => h⟩

/-- **flowsTo_trans.** ⊑ is transitive: data that may be treated as `b`,
where `b` may be treated as `c`, may be treated as `c`. -/
theorem flowsTo_trans (a b c : Label) (h1 : a.flowsTo b) (h2 : b.flowsTo c) : a.flowsTo c :=
  ⟨Nat.le_trans h1.sens h2.sens, fun i h => h2.cats i (h1.cats i h),
    fun h => h1.trust (h2.trust h)⟩

/-- **flowsTo_antisymm.** ⊑ is antisymmetric: two labels below each other are
equal. With reflexivity and transitivity, ⊑ is a partial order. -/
theorem flowsTo_antisymm (a b : Label) (h1 : a.flowsTo b) (h2 : b.flowsTo a) : a = b := by
  cases a with
  | mk sa ca ta =>
    cases b with
    | mk sb cb tb =>
      have hs : sa = sb := Nat.le_antisymm h1.sens h2.sens
      have hc : ca = cb := by
        funext i
        exact bool_eq_of_imp (ca i) (cb i) (h1.cats i) (h2.cats i)
      have ht : ta = tb := bool_eq_of_imp ta tb h2.trust h1.trust
      rw [hs, hc, ht]

/-- **join_left.** The join is above its left argument. -/
theorem join_left (a b : Label) : a.flowsTo (a.join b) := by
  constructor
  · exact le_max_l a.sensitivity b.sensitivity
  · intro i h
    show (a.categories i || b.categories i) = true
    rw [Bool.or_eq_true]
    exact Or.inl h
  · intro h
    have h' : (a.trusted && b.trusted) = true := h
    rw [Bool.and_eq_true] at h'
    exact h'.1

/-- **join_right.** The join is above its right argument. -/
theorem join_right (a b : Label) : b.flowsTo (a.join b) := by
  constructor
  · exact le_max_r a.sensitivity b.sensitivity
  · intro i h
    show (a.categories i || b.categories i) = true
    rw [Bool.or_eq_true]
    exact Or.inr h
  · intro h
    have h' : (a.trusted && b.trusted) = true := h
    rw [Bool.and_eq_true] at h'
    exact h'.2

/-- **join_least.** The join is the least upper bound: anything above both
arguments is above their join. So labels joined along a data path never
understate what flowed in. -/
theorem join_least (a b c : Label) (ha : a.flowsTo c) (hb : b.flowsTo c) :
    (a.join b).flowsTo c := by
  constructor
  · exact max_le_of a.sensitivity b.sensitivity c.sensitivity ha.sens hb.sens
  · intro i h
    have h' : (a.categories i || b.categories i) = true := h
    rw [Bool.or_eq_true] at h'
    cases h' with
    | inl hl => exact ha.cats i hl
    | inr hr => exact hb.cats i hr
  · intro h
    show (a.trusted && b.trusted) = true
    rw [Bool.and_eq_true]
    exact ⟨ha.trust h, hb.trust h⟩

/-- A label pattern is upward closed: a label above a matching label matches. -/
theorem matches_upward (p : LabelPattern) (l l' : Label) (h : p.matchesLabel l)
    (hl : l.flowsTo l') : p.matchesLabel l' := by
  obtain ⟨hs, hc, hu⟩ := h
  unfold LabelPattern.matchesLabel
  refine ⟨?_, ?_, ?_⟩
  · intro m hm
    exact Nat.le_trans (hs m hm) hl.sens
  · cases hc with
    | inl he => exact Or.inl he
    | inr hx =>
      obtain ⟨i, hi, hci⟩ := hx
      exact Or.inr ⟨i, hi, hl.cats i hci⟩
  · intro hpu
    cases ht : l'.trusted with
    | false => rfl
    | true =>
      have h1 : l.trusted = true := hl.trust ht
      have h2 : l.trusted = false := hu hpu
      rw [h2] at h1
      cases h1

/-- **taint_monotone.** Taint monotonicity of the flow check: adding labels
never turns a DENY into an ALLOW. If a flow labeled `l` is denied and `l ⊑ l'`
(the flow carries more: a higher sensitivity, more categories, or less
trust), the flow labeled `l'` is denied too: no allow rule exempts it (one
would have exempted `l`) and the deny pattern that matched `l` matches `l'`. -/
theorem taint_monotone (allows : List Label) (denies : List LabelPattern) (l l' : Label)
    (hd : flowDenied allows denies l) (hl : l.flowsTo l') : flowDenied allows denies l' := by
  obtain ⟨hna, hp⟩ := hd
  unfold flowDenied
  refine ⟨?_, ?_⟩
  · intro hex
    obtain ⟨c, hc, hlc⟩ := hex
    exact hna ⟨c, hc, flowsTo_trans l l' c hl hlc⟩
  · obtain ⟨p, hp1, hp2⟩ := hp
    exact ⟨p, hp1, matches_upward p l l' hp2 hl⟩

/-! ## The whole flow check of one call -/

/-- **join_mono.** The join is monotone in both arguments. -/
theorem join_mono (a a' b b' : Label) (ha : a.flowsTo a') (hb : b.flowsTo b') :
    (a.join b).flowsTo (a'.join b') :=
  join_least a b (a'.join b') (flowsTo_trans a a' (a'.join b') ha (join_left a' b'))
    (flowsTo_trans b b' (a'.join b') hb (join_right a' b'))

/-- Every argument label raised (index by index, `labelAt`). -/
def ArgsFlowTo (args args' : List Label) : Prop :=
  ∀ (i : Nat), (labelAt args i).flowsTo (labelAt args' i)

/-- Joining raised parameter labels onto a raised start gives a raised label. -/
theorem joinParams_mono (args args' : List Label) (ha : ArgsFlowTo args args') :
    ∀ (ps : List Nat) (acc acc' : Label), acc.flowsTo acc' →
      (joinParams args acc ps).flowsTo (joinParams args' acc' ps) := by
  intro ps
  induction ps with
  | nil =>
    intro acc acc' h
    exact h
  | cons q qs ih =>
    intro acc acc' h
    exact ih (acc.join (labelAt args q)) (acc'.join (labelAt args' q))
      (join_mono acc acc' (labelAt args q) (labelAt args' q) h (ha q))

/-- A sink's flow label is monotone in the input, resource and argument labels. -/
theorem sinkLabel_mono (input input' own own' : Label) (args args' : List Label)
    (hi : input.flowsTo input') (ho : own.flowsTo own') (ha : ArgsFlowTo args args')
    (u : SinkUse) : (sinkLabel input own args u).flowsTo (sinkLabel input' own' args' u) := by
  cases u with
  | mk params rules =>
    cases params with
    | none =>
      show (input.join own).flowsTo (input'.join own')
      exact join_mono input input' own own' hi ho
    | some ps =>
      show ((joinParams args Label.bottom ps).join own).flowsTo
        ((joinParams args' Label.bottom ps).join own')
      exact join_mono (joinParams args Label.bottom ps) (joinParams args' Label.bottom ps) own own'
        (joinParams_mono args args' ha ps Label.bottom Label.bottom (flowsTo_refl Label.bottom)) ho

/-- An allow rule that exempts a label exempts every label below it
(ceilings are downward closed). -/
theorem exempts_down (r : FlowRuleOn) (l l' : Label) (hx : r.exempts l') (hl : l.flowsTo l') :
    r.exempts l := by
  cases r with
  | mk eff h =>
    cases eff with
    | allow c =>
      have h2 : l'.flowsTo c ∧ h = true := hx
      show l.flowsTo c ∧ h = true
      exact ⟨flowsTo_trans l l' c hl h2.1, h2.2⟩
    | deny p =>
      have h2 : False := hx
      exact h2.elim
    | pause p =>
      have h2 : False := hx
      exact h2.elim

/-- A deny rule that hits a label hits every label above it (patterns are
upward closed, `matches_upward`). -/
theorem denies_up (r : FlowRuleOn) (l l' : Label) (hd : r.denies l) (hl : l.flowsTo l') :
    r.denies l' := by
  cases r with
  | mk eff h =>
    cases eff with
    | allow c =>
      have h2 : False := hd
      exact h2.elim
    | deny p =>
      have h2 : p.matchesLabel l ∧ h = true := hd
      show p.matchesLabel l' ∧ h = true
      exact ⟨matches_upward p l l' h2.1 hl, h2.2⟩
    | pause p =>
      have h2 : False := hd
      exact h2.elim

/-- One flow with its sink's rules (conditions included): a denied flow
stays denied when its label is raised. -/
theorem flowDeniedBy_mono (rules : List FlowRuleOn) (l l' : Label) (hd : flowDeniedBy rules l)
    (hl : l.flowsTo l') : flowDeniedBy rules l' := by
  obtain ⟨hna, hp⟩ := hd
  show (¬ ∃ (r : FlowRuleOn), r ∈ rules ∧ r.exempts l') ∧
    (∃ (r : FlowRuleOn), r ∈ rules ∧ r.denies l')
  refine ⟨?_, ?_⟩
  · intro hex
    obtain ⟨r, hr, hx⟩ := hex
    exact hna ⟨r, hr, exempts_down r l l' hx hl⟩
  · obtain ⟨r, hr, hx⟩ := hp
    exact ⟨r, hr, denies_up r l l' hx hl⟩

/-- **flows_taint_monotone.** Taint monotonicity of the whole flow check of
one call (step 3, `Reference::flows`), graph joins included: if the check
denies the call (some sink's flow, or what the calling agent receives, is
not exempt and hit by a deny rule whose condition holds), it still denies
it when the call's input label, the resource's own label and every argument
label are raised (the same rules and conditions: conditions read no label).
Each flow's label is the join of the labels flowing into it, and the join
is monotone (`join_mono`, `joinParams_mono`), so every flow's label rises;
exemptions are downward closed and deny patterns upward closed.

Not covered: how `input`, `own` and `args` are computed from lineage,
per-agent contexts, provenance by value (which can LOWER a label) and
sanitizers; PAUSE (raising a label can turn PAUSE into DENY, never DENY into
anything else, but that is not stated); steps other than 3.

Rules out: "a sink's flow takes only some of its parameters' labels" (a
meet, or the last parameter's label, instead of the join: raising a label
could then lower the flow's label), "an exemption is an upper bound that
grows with the label" (exempting more as data gets more tainted), and "a
deny pattern matches labels below it". -/
theorem flows_taint_monotone (sinks : List SinkUse) (received : List FlowRuleOn)
    (input input' own own' : Label) (args args' : List Label)
    (hd : flowsDenied sinks received input own args)
    (hi : input.flowsTo input') (ho : own.flowsTo own') (ha : ArgsFlowTo args args') :
    flowsDenied sinks received input' own' args' := by
  unfold flowsDenied at hd ⊢
  rcases hd with ⟨u, hu, hdu⟩ | hdr
  · exact Or.inl ⟨u, hu, flowDeniedBy_mono u.rules (sinkLabel input own args u)
      (sinkLabel input' own' args' u) hdu (sinkLabel_mono input input' own own' args args' hi ho ha u)⟩
  · exact Or.inr (flowDeniedBy_mono received (input.join own) (input'.join own') hdr
      (join_mono input input' own own' hi ho))

end Agenra
