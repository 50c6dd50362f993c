/-
Quota accounting over whole sessions: for every grant with a limited quota
`c`, the units left plus the units held by paused and running calls never
exceed `c`, after any sequence of events (calls, approvals allowed or
denied by their re-check, rejections, successes, failures with refunds,
unknown outcomes, seeds). Successes and unknown outcomes keep their units
spent: they leave both "left" and "held", so the sum can only drop.

Style as in `AgenraProofs.Ledger`: `show`, `rw` with the `rfl` equations,
structural induction, `cases`, `by_cases`, `omega`; no `simp`.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger
import AgenraProofs.Ledger
import AgenraProofs.Quota
import AgenraProofs.Construction

namespace Agenra

/-- `1` when the grant taken, `x`, is `g`; `0` otherwise. -/
def ind (x g : Nat) : Nat := if x = g then 1 else 0

/-- How many units of grant `g` a list of grants taken holds. -/
def countIn (g : Nat) : List Nat → Nat
  | [] => 0
  | x :: xs => ind x g + countIn g xs

/-- Units of `g` held by the calls of a map (`paused` or `running`). -/
def heldIn (g : Nat) : List (String × List Nat) → Nat
  | [] => 0
  | kv :: rest => countIn g kv.2 + heldIn g rest

/-- Units of `g` held by the session's paused and running calls. -/
def heldUnits (s : State) (g : Nat) : Nat :=
  heldIn g s.paused + heldIn g s.running

/-- Every grant with quota `limited c` has `limited n` left with
`n + heldUnits s j ≤ c`. -/
def Accounted (p : Policy) (s : State) : Prop :=
  ∀ (j c : Nat), capOf p j = some (.limited c) →
    ∃ n, getAt s.ledger j = some (.limited n) ∧ n + heldUnits s j ≤ c

/-! ## Maps -/

theorem heldIn_mapErase_le (g : Nat) (key : String) : ∀ (m : List (String × List Nat)),
    heldIn g (mapErase m key) ≤ heldIn g m := by
  intro m
  induction m with
  | nil => exact Nat.le_refl 0
  | cons kv rest ih =>
    cases kv with
    | mk k v =>
      by_cases hk : (k == key) = true
      · rw [mapErase_cons, if_pos hk]
        show heldIn g (mapErase rest key) ≤ countIn g v + heldIn g rest
        omega
      · rw [mapErase_cons, if_neg hk]
        show countIn g v + heldIn g (mapErase rest key) ≤ countIn g v + heldIn g rest
        omega

/-- The entry `mapFind` finds and what `mapErase` leaves hold at most what
the map held. -/
theorem heldIn_mapErase_found (g : Nat) (key : String) (used : List Nat) :
    ∀ (m : List (String × List Nat)), mapFind m key = some used →
      countIn g used + heldIn g (mapErase m key) ≤ heldIn g m := by
  intro m
  induction m with
  | nil =>
    intro h
    have h2 : (none : Option (List Nat)) = some used := h
    cases h2
  | cons kv rest ih =>
    cases kv with
    | mk k v =>
      intro h
      have hle := heldIn_mapErase_le g key rest
      by_cases hk : (k == key) = true
      · rw [mapFind_cons, if_pos hk] at h
        have hv : v = used := Option.some.inj h
        rw [← hv]
        rw [mapErase_cons, if_pos hk]
        show countIn g v + heldIn g (mapErase rest key) ≤ countIn g v + heldIn g rest
        omega
      · rw [mapFind_cons, if_neg hk] at h
        have h3 := ih h
        rw [mapErase_cons, if_neg hk]
        show countIn g used + (countIn g v + heldIn g (mapErase rest key)) ≤
          countIn g v + heldIn g rest
        omega

/-! ## The ledger -/

theorem ind_self (g : Nat) : ind g g = 1 := by
  show (if g = g then 1 else 0) = 1
  rw [if_pos (rfl : g = g)]

theorem ind_ne (x g : Nat) (h : ¬ x = g) : ind x g = 0 := by
  show (if x = g then 1 else 0) = 0
  rw [if_neg h]

/-- Consuming grant `g` (which has a unit left) takes exactly one unit from
`g` and nothing from any other entry. -/
theorem consumeAt_acc (l : List Quota) (g : Nat) (hq : hasQuota l g = true) (j n : Nat)
    (h : getAt l j = some (.limited n)) :
    ∃ n', getAt (consumeAt l g) j = some (.limited n') ∧ n' + ind g j = n := by
  by_cases hgj : g = j
  · rw [← hgj] at h
    rw [← hgj]
    rw [getAt_consumeAt_self, h, ind_self]
    have hq2 : quotaAvailable (getAt l g) = true := hq
    rw [h] at hq2
    cases n with
    | zero =>
      have h3 : false = true := hq2
      cases h3
    | succ k => exact ⟨k, rfl, rfl⟩
  · have hne : j ≠ g := fun e => hgj e.symm
    rw [getAt_consumeAt_ne l g j hne, ind_ne g j hgj]
    exact ⟨n, h, rfl⟩

/-- Admission takes exactly one unit of each grant in `used` from the ledger. -/
theorem admitChain_acc (p : Policy) (req : Request) (sets : List (List String)) :
    ∀ (chain : List Nat) (l : Ledger) (r : List Nat × Ledger),
      admitChain p req sets l chain = .ok r → ∀ (j n : Nat),
      getAt l j = some (.limited n) →
      ∃ n', getAt r.2 j = some (.limited n') ∧ n' + countIn j r.1 = n := by
  intro chain
  induction chain with
  | nil =>
    intro l r h j n hn
    have h2 : (Except.ok ([], l) : Except Nat (List Nat × List Quota)) = Except.ok r := h
    cases h2
    exact ⟨n, hn, rfl⟩
  | cons agent rest ih =>
    intro l r h j n hn
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
        have hq := select_hasQuota p l agent req sets g hs
        obtain ⟨n1, hn1, he1⟩ := consumeAt_acc l g hq j n hn
        obtain ⟨n2, hn2, he2⟩ := ih (consume l g).2 r' hr j n1 hn1
        refine ⟨n2, hn2, ?_⟩
        show n2 + (ind g j + countIn j r'.1) = n
        omega

/-- Refunding one unit of `g` adds at most one unit to `g`'s entry and
nothing to any other. -/
theorem refundOne_acc (p : Policy) (l : Ledger) (g j n c : Nat)
    (hcap : capOf p j = some (.limited c)) (h : getAt l j = some (.limited n)) :
    ∃ n', getAt (refundOne p l g) j = some (.limited n') ∧ n' ≤ n + ind g j := by
  by_cases hgj : g = j
  · rw [← hgj] at hcap h
    rw [← hgj]
    show ∃ n', getAt (modifyAt (Quota.refundCapped (capOf p g)) l g) g = some (.limited n') ∧
      n' ≤ n + ind g g
    rw [getAt_modifyAt_self, h, hcap, ind_self]
    show ∃ n', some (if n < c then Quota.limited (n + 1) else Quota.limited n) =
      some (.limited n') ∧ n' ≤ n + 1
    by_cases hlt : n < c
    · rw [if_pos hlt]
      exact ⟨n + 1, rfl, Nat.le_refl (n + 1)⟩
    · rw [if_neg hlt]
      exact ⟨n, rfl, by omega⟩
  · have hne : j ≠ g := fun e => hgj e.symm
    show ∃ n', getAt (modifyAt (Quota.refundCapped (capOf p g)) l g) j = some (.limited n') ∧
      n' ≤ n + ind g j
    rw [getAt_modifyAt_ne _ l g j hne, ind_ne g j hgj]
    exact ⟨n, h, by omega⟩

/-- Refunding `used` adds at most `countIn j used` units to grant `j`. -/
theorem refund_acc (p : Policy) : ∀ (used : List Nat) (l : Ledger) (j n c : Nat),
    capOf p j = some (.limited c) → getAt l j = some (.limited n) →
    ∃ n', getAt (refund p l used) j = some (.limited n') ∧ n' ≤ n + countIn j used := by
  intro used
  induction used with
  | nil =>
    intro l j n c _ h
    rw [refund_nil]
    exact ⟨n, h, by show n ≤ n + 0; omega⟩
  | cons g gs ih =>
    intro l j n c hcap h
    obtain ⟨n1, hn1, hle1⟩ := refundOne_acc p l g j n c hcap h
    obtain ⟨n2, hn2, hle2⟩ := ih (refundOne p l g) j n1 c hcap hn1
    rw [refund_cons]
    refine ⟨n2, hn2, ?_⟩
    show n2 ≤ n + (ind g j + countIn j gs)
    omega

/-! ## One step -/

/-- A step keeps the accounting when, for every limited grant, the new
entry plus the new holdings is at most the old entry plus the old holdings. -/
theorem accounted_of_le (p : Policy) (s s' : State)
    (hle : ∀ (j c n : Nat), capOf p j = some (.limited c) → getAt s.ledger j = some (.limited n) →
      ∃ n', getAt s'.ledger j = some (.limited n') ∧ n' + heldUnits s' j ≤ n + heldUnits s j)
    (hw : Accounted p s) : Accounted p s' := by
  intro j c hcap
  obtain ⟨n, hn, hnc⟩ := hw j c hcap
  obtain ⟨n', hn', hle'⟩ := hle j c n hcap hn
  exact ⟨n', hn', Nat.le_trans hle' hnc⟩

theorem stepAdmitted_acc (p : Policy) (s : State) (id : String) (used : List Nat)
    (l : Ledger) (b : Bool)
    (hl : ∀ (j n : Nat), getAt s.ledger j = some (.limited n) →
      ∃ n', getAt l j = some (.limited n') ∧ n' + countIn j used = n)
    (hw : Accounted p s) : Accounted p (stepAdmitted p s id used l b).2 := by
  refine accounted_of_le p s _ ?_ hw
  intro j c n _ hn
  obtain ⟨n', hn', he⟩ := hl j n hn
  refine ⟨n', ?_, ?_⟩
  · rw [stepAdmitted_ledger]
    exact hn'
  · unfold stepAdmitted
    by_cases hc : (used.any (grantApproval p) || b) = true
    · rw [if_pos hc]
      have hle := heldIn_mapErase_le j id s.paused
      show n' + (countIn j used + heldIn j (mapErase s.paused id) + heldIn j s.running) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega
    · rw [if_neg hc]
      have hle := heldIn_mapErase_le j id s.running
      show n' + (heldIn j s.paused + (countIn j used + heldIn j (mapErase s.running id))) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega

theorem stepCall_acc (p : Policy) (s : State) (id : String) (req : Request) (c : Checks)
    (hw : Accounted p s) : Accounted p (stepCall p s id req c).2 := by
  have key : ∀ (b : Bool), Accounted p (afterAdmit p s id b (admitCall p s.ledger req s.sets)).2 := by
    intro b
    cases ha : admitCall p s.ledger req s.sets with
    | error a => exact hw
    | ok r =>
      exact stepAdmitted_acc p s id r.1 r.2 b
        (admitChain_acc p req s.sets (p.agentChain req.agent) s.ledger r ha) hw
  cases c with
  | deny => exact hw
  | pass => exact key false
  | pause => exact key true

theorem approveWith_acc (p : Policy) (s : State) (id : String) (c : Checks)
    (hw : Accounted p s) : Accounted p (approveWith p s id c (mapFind s.paused id)).2 := by
  cases hf : mapFind s.paused id with
  | none => exact hw
  | some used =>
    refine accounted_of_le p s _ ?_ hw
    intro j cj n hcap hn
    have h1 := heldIn_mapErase_found j id used s.paused hf
    cases c with
    | deny =>
      obtain ⟨n', hn', hle⟩ := refund_acc p used s.ledger j n cj hcap hn
      refine ⟨n', hn', ?_⟩
      show n' + (heldIn j (mapErase s.paused id) + heldIn j s.running) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega
    | pass =>
      have h2 := heldIn_mapErase_le j id s.running
      refine ⟨n, hn, ?_⟩
      show n + (heldIn j (mapErase s.paused id) +
          (countIn j used + heldIn j (mapErase s.running id))) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega
    | pause =>
      have h2 := heldIn_mapErase_le j id s.running
      refine ⟨n, hn, ?_⟩
      show n + (heldIn j (mapErase s.paused id) +
          (countIn j used + heldIn j (mapErase s.running id))) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega

/-- **step_accounted.** One step keeps "units left + units held ≤ quota" for
every limited grant, whatever the event. -/
theorem step_accounted (p : Policy) (s : State) (e : Event) (c : Checks)
    (hw : Accounted p s) : Accounted p (step p s e c).2 := by
  cases e with
  | call id req =>
    show Accounted p (guardFresh s id (stepCall p s id req c)).2
    rcases guardFresh_cases s id (stepCall p s id req c) with hg | hg
    · rw [hg]
      exact hw
    · rw [hg]
      exact stepCall_acc p s id req c hw
  | approve id => exact approveWith_acc p s id c hw
  | reject id =>
    show Accounted p (rejectWith p s id (mapFind s.paused id)).2
    cases hf : mapFind s.paused id with
    | none => exact hw
    | some used =>
      refine accounted_of_le p s _ ?_ hw
      intro j cj n hcap hn
      have h1 := heldIn_mapErase_found j id used s.paused hf
      obtain ⟨n', hn', hle⟩ := refund_acc p used s.ledger j n cj hcap hn
      refine ⟨n', hn', ?_⟩
      show n' + (heldIn j (mapErase s.paused id) + heldIn j s.running) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega
  | succeeded id ds =>
    show Accounted p (succeedWith p s id ds (mapFind s.running id)).2
    cases mapFind s.running id with
    | none => exact hw
    | some used =>
      refine accounted_of_le p s _ ?_ hw
      intro j cj n _ hn
      have h1 := heldIn_mapErase_le j id s.running
      refine ⟨n, hn, ?_⟩
      show n + (heldIn j s.paused + heldIn j (mapErase s.running id)) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega
  | failed id =>
    show Accounted p (failWith p s id (mapFind s.running id)).2
    cases hf : mapFind s.running id with
    | none => exact hw
    | some used =>
      refine accounted_of_le p s _ ?_ hw
      intro j cj n hcap hn
      have h1 := heldIn_mapErase_found j id used s.running hf
      obtain ⟨n', hn', hle⟩ := refund_acc p used s.ledger j n cj hcap hn
      refine ⟨n', hn', ?_⟩
      show n' + (heldIn j s.paused + heldIn j (mapErase s.running id)) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega
  | unknown id =>
    show Accounted p (unknownWith s id (mapFind s.running id)).2
    cases mapFind s.running id with
    | none => exact hw
    | some _ =>
      refine accounted_of_le p s _ ?_ hw
      intro j cj n _ hn
      have h1 := heldIn_mapErase_le j id s.running
      refine ⟨n, hn, ?_⟩
      show n + (heldIn j s.paused + heldIn j (mapErase s.running id)) ≤
        n + (heldIn j s.paused + heldIn j s.running)
      omega
  | seed k vs =>
    show Accounted p (seedWith s k vs (getAt s.sets k)).2
    cases getAt s.sets k with
    | none => exact hw
    | some _ => exact hw

theorem initial_accounted (p : Policy) : Accounted p (State.initial p) := by
  intro j c hcap
  obtain ⟨n, hn, hnc⟩ := initial_within p j c hcap
  refine ⟨n, hn, ?_⟩
  show n + (0 + 0) ≤ c
  omega

theorem runEvents_accounted (p : Policy) : ∀ (w : List (Event × Checks)) (s : State),
    Accounted p s → Accounted p (runEvents p s w) := by
  intro w
  induction w with
  | nil =>
    intro s hw
    exact hw
  | cons ec rest ih =>
    intro s hw
    exact ih (step p s ec.1 ec.2).2 (step_accounted p s ec.1 ec.2 hw)

/-- **remaining_plus_held_le_quota.** In every session, after any sequence of
events from the initial state, every grant with quota `limited c` has
`limited n` units left with `n + h ≤ c`, where `h` is the number of units
its paused and running calls hold. For a user: a unit reserved by a pause
is never also available to another call, a refund (rejection, denied
approval, failure) never returns a unit that is still held, and units of
calls that succeeded or ended with an unknown outcome stay spent — the
quota bounds what is left and what is in flight together.

What this does NOT rule out: it bounds units held, not units spent, so it
would still hold if a success refunded its unit (a quota-1 grant could then
be used forever) or if a denial consumed one. The exact accounting, with the
units kept by succeeded and unknown calls, is `quota_books`
(`AgenraProofs/Books.lean`). -/
theorem remaining_plus_held_le_quota (p : Policy) (w : List (Event × Checks)) :
    Accounted p (runEvents p (State.initial p) w) :=
  runEvents_accounted p w (State.initial p) (initial_accounted p)

end Agenra
