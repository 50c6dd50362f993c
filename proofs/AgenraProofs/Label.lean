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

end Agenra
