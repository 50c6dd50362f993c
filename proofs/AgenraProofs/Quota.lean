/-
No grant is spent beyond its quota: over every step of the ledger
semantics (calls, approvals with their re-check, rejections, results with
refunds on failure, unknown outcomes, seeds), every grant with a limited
quota `c` keeps a limited remaining count between 0 and `c`.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger
import AgenraProofs.Ledger

namespace Agenra

/-- Every grant whose policy quota is `limited c` has a remaining count
`limited n` with `n ≤ c` in ledger `l`. -/
def WithinQuota (p : Policy) (l : Ledger) : Prop :=
  ∀ (j c : Nat), capOf p j = some (.limited c) → ∃ n, getAt l j = some (.limited n) ∧ n ≤ c

/-- Runs events (each with what the checks decided) through `step`. -/
def runEvents (p : Policy) : State → List (Event × Checks) → State
  | s, [] => s
  | s, ec :: rest => runEvents p (step p s ec.1 ec.2).2 rest

theorem consumeAt_within (p : Policy) (l : Ledger) (g : Nat) (hw : WithinQuota p l) :
    WithinQuota p (consumeAt l g) := by
  intro j c hcap
  obtain ⟨n, hn, hnc⟩ := hw j c hcap
  obtain ⟨m, hm, hmn⟩ := consumeAt_le l g j n hn
  exact ⟨m, hm, Nat.le_trans hmn hnc⟩

theorem refund_within (p : Policy) (used : List Nat) (l : Ledger) (hw : WithinQuota p l) :
    WithinQuota p (refund p l used) := by
  intro j c hcap
  obtain ⟨n, hn, hnc⟩ := hw j c hcap
  exact refund_le_quota p used l j n c hcap hn hnc

/-- Admission along a chain only consumes, so it keeps every count within its quota. -/
theorem admitChain_within (p : Policy) (req : Request) (sets : List (List String)) :
    ∀ (chain : List Nat) (l : Ledger) (r : List Nat × Ledger),
      admitChain p req sets l chain = .ok r → WithinQuota p l → WithinQuota p r.2 := by
  intro chain
  induction chain with
  | nil =>
    intro l r h hw
    have h2 : (Except.ok ([], l) : Except Nat (List Nat × List Quota)) = Except.ok r := h
    cases h2
    exact hw
  | cons agent rest ih =>
    intro l r h hw
    cases hs : select p l agent req sets with
    | none =>
      have h2 : optElim (select p l agent req sets) (Except.error agent)
          (fun g => consUsed g (admitChain p req sets (consume l g).2 rest)) = Except.ok r := h
      rw [hs] at h2
      have h3 : (Except.error agent : Except Nat (List Nat × List Quota)) = Except.ok r := h2
      cases h3
    | some g =>
      have h2 : optElim (select p l agent req sets) (Except.error agent)
          (fun g => consUsed g (admitChain p req sets (consume l g).2 rest)) = Except.ok r := h
      rw [hs] at h2
      have h3 : consUsed g (admitChain p req sets (consume l g).2 rest) = Except.ok r := h2
      cases hr : admitChain p req sets (consume l g).2 rest with
      | error a =>
        rw [hr] at h3
        have h4 : (Except.error a : Except Nat (List Nat × List Quota)) = Except.ok r := h3
        cases h4
      | ok r' =>
        rw [hr] at h3
        have h4 : (Except.ok (g :: r'.1, r'.2) : Except Nat (List Nat × List Quota)) =
            Except.ok r := h3
        cases h4
        exact ih (consume l g).2 r' hr (consumeAt_within p l g hw)

/-- An admitted call keeps the ledger admission left, paused or running. -/
theorem stepAdmitted_ledger (p : Policy) (s : State) (id : String) (used : List Nat)
    (l : Ledger) (b : Bool) : (stepAdmitted p s id used l b).2.ledger = l := by
  unfold stepAdmitted
  cases (used.any (grantApproval p) || b) <;> rfl

theorem afterAdmit_within (p : Policy) (s : State) (id : String) (b : Bool)
    (r : Except Nat (List Nat × Ledger)) (hr : ∀ (x : List Nat × Ledger), r = .ok x → WithinQuota p x.2)
    (hw : WithinQuota p s.ledger) : WithinQuota p (afterAdmit p s id b r).2.ledger := by
  cases r with
  | error a => exact hw
  | ok x =>
    have he : (afterAdmit p s id b (Except.ok x)).2.ledger = x.2 :=
      stepAdmitted_ledger p s id x.1 x.2 b
    rw [he]
    exact hr x rfl

theorem stepCall_within (p : Policy) (s : State) (id : String) (req : Request) (c : Checks)
    (hw : WithinQuota p s.ledger) : WithinQuota p (stepCall p s id req c).2.ledger := by
  have hr : ∀ (x : List Nat × Ledger), admitCall p s.ledger req s.sets = .ok x → WithinQuota p x.2 :=
    fun x hx => admitChain_within p req s.sets (p.agentChain req.agent) s.ledger x hx hw
  cases c with
  | deny => exact hw
  | pass => exact afterAdmit_within p s id false (admitCall p s.ledger req s.sets) hr hw
  | pause => exact afterAdmit_within p s id true (admitCall p s.ledger req s.sets) hr hw

theorem approveWith_within (p : Policy) (s : State) (id : String) (c : Checks)
    (o : Option (List Nat)) (hw : WithinQuota p s.ledger) :
    WithinQuota p (approveWith p s id c o).2.ledger := by
  cases o with
  | none => exact hw
  | some used =>
    cases c with
    | deny => exact refund_within p used s.ledger hw
    | pass => exact hw
    | pause => exact hw

/-- **step_within_quota.** No grant is spent beyond its quota: if every
limited grant's remaining count is within its quota before a step, it is
after, whatever the event — a call (consumption only from a grant with a
unit left), an approval (allowed, or denied by the re-check and refunded),
a rejection (refund), a success, a failure (refund, never above the quota),
an unknown outcome (the unit stays spent) or a seed. -/
theorem step_within_quota (p : Policy) (s : State) (e : Event) (c : Checks)
    (hw : WithinQuota p s.ledger) : WithinQuota p (step p s e c).2.ledger := by
  cases e with
  | call id req =>
    show WithinQuota p (guardFresh s id (stepCall p s id req c)).2.ledger
    rcases guardFresh_cases s id (stepCall p s id req c) with hg | hg
    · rw [hg]
      exact hw
    · rw [hg]
      exact stepCall_within p s id req c hw
  | approve id => exact approveWith_within p s id c (mapFind s.paused id) hw
  | reject id =>
    show WithinQuota p (rejectWith p s id (mapFind s.paused id)).2.ledger
    cases mapFind s.paused id with
    | none => exact hw
    | some used => exact refund_within p used s.ledger hw
  | succeeded id ds =>
    show WithinQuota p (succeedWith p s id ds (mapFind s.running id)).2.ledger
    cases mapFind s.running id with
    | none => exact hw
    | some _ => exact hw
  | failed id =>
    show WithinQuota p (failWith p s id (mapFind s.running id)).2.ledger
    cases mapFind s.running id with
    | none => exact hw
    | some used => exact refund_within p used s.ledger hw
  | unknown id =>
    show WithinQuota p (unknownWith s id (mapFind s.running id)).2.ledger
    cases mapFind s.running id with
    | none => exact hw
    | some _ => exact hw
  | seed k vs =>
    show WithinQuota p (seedWith s k vs (getAt s.sets k)).2.ledger
    cases getAt s.sets k with
    | none => exact hw
    | some _ => exact hw

/-- The initial ledger holds each grant's full quota. -/
theorem getAt_map_quota : ∀ (gs : List Grant) (j : Nat) (gr : Grant),
    getAt gs j = some gr → getAt (gs.map Grant.quota) j = some gr.quota := by
  intro gs
  induction gs with
  | nil =>
    intro j gr h
    rw [getAt_nil] at h
    cases h
  | cons g gs ih =>
    intro j gr h
    cases j with
    | zero =>
      have h2 : some g = some gr := h
      cases h2
      rfl
    | succ j =>
      have h2 : getAt gs j = some gr := h
      exact ih j gr h2

/-- The entry of grant `i + j` in `initialFrom p i gs`: `limited 0` for a
shared grant, its quota otherwise (`Ledger::initial`). -/
theorem getAt_initialFrom (p : Policy) : ∀ (gs : List Grant) (i j : Nat) (gr : Grant),
    getAt gs j = some gr →
    getAt (initialFrom p i gs) j =
      some (if p.isShared (i + j) then Quota.limited 0 else gr.quota) := by
  intro gs
  induction gs with
  | nil =>
    intro i j gr h
    rw [getAt_nil] at h
    cases h
  | cons g gs ih =>
    intro i j gr h
    cases j with
    | zero =>
      have h2 : some g = some gr := h
      cases h2
      have e : i + 0 = i := by omega
      rw [e] <;> rfl
    | succ j =>
      have h2 : getAt gs j = some gr := h
      have e : i + (j + 1) = (i + 1) + j := by omega
      rw [e]
      exact ih (i + 1) j gr h2

/-- The initial entry of a grant of the policy: `limited 0` if it is shared,
its quota otherwise. -/
theorem getAt_initial (p : Policy) (j : Nat) (gr : Grant) (hg : getAt p.grants j = some gr) :
    getAt (Ledger.initial p) j =
      some (if p.isShared j then Quota.limited 0 else gr.quota) := by
  have h3 := getAt_initialFrom p p.grants 0 j gr hg
  have e : 0 + j = j := by omega
  rw [e] at h3
  exact h3

theorem initial_within (p : Policy) : WithinQuota p (Ledger.initial p) := by
  intro j c hcap
  cases hg : getAt p.grants j with
  | none =>
    have h2 : capOf p j = none := by
      unfold capOf
      rw [hg] <;> rfl
    rw [h2] at hcap
    cases hcap
  | some gr =>
    have h2 : capOf p j = some gr.quota := by
      unfold capOf
      rw [hg] <;> rfl
    rw [h2] at hcap
    have hq : gr.quota = Quota.limited c := Option.some.inj hcap
    have h3 := getAt_initial p j gr hg
    by_cases hs : p.isShared j = true
    · rw [if_pos hs] at h3
      exact ⟨0, h3, by omega⟩
    · rw [if_neg hs, hq] at h3
      exact ⟨c, h3, Nat.le_refl c⟩

theorem runEvents_within (p : Policy) : ∀ (w : List (Event × Checks)) (s : State),
    WithinQuota p s.ledger → WithinQuota p (runEvents p s w).ledger := by
  intro w
  induction w with
  | nil =>
    intro s hw
    exact hw
  | cons ec rest ih =>
    intro s hw
    exact ih (step p s ec.1 ec.2).2 (step_within_quota p s ec.1 ec.2 hw)

/-- **quota_never_exceeded.** In every session, after any sequence of
events from the initial state, every grant with quota `limited c` has a
remaining count `limited n` with `0 ≤ n ≤ c`: consumption never goes below
zero (a unit is taken only from a grant that has one, `select_hasQuota`)
and refunds — for rejections, denied approvals and failures — never return
more than the quota. Unknown outcomes keep their unit spent.

What this does NOT rule out: it bounds the units left only (`n ≤ c`), so it
would still hold if admission ignored quotas (a unit served from an empty
entry leaves it at 0) or if a success refunded its unit. The accounting that
rules these out is `quota_books` and `call_served_from_left`
(`AgenraProofs/Books.lean`). -/
theorem quota_never_exceeded (p : Policy) (w : List (Event × Checks)) :
    WithinQuota p (runEvents p (State.initial p) w).ledger :=
  runEvents_within p w (State.initial p) (initial_within p)

end Agenra
