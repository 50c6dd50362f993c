/-
The books of a shared grant balance, exactly, over a tenant's sessions:
for every shared grant `g` (`quota q per tenant`, named `gr.name`), after
any interleaving of the events of sessions that all start at
`State.initial p`, from the empty pool (`runTenant`, each event a `stepIn`),

  units the pool counts as taken from g
    = units of g held by paused and running calls, over the sessions
      + units of g kept by calls that succeeded or ended with an unknown
        outcome, over the tenant's events                     (`tenant_books`)

and so units taken minus units refunded (the pool's count: a refund gives
its unit back to the pool) never exceed `q` (`tenant_books_within`, with
`shared_quota_never_exceeded` of `AgenraProofs.Pool`). This is the analogue
for shared grants of `quota_books` (`AgenraProofs.Books`), in the held
encoding: a session's ledger entry of a shared grant counts the units the
session took and did not give back (`Ledger.held`), and the pool's count is
the sum of those entries (`pool_taken_eq_sum_held_initial`,
`AgenraProofs.PoolSum`); here that entry is split into units held by calls
in flight and units kept by finished calls. "Units kept" is not part of the
state: `keptTenant` computes it from the tenant's event list, running the
events through `tenantStep` and adding, for each `succeeded` or `unknown`
event that found its call running, the units of `g` the call held (`keptBy`
of `AgenraProofs.Books`).

What the statement rules out (argued in `docs/lean.md`, "The books of a
shared grant"):
* "a success refunds" (a success gives the unit back to the pool): after a
  call of a quota-1 shared grant succeeds, taken would be 0 while kept is 1.
* "admission ignores the pool" (a unit taken when `taken = q`): the bound
  `taken ≤ q` of `tenant_books_within` fails for the first such unit.
* "a denial consumes" (a denied call takes a unit): the pool would count a
  unit that no call holds and no finished call kept, so `taken` would exceed
  held + kept.
* "a refund is lost" (a failure or rejection that does not give the unit
  back to the pool, or gives it back twice): taken ≠ held + kept after it.

Style as in `AgenraProofs.PoolSum`: `show`, `rw` with the `rfl` equations,
structural induction, `cases`, `by_cases`, `omega`; no `simp`.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger
import AgenraProofs.Ledger
import AgenraProofs.Quota
import AgenraProofs.Construction
import AgenraProofs.Accounting
import AgenraProofs.Pool
import AgenraProofs.PoolSum
import AgenraProofs.Books

namespace Agenra

/-! ## The guard of `step_in` -/

theorem guardFreshIn_held (s : State) (pool : SharedCounts) (id : String)
    (r : Outcome × State × SharedCounts) (hh : isHeld s id = true) :
    guardFreshIn s pool id r = (Outcome.invalid, s, pool) := by
  unfold guardFreshIn
  revert hh
  cases isHeld s id with
  | true => intro _; rfl
  | false => intro hh; cases hh

theorem guardFreshIn_fresh (s : State) (pool : SharedCounts) (id : String)
    (r : Outcome × State × SharedCounts) (hf : isHeld s id = false) :
    guardFreshIn s pool id r = r := by
  unfold guardFreshIn
  revert hf
  cases isHeld s id with
  | true => intro hf; cases hf
  | false => intro _; rfl

/-! ## The ledger entry of a shared grant -/

/-- Taking a unit of `x` adds exactly `ind x g` to the units the session
holds of the shared grant `g` (its entry is a count: `HoldsShared`). -/
theorem takeUnit_held (p : Policy) (l : Ledger) (pool : SharedCounts) (x g : Nat)
    (hsh : p.isShared g = true) (hl : HoldsShared p l) :
    Ledger.held p (takeUnit p l pool x).1 g = Ledger.held p l g + ind x g := by
  have e : (takeUnit p l pool x).1 = consumeShared p l x := rfl
  rw [e]
  by_cases hxg : x = g
  · rw [hxg, ind_self]
    obtain ⟨n, hn⟩ := hl g hsh
    have e2 : consumeShared p l g = modifyAt Quota.inc l g := by
      unfold consumeShared
      rw [if_pos hsh]
    have h1 : Ledger.held p (modifyAt Quota.inc l g) g = n + 1 := by
      rw [held_shared p (modifyAt Quota.inc l g) g hsh, getAt_modifyAt_self, hn] <;> rfl
    have h2 : Ledger.held p l g = n := by
      rw [held_shared p l g hsh, hn] <;> rfl
    rw [e2]
    omega
  · have hne : g ≠ x := fun h => hxg h.symm
    have hg : getAt (consumeShared p l x) g = getAt l g := by
      unfold consumeShared
      by_cases hsx : p.isShared x = true
      · rw [if_pos hsx]
        exact getAt_modifyAt_ne Quota.inc l x g hne
      · rw [if_neg hsx]
        exact getAt_consumeAt_ne l x g hne
    have h1 := held_congr p l (consumeShared p l x) g hg
    have h2 := ind_ne x g hxg
    omega

/-- Admission (`admit_in`) adds to the units the session holds of the
shared grant `g` exactly the units of `g` it served the call from. -/
theorem admitChainIn_held (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (req : Request) (sets : List (List String)) (g : Nat) (hsh : p.isShared g = true) :
    ∀ (chain : List Nat) (l : Ledger) (pool : SharedCounts)
      (r : List Nat × Ledger × SharedCounts),
      admitChainIn p req sets l pool chain = .ok r → HoldsShared p l →
      Ledger.held p r.2.1 g = Ledger.held p l g + countIn g r.1 := by
  intro chain
  induction chain with
  | nil =>
    intro l pool r h _
    have h2 : (Except.ok ([], l, pool) : Except Nat (List Nat × Ledger × SharedCounts)) =
        Except.ok r := h
    cases h2
    show Ledger.held p l g = Ledger.held p l g + 0
    omega
  | cons agent rest ih =>
    intro l pool r h hl
    cases hs : selectIn p l pool agent req sets with
    | none =>
      have h2 : optElim (selectIn p l pool agent req sets) (Except.error agent)
          (fun x => consUsedIn x (admitChainIn p req sets (takeUnit p l pool x).1
            (takeUnit p l pool x).2 rest)) = Except.ok r := h
      rw [hs] at h2
      have h3 : (Except.error agent : Except Nat (List Nat × Ledger × SharedCounts)) =
          Except.ok r := h2
      cases h3
    | some x =>
      have h2 : optElim (selectIn p l pool agent req sets) (Except.error agent)
          (fun x => consUsedIn x (admitChainIn p req sets (takeUnit p l pool x).1
            (takeUnit p l pool x).2 rest)) = Except.ok r := h
      rw [hs] at h2
      have h3 : consUsedIn x (admitChainIn p req sets (takeUnit p l pool x).1
          (takeUnit p l pool x).2 rest) = Except.ok r := h2
      have t1 := takeUnit_held p l pool x g hsh hl
      have hl1 := (takeUnit_tracks p hd hin l pool x hl).2
      cases hr : admitChainIn p req sets (takeUnit p l pool x).1 (takeUnit p l pool x).2 rest with
      | error a =>
        rw [hr] at h3
        have h4 : (Except.error a : Except Nat (List Nat × Ledger × SharedCounts)) =
            Except.ok r := h3
        cases h4
      | ok r' =>
        rw [hr] at h3
        have h4 : (Except.ok (x :: r'.1, r'.2) : Except Nat (List Nat × Ledger × SharedCounts)) =
            Except.ok r := h3
        cases h4
        have t2 := ih (takeUnit p l pool x).1 (takeUnit p l pool x).2 r' hr hl1
        show Ledger.held p r'.2.1 g = Ledger.held p l g + (ind x g + countIn g r'.1)
        omega

/-- `giveBack` leaves the ledger as it was or refunds the grant it gives back. -/
theorem giveBack_fst (p : Policy) (l : Ledger) (pool : SharedCounts) (x : Nat) :
    (giveBack p l pool x).1 = l ∨ (giveBack p l pool x).1 = refundShared p l x := by
  unfold giveBack
  by_cases hsx : p.isShared x = true
  · rw [if_pos hsx]
    by_cases h0 : Ledger.held p l x = 0
    · rw [if_pos h0]
      exact Or.inl rfl
    · rw [if_neg h0]
      exact Or.inr rfl
  · rw [if_neg hsx]
    exact Or.inr rfl

/-- A refund of `x` leaves every other grant's entry alone. -/
theorem refundShared_ne (p : Policy) (l : Ledger) (x g : Nat) (hne : g ≠ x) :
    getAt (refundShared p l x) g = getAt l g := by
  unfold refundShared
  by_cases hsx : p.isShared x = true
  · rw [if_pos hsx]
    exact getAt_modifyAt_ne Quota.dec l x g hne
  · rw [if_neg hsx]
    exact getAt_modifyAt_ne (Quota.refundCapped (capOf p x)) l x g hne

/-- Giving back a unit of `x` takes exactly `ind x g` from the units the
session holds of the shared grant `g`, when it holds at least that many
(so the give-back is not cut off at 0). -/
theorem giveBack_held (p : Policy) (l : Ledger) (pool : SharedCounts) (x g : Nat)
    (hsh : p.isShared g = true) (hle : ind x g ≤ Ledger.held p l g) :
    Ledger.held p (giveBack p l pool x).1 g + ind x g = Ledger.held p l g := by
  by_cases hxg : x = g
  · rw [hxg] at hle ⊢
    rw [ind_self] at hle ⊢
    cases he : getAt l g with
    | none =>
      have h0 : Ledger.held p l g = 0 := by
        rw [held_shared p l g hsh, he] <;> rfl
      omega
    | some q =>
      cases q with
      | unlimited =>
        have h0 : Ledger.held p l g = 0 := by
          rw [held_shared p l g hsh, he] <;> rfl
        omega
      | limited n =>
        cases n with
        | zero =>
          have h0 : Ledger.held p l g = 0 := by
            rw [held_shared p l g hsh, he] <;> rfl
          omega
        | succ m =>
          have hh : Ledger.held p l g = m + 1 := by
            rw [held_shared p l g hsh, he] <;> rfl
          have h0 : ¬ Ledger.held p l g = 0 := by omega
          have er : refundShared p l g = modifyAt Quota.dec l g := by
            unfold refundShared
            rw [if_pos hsh]
          have e : giveBack p l pool g =
              (modifyAt Quota.dec l g, pool.giveBack (grantName p g)) := by
            unfold giveBack
            rw [if_pos hsh, if_neg h0, er]
          have h1 : Ledger.held p (modifyAt Quota.dec l g) g = m := by
            rw [held_shared p (modifyAt Quota.dec l g) g hsh, getAt_modifyAt_self, he] <;> rfl
          rw [e]
          show Ledger.held p (modifyAt Quota.dec l g) g + 1 = Ledger.held p l g
          omega
  · have hne : g ≠ x := fun h => hxg h.symm
    have hg : getAt (giveBack p l pool x).1 g = getAt l g := by
      rcases giveBack_fst p l pool x with e | e
      · rw [e]
      · rw [e]
        exact refundShared_ne p l x g hne
    have h1 := held_congr p l (giveBack p l pool x).1 g hg
    have h2 := ind_ne x g hxg
    omega

/-- A refund (`refund_in`) of the units `used` takes exactly `countIn g
used` from the units the session holds of the shared grant `g`, when it
holds at least that many. -/
theorem refundIn_held (p : Policy) (g : Nat) (hsh : p.isShared g = true) :
    ∀ (used : List Nat) (l : Ledger) (pool : SharedCounts), countIn g used ≤ Ledger.held p l g →
      Ledger.held p (refundIn p l pool used).1 g + countIn g used = Ledger.held p l g := by
  intro used
  induction used with
  | nil =>
    intro l pool _
    show Ledger.held p l g + 0 = Ledger.held p l g
    omega
  | cons x xs ih =>
    intro l pool hle
    have hle2 : ind x g + countIn g xs ≤ Ledger.held p l g := hle
    have h1 := giveBack_held p l pool x g hsh (by omega)
    have h2 := ih (giveBack p l pool x).1 (giveBack p l pool x).2 (by omega)
    show Ledger.held p (refundIn p (giveBack p l pool x).1 (giveBack p l pool x).2 xs).1 g +
        (ind x g + countIn g xs) = Ledger.held p l g
    omega

/-! ## Calls in flight -/

/-- A fresh call's units join the session's calls in flight. -/
theorem stepAdmitted_units (p : Policy) (s : State) (id : String) (used : List Nat)
    (l : Ledger) (b : Bool) (g : Nat)
    (hf : mapFind s.paused id = none ∧ mapFind s.running id = none) :
    heldUnits (stepAdmitted p s id used l b).2 g = heldUnits s g + countIn g used := by
  unfold stepAdmitted
  by_cases hc : (used.any (grantApproval p) || b) = true
  · rw [if_pos hc]
    have hi := heldIn_insert_fresh g s.paused id used hf.1
    show heldIn g (mapInsert s.paused id used) + heldIn g s.running =
      heldIn g s.paused + heldIn g s.running + countIn g used
    omega
  · rw [if_neg hc]
    have hi := heldIn_insert_fresh g s.running id used hf.2
    show heldIn g s.paused + heldIn g (mapInsert s.running id used) =
      heldIn g s.paused + heldIn g s.running + countIn g used
    omega

/-! ## One step of one session -/

/-- **stepIn_books.** One step of a session against the tenant's pool
changes the units the session holds of a shared grant `g` (its ledger
entry) by exactly the change of the units its calls in flight hold, plus
the units of `g` the step keeps for good (`keptBy`: a success or an
unknown outcome of a running call). In `Nat`, without subtraction:
`held' + inFlight = held + inFlight' + kept`. The call maps stay well kept. -/
theorem stepIn_books (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (g : Nat) (hsh : p.isShared g = true) (s : State) (pool : SharedCounts) (e : Event)
    (c : Checks) (hl : HoldsShared p s.ledger) (hw : CallsWf s)
    (hb : heldUnits s g ≤ Ledger.held p s.ledger g) :
    CallsWf (stepIn p s pool e c).2.1 ∧
      Ledger.held p (stepIn p s pool e c).2.1.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits (stepIn p s pool e c).2.1 g +
          countIn g (keptBy s e) := by
  cases e with
  | call id req =>
    show CallsWf (guardFreshIn s pool id (stepCallIn p s pool id req c)).2.1 ∧
      Ledger.held p (guardFreshIn s pool id (stepCallIn p s pool id req c)).2.1.ledger g +
          heldUnits s g =
        Ledger.held p s.ledger g +
          heldUnits (guardFreshIn s pool id (stepCallIn p s pool id req c)).2.1 g +
          countIn g (keptBy s (.call id req))
    have hk : countIn g (keptBy s (.call id req)) = 0 := rfl
    cases hh : isHeld s id with
    | true =>
      rw [guardFreshIn_held s pool id _ hh]
      refine ⟨hw, ?_⟩
      show Ledger.held p s.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits s g + countIn g (keptBy s (.call id req))
      omega
    | false =>
      rw [guardFreshIn_fresh s pool id _ hh]
      have hf := fresh_none s id hh
      have key : ∀ (b : Bool),
          CallsWf (afterAdmitIn p s pool id b (admitIn p s.ledger pool req s.sets)).2.1 ∧
            Ledger.held p
                (afterAdmitIn p s pool id b (admitIn p s.ledger pool req s.sets)).2.1.ledger g +
                heldUnits s g =
              Ledger.held p s.ledger g +
                heldUnits (afterAdmitIn p s pool id b (admitIn p s.ledger pool req s.sets)).2.1 g +
                countIn g (keptBy s (.call id req)) := by
        intro b
        cases ha : admitIn p s.ledger pool req s.sets with
        | error a =>
          refine ⟨hw, ?_⟩
          show Ledger.held p s.ledger g + heldUnits s g =
            Ledger.held p s.ledger g + heldUnits s g + countIn g (keptBy s (.call id req))
          omega
        | ok r =>
          have ht := admitChainIn_held p hd hin req s.sets g hsh (p.agentChain req.agent)
            s.ledger pool r ha hl
          have hu := stepAdmitted_units p s id r.1 r.2.1 b g hf
          refine ⟨stepAdmitted_wf p s id r.1 r.2.1 b hf hw, ?_⟩
          show Ledger.held p (stepAdmitted p s id r.1 r.2.1 b).2.ledger g + heldUnits s g =
            Ledger.held p s.ledger g + heldUnits (stepAdmitted p s id r.1 r.2.1 b).2 g +
              countIn g (keptBy s (.call id req))
          rw [stepAdmitted_ledger]
          omega
      cases c with
      | deny =>
        refine ⟨hw, ?_⟩
        show Ledger.held p s.ledger g + heldUnits s g =
          Ledger.held p s.ledger g + heldUnits s g + countIn g (keptBy s (.call id req))
        omega
      | pass => exact key false
      | pause => exact key true
  | approve id =>
    show CallsWf (approveWithIn p s pool id c (mapFind s.paused id)).2.1 ∧
      Ledger.held p (approveWithIn p s pool id c (mapFind s.paused id)).2.1.ledger g +
          heldUnits s g =
        Ledger.held p s.ledger g + heldUnits (approveWithIn p s pool id c (mapFind s.paused id)).2.1 g +
          countIn g (keptBy s (.approve id))
    have hk : countIn g (keptBy s (.approve id)) = 0 := rfl
    cases hf : mapFind s.paused id with
    | none =>
      refine ⟨hw, ?_⟩
      show Ledger.held p s.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits s g + countIn g (keptBy s (.approve id))
      omega
    | some used =>
      have hwa := approve_wf p s id c hw
      rw [hf] at hwa
      have he := heldIn_erase_found g id used s.paused hw.1 hf
      have hrn : mapFind s.running id = none := by
        rcases hw.2.2 id with h1 | h1
        · rw [hf] at h1
          cases h1
        · exact h1
      have hb2 : heldIn g s.paused + heldIn g s.running ≤ Ledger.held p s.ledger g := hb
      cases c with
      | deny =>
        have hr := refundIn_held p g hsh used s.ledger pool (by omega)
        refine ⟨erasePaused_wf s id hw, ?_⟩
        show Ledger.held p (refundIn p s.ledger pool used).1 g +
            (heldIn g s.paused + heldIn g s.running) =
          Ledger.held p s.ledger g + (heldIn g (mapErase s.paused id) + heldIn g s.running) +
            countIn g (keptBy s (.approve id))
        omega
      | pass =>
        have hi := heldIn_insert_fresh g s.running id used hrn
        refine ⟨hwa, ?_⟩
        show Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g s.running) =
          Ledger.held p s.ledger g +
            (heldIn g (mapErase s.paused id) + heldIn g (mapInsert s.running id used)) +
            countIn g (keptBy s (.approve id))
        omega
      | pause =>
        have hi := heldIn_insert_fresh g s.running id used hrn
        refine ⟨hwa, ?_⟩
        show Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g s.running) =
          Ledger.held p s.ledger g +
            (heldIn g (mapErase s.paused id) + heldIn g (mapInsert s.running id used)) +
            countIn g (keptBy s (.approve id))
        omega
  | reject id =>
    show CallsWf (rejectWithIn p s pool id (mapFind s.paused id)).2.1 ∧
      Ledger.held p (rejectWithIn p s pool id (mapFind s.paused id)).2.1.ledger g +
          heldUnits s g =
        Ledger.held p s.ledger g + heldUnits (rejectWithIn p s pool id (mapFind s.paused id)).2.1 g +
          countIn g (keptBy s (.reject id))
    have hk : countIn g (keptBy s (.reject id)) = 0 := rfl
    cases hf : mapFind s.paused id with
    | none =>
      refine ⟨hw, ?_⟩
      show Ledger.held p s.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits s g + countIn g (keptBy s (.reject id))
      omega
    | some used =>
      have he := heldIn_erase_found g id used s.paused hw.1 hf
      have hb2 : heldIn g s.paused + heldIn g s.running ≤ Ledger.held p s.ledger g := hb
      have hr := refundIn_held p g hsh used s.ledger pool (by omega)
      refine ⟨erasePaused_wf s id hw, ?_⟩
      show Ledger.held p (refundIn p s.ledger pool used).1 g +
          (heldIn g s.paused + heldIn g s.running) =
        Ledger.held p s.ledger g + (heldIn g (mapErase s.paused id) + heldIn g s.running) +
          countIn g (keptBy s (.reject id))
      omega
  | succeeded id ds =>
    show CallsWf (succeedWith p s id ds (mapFind s.running id)).2 ∧
      Ledger.held p (succeedWith p s id ds (mapFind s.running id)).2.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits (succeedWith p s id ds (mapFind s.running id)).2 g +
          countIn g (optElim (mapFind s.running id) [] (fun used => used))
    cases hf : mapFind s.running id with
    | none =>
      refine ⟨hw, ?_⟩
      show Ledger.held p s.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits s g + 0
      omega
    | some used =>
      have he := heldIn_erase_found g id used s.running hw.2.1 hf
      refine ⟨eraseRunning_wf s id hw, ?_⟩
      show Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g s.running) =
        Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g (mapErase s.running id)) +
          countIn g used
      omega
  | failed id =>
    show CallsWf (failWithIn p s pool id (mapFind s.running id)).2.1 ∧
      Ledger.held p (failWithIn p s pool id (mapFind s.running id)).2.1.ledger g +
          heldUnits s g =
        Ledger.held p s.ledger g + heldUnits (failWithIn p s pool id (mapFind s.running id)).2.1 g +
          countIn g (keptBy s (.failed id))
    have hk : countIn g (keptBy s (.failed id)) = 0 := rfl
    cases hf : mapFind s.running id with
    | none =>
      refine ⟨hw, ?_⟩
      show Ledger.held p s.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits s g + countIn g (keptBy s (.failed id))
      omega
    | some used =>
      have he := heldIn_erase_found g id used s.running hw.2.1 hf
      have hb2 : heldIn g s.paused + heldIn g s.running ≤ Ledger.held p s.ledger g := hb
      have hr := refundIn_held p g hsh used s.ledger pool (by omega)
      refine ⟨eraseRunning_wf s id hw, ?_⟩
      show Ledger.held p (refundIn p s.ledger pool used).1 g +
          (heldIn g s.paused + heldIn g s.running) =
        Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g (mapErase s.running id)) +
          countIn g (keptBy s (.failed id))
      omega
  | unknown id =>
    show CallsWf (unknownWith s id (mapFind s.running id)).2 ∧
      Ledger.held p (unknownWith s id (mapFind s.running id)).2.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits (unknownWith s id (mapFind s.running id)).2 g +
          countIn g (optElim (mapFind s.running id) [] (fun used => used))
    cases hf : mapFind s.running id with
    | none =>
      refine ⟨hw, ?_⟩
      show Ledger.held p s.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits s g + 0
      omega
    | some used =>
      have he := heldIn_erase_found g id used s.running hw.2.1 hf
      refine ⟨eraseRunning_wf s id hw, ?_⟩
      show Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g s.running) =
        Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g (mapErase s.running id)) +
          countIn g used
      omega
  | seed k vs =>
    show CallsWf (seedWith s k vs (getAt s.sets k)).2 ∧
      Ledger.held p (seedWith s k vs (getAt s.sets k)).2.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits (seedWith s k vs (getAt s.sets k)).2 g +
          countIn g (keptBy s (.seed k vs))
    have hk : countIn g (keptBy s (.seed k vs)) = 0 := rfl
    cases getAt s.sets k with
    | none =>
      refine ⟨hw, ?_⟩
      show Ledger.held p s.ledger g + heldUnits s g =
        Ledger.held p s.ledger g + heldUnits s g + countIn g (keptBy s (.seed k vs))
      omega
    | some _ =>
      refine ⟨hw, ?_⟩
      show Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g s.running) =
        Ledger.held p s.ledger g + (heldIn g s.paused + heldIn g s.running) +
          countIn g (keptBy s (.seed k vs))
      omega

/-! ## The sessions together -/

/-- Units of `g` held by the paused and running calls of all the sessions. -/
def unitsSum (g : Nat) : List State → Nat
  | [] => 0
  | s :: rest => heldUnits s g + unitsSum g rest

/-- Units of `g` kept spent for good by the tenant's events `evs` run from
`(ss, pool)`: for each `succeeded` or `unknown` event that ends a running
call of its session, the units of `g` that call held. Computed by running
the events through `tenantStep`, as `runTenant` does. -/
def keptTenant (p : Policy) (g : Nat) : List State → SharedCounts → List TenantEvent → Nat
  | _, _, [] => 0
  | ss, pool, ev :: rest =>
    optElim (getAt ss ev.1) 0 (fun s => countIn g (keptBy s ev.2.1)) +
      keptTenant p g (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2 rest

/-- Every session's call maps are well kept, and its calls in flight hold
no more of `g` than its ledger entry counts. -/
def SessionsOk (p : Policy) (g : Nat) (ss : List State) : Prop :=
  ∀ (i : Nat) (s : State), getAt ss i = some s →
    CallsWf s ∧ heldUnits s g ≤ Ledger.held p s.ledger g

theorem unitsSum_modifyAt (g : Nat) (s s' : State) :
    ∀ (ss : List State) (i : Nat), getAt ss i = some s →
      unitsSum g (modifyAt (fun _ => s') ss i) + heldUnits s g =
        unitsSum g ss + heldUnits s' g := by
  intro ss
  induction ss with
  | nil =>
    intro i h
    rw [getAt_nil] at h
    cases h
  | cons t ts ih =>
    intro i h
    cases i with
    | zero =>
      have h2 : some t = some s := h
      have h3 : t = s := Option.some.inj h2
      rw [h3]
      show heldUnits s' g + unitsSum g ts + heldUnits s g =
        heldUnits s g + unitsSum g ts + heldUnits s' g
      omega
    | succ i =>
      have h2 : getAt ts i = some s := h
      have h3 := ih i h2
      show heldUnits t g + unitsSum g (modifyAt (fun _ => s') ts i) + heldUnits s g =
        heldUnits t g + unitsSum g ts + heldUnits s' g
      omega

theorem sessionsOk_modifyAt (p : Policy) (g : Nat) (ss : List State) (i : Nat) (s' : State)
    (h : SessionsOk p g ss) (h' : CallsWf s' ∧ heldUnits s' g ≤ Ledger.held p s'.ledger g) :
    SessionsOk p g (modifyAt (fun _ => s') ss i) := by
  intro j t hj
  by_cases hji : j = i
  · rw [hji, getAt_modifyAt_self] at hj
    cases hgi : getAt ss i with
    | none =>
      rw [hgi] at hj
      have h2 : (none : Option State) = some t := hj
      cases h2
    | some s0 =>
      rw [hgi] at hj
      have h2 : some s' = some t := hj
      have ht : s' = t := Option.some.inj h2
      rw [← ht]
      exact h'
  · rw [getAt_modifyAt_ne (fun _ => s') ss i j hji] at hj
    exact h j t hj

/-- One event of one session: the sessions' ledger entries of `g`, added
up, change by the change of their calls in flight plus the units kept. -/
theorem tenantStep_books (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (g : Nat) (hsh : p.isShared g = true) (ss : List State) (pool : SharedCounts)
    (ev : TenantEvent) (ha : AllHoldShared p ss) (hok : SessionsOk p g ss) :
    SessionsOk p g (tenantStep p ss pool ev).1 ∧
      heldSum p g (tenantStep p ss pool ev).1 + unitsSum g ss =
        heldSum p g ss + unitsSum g (tenantStep p ss pool ev).1 +
          optElim (getAt ss ev.1) 0 (fun s => countIn g (keptBy s ev.2.1)) := by
  cases hi : getAt ss ev.1 with
  | none =>
    have e : tenantStep p ss pool ev = (ss, pool) := by
      unfold tenantStep
      rw [hi] <;> rfl
    rw [e]
    refine ⟨hok, ?_⟩
    show heldSum p g ss + unitsSum g ss = heldSum p g ss + unitsSum g ss + 0
    omega
  | some s =>
    have e : tenantStep p ss pool ev =
        (modifyAt (fun _ => (stepIn p s pool ev.2.1 ev.2.2).2.1) ss ev.1,
          (stepIn p s pool ev.2.1 ev.2.2).2.2) := by
      unfold tenantStep
      rw [hi] <;> rfl
    rw [e]
    obtain ⟨hw, hb⟩ := hok ev.1 s hi
    obtain ⟨hw', he⟩ := stepIn_books p hd hin g hsh s pool ev.2.1 ev.2.2 (ha ev.1 s hi) hw hb
    have e2 := heldSum_modifyAt p g s (stepIn p s pool ev.2.1 ev.2.2).2.1 ss ev.1 hi
    have e3 := unitsSum_modifyAt g s (stepIn p s pool ev.2.1 ev.2.2).2.1 ss ev.1 hi
    have hb' : heldUnits (stepIn p s pool ev.2.1 ev.2.2).2.1 g ≤
        Ledger.held p (stepIn p s pool ev.2.1 ev.2.2).2.1.ledger g := by
      omega
    refine ⟨sessionsOk_modifyAt p g ss ev.1 (stepIn p s pool ev.2.1 ev.2.2).2.1 hok
      ⟨hw', hb'⟩, ?_⟩
    show heldSum p g (modifyAt (fun _ => (stepIn p s pool ev.2.1 ev.2.2).2.1) ss ev.1) +
        unitsSum g ss =
      heldSum p g ss + unitsSum g (modifyAt (fun _ => (stepIn p s pool ev.2.1 ev.2.2).2.1) ss ev.1) +
        countIn g (keptBy s ev.2.1)
    omega

/-- Any interleaving: the sessions' ledger entries of `g`, added up, change
by the change of their calls in flight plus the units the events kept. -/
theorem runTenant_books (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (g : Nat) (hsh : p.isShared g = true) :
    ∀ (evs : List TenantEvent) (ss : List State) (pool : SharedCounts),
      PoolExact p ss pool → AllHoldShared p ss → SessionsOk p g ss →
      heldSum p g (runTenant p ss pool evs).1 + unitsSum g ss =
        heldSum p g ss + unitsSum g (runTenant p ss pool evs).1 + keptTenant p g ss pool evs := by
  intro evs
  induction evs with
  | nil =>
    intro ss pool _ _ _
    show heldSum p g ss + unitsSum g ss = heldSum p g ss + unitsSum g ss + 0
    omega
  | cons ev rest ih =>
    intro ss pool hx ha hok
    obtain ⟨hx', ha'⟩ := tenantStep_exact p hd hin ss pool ev hx ha
    obtain ⟨hok', e1⟩ := tenantStep_books p hd hin g hsh ss pool ev ha hok
    have e2 := ih (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2 hx' ha' hok'
    show heldSum p g (runTenant p (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2 rest).1 +
        unitsSum g ss =
      heldSum p g ss +
        unitsSum g (runTenant p (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2 rest).1 +
        (optElim (getAt ss ev.1) 0 (fun s => countIn g (keptBy s ev.2.1)) +
          keptTenant p g (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2 rest)
    omega

theorem unitsSum_zero (p : Policy) (g : Nat) : ∀ (ss : List State),
    (∀ (i : Nat) (s : State), getAt ss i = some s → s = State.initial p) →
      unitsSum g ss = 0 := by
  intro ss
  induction ss with
  | nil =>
    intro _
    rfl
  | cons t ts ih =>
    intro h
    have ht : t = State.initial p := h 0 t (getAt_cons_zero t ts)
    have h0 : heldUnits t g = 0 := by
      rw [ht] <;> rfl
    have h1 : unitsSum g ts = 0 := ih (fun i s hi => h (i + 1) s hi)
    show heldUnits t g + unitsSum g ts = 0
    omega

/-- **tenant_books.** For every shared grant `g` (named `gr.name` in the
pool), after any interleaving of the events of a tenant's sessions, all
started at `State.initial p`, from the empty pool: the units the pool
counts as taken from `g` are exactly the units of `g` held by the
sessions' paused and running calls plus the units of `g` kept by calls that
succeeded or ended with an unknown outcome. So units taken minus units
refunded (the pool's count) are held or kept, each exactly once. Needs the
policy checks of `validate.rs`: shared grants are grants of the policy with
distinct names.

Rules out: "a success refunds" (the pool would fall below held + kept);
"a denial consumes" (the pool would count a unit nobody holds or kept);
"a refund is lost" (a failure or rejection that does not give its unit
back leaves the pool above held + kept). -/
theorem tenant_books (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (ss : List State) (evs : List TenantEvent)
    (hs : ∀ (i : Nat) (s : State), getAt ss i = some s → s = State.initial p)
    (g : Nat) (gr : Grant) (hsh : p.isShared g = true) (hg : getAt p.grants g = some gr) :
    (runTenant p ss SharedCounts.empty evs).2.taken gr.name =
      unitsSum g (runTenant p ss SharedCounts.empty evs).1 +
        keptTenant p g ss SharedCounts.empty evs := by
  have h0 := initial_holdNothing p hin ss hs
  have hx : PoolExact p ss SharedCounts.empty := by
    intro g' gr' hs' _
    have hz := heldSum_zero p g' hs' ss (fun i s hi => h0 i s hi g' hs')
    show 0 = heldSum p g' ss
    rw [hz]
  have ha : AllHoldShared p ss := by
    intro i s hi g' hs'
    exact ⟨0, h0 i s hi g' hs'⟩
  have hok : SessionsOk p g ss := by
    intro i s hi
    rw [hs i s hi]
    have hz : heldUnits (State.initial p) g = 0 := rfl
    refine ⟨initial_wf p, ?_⟩
    omega
  have hb := runTenant_books p hd hin g hsh evs ss SharedCounts.empty hx ha hok
  have hz0 := heldSum_zero p g hsh ss (fun i s hi => h0 i s hi g hsh)
  have hz1 := unitsSum_zero p g ss hs
  have hex := pool_taken_eq_sum_held_initial p hd hin ss evs hs g gr hsh hg
  omega

/-- **tenant_books_within.** With `tenant_books`: for a shared grant with
quota `limited q`, the units held by the tenant's calls in flight plus the
units kept by its finished calls never exceed `q` (the pool's count never
does: `shared_quota_never_exceeded`, because admission takes a shared unit
only while `taken < q`). Rules out "admission ignores the pool". -/
theorem tenant_books_within (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (ss : List State) (evs : List TenantEvent)
    (hs : ∀ (i : Nat) (s : State), getAt ss i = some s → s = State.initial p)
    (g : Nat) (gr : Grant) (q : Nat) (hsh : p.isShared g = true)
    (hg : getAt p.grants g = some gr) (hq : gr.quota = .limited q) :
    unitsSum g (runTenant p ss SharedCounts.empty evs).1 +
        keptTenant p g ss SharedCounts.empty evs ≤ q := by
  have he := tenant_books p hd hin ss evs hs g gr hsh hg
  have hw := shared_quota_never_exceeded p hd ss evs g gr q hsh hg hq
  omega

end Agenra
