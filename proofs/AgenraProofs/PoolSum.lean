/-
Quota scope, exactly: across any interleaving of the events of a tenant's
sessions sharing a pool (`stepIn`), the units the pool counts as taken from
a shared grant are exactly the units the sessions hold of it, added up over
the sessions. This is the equality `pool.taken(name) = Σ s.ledger.held(g)`
that `check_pool` in `rust/core/tests/shared_quotas.rs` tests; `Pool.lean`
proves the bound `pool.taken(name) ≤ q`.

The proof is one step at a time: a step of one session changes the pool's
count of every shared grant by exactly the change of the units that
session holds of it (`Tracks`, `stepIn_tracks`); the other sessions do not
move; so the sum over the sessions follows the pool (`tenantStep_exact`).
Three facts keep this exact, and each is an invariant or a policy check:
every session's entry of a shared grant is a `limited` count (`HoldsShared`;
an `unlimited` entry would not count a unit taken), a session never holds
more than the pool counts (`Covers`, so that a give-back is never cut off
at 0), and shared grants are grants of the policy with distinct names
(`SharedInRange`, `SharedNamesDistinct`, both checked by `validate.rs`).

Style as in `AgenraProofs.Pool`: `show`, `rw` with the `rfl` equations,
structural induction, `cases`, `by_cases`, `omega`; no `simp`.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger
import AgenraProofs.Ledger
import AgenraProofs.Quota
import AgenraProofs.Construction
import AgenraProofs.Pool

namespace Agenra

/-! ## The statement -/

/-- Units of grant `g` held by all the sessions together: Rust's
`states.iter().map(|s| s.ledger.held(g)).sum()`. -/
def heldSum (p : Policy) (g : Nat) : List State → Nat
  | [] => 0
  | s :: rest => Ledger.held p s.ledger g + heldSum p g rest

/-- The pool counts exactly what the sessions hold: for every shared grant,
the units taken in the pool (by the grant's name) are the sum over the
sessions of the units each holds of it. -/
def PoolExact (p : Policy) (ss : List State) (pool : SharedCounts) : Prop :=
  ∀ (g : Nat) (gr : Grant), p.isShared g = true → getAt p.grants g = some gr →
    pool.taken gr.name = heldSum p g ss

/-- Every shared grant is a grant of the policy (`validate.rs` checks that
every index of `shared_grants` is in range). -/
def SharedInRange (p : Policy) : Prop :=
  ∀ (g : Nat), p.isShared g = true → ∃ gr, getAt p.grants g = some gr

/-- The ledger's entry of every shared grant is a `limited` count (the
units the session holds). -/
def HoldsShared (p : Policy) (l : Ledger) : Prop :=
  ∀ (g : Nat), p.isShared g = true → ∃ n, getAt l g = some (.limited n)

/-- Every session's ledger has a `limited` entry for every shared grant. -/
def AllHoldShared (p : Policy) (ss : List State) : Prop :=
  ∀ (i : Nat) (s : State), getAt ss i = some s → HoldsShared p s.ledger

/-- Every session holds no unit of any shared grant: its entry is
`limited 0`, as Rust's `Ledger::initial` starts it. -/
def HoldNothing (p : Policy) (ss : List State) : Prop :=
  ∀ (i : Nat) (s : State), getAt ss i = some s →
    ∀ (g : Nat), p.isShared g = true → getAt s.ledger g = some (.limited 0)

/-- From `(l, pool)` to `(l', pool')`, every shared grant's units taken in
the pool changed by exactly the change of the units the ledger holds (in
`Nat`, without subtraction: `taken' + held = taken + held'`). -/
def Tracks (p : Policy) (l : Ledger) (pool : SharedCounts) (l' : Ledger)
    (pool' : SharedCounts) : Prop :=
  ∀ (g : Nat) (gr : Grant), p.isShared g = true → getAt p.grants g = some gr →
    pool'.taken gr.name + Ledger.held p l g = pool.taken gr.name + Ledger.held p l' g

/-- The session holds no more of a shared grant than the pool counts as
taken (true of every session while `PoolExact` holds). -/
def Covers (p : Policy) (l : Ledger) (pool : SharedCounts) : Prop :=
  ∀ (g : Nat) (gr : Grant), p.isShared g = true → getAt p.grants g = some gr →
    Ledger.held p l g ≤ pool.taken gr.name

/-! ## Counts -/

theorem held_shared (p : Policy) (l : Ledger) (g : Nat) (hs : p.isShared g = true) :
    Ledger.held p l g = heldEntry (getAt l g) := by
  show (if p.isShared g then heldEntry (getAt l g) else 0) = heldEntry (getAt l g)
  rw [if_pos hs]

theorem held_congr (p : Policy) (l l' : Ledger) (g : Nat) (e : getAt l' g = getAt l g) :
    Ledger.held p l' g = Ledger.held p l g := by
  show (if p.isShared g then heldEntry (getAt l' g) else 0) =
    (if p.isShared g then heldEntry (getAt l g) else 0)
  rw [e]

theorem taken_take_self (c : SharedCounts) (name : String) :
    (c.take name).taken name = c.taken name + 1 := by
  show (c.setTaken name (c.taken name + 1)).taken name = c.taken name + 1
  rw [setTaken_taken, if_pos (rfl : name = name)]

theorem taken_take_ne (c : SharedCounts) (name x : String) (h : ¬ x = name) :
    (c.take name).taken x = c.taken x := by
  show (c.setTaken name (c.taken name + 1)).taken x = c.taken x
  rw [setTaken_taken, if_neg h]

theorem taken_giveBack_self (c : SharedCounts) (name : String) :
    (c.giveBack name).taken name = c.taken name - 1 := by
  show (c.setTaken name (c.taken name - 1)).taken name = c.taken name - 1
  rw [setTaken_taken, if_pos (rfl : name = name)]

theorem taken_giveBack_ne (c : SharedCounts) (name x : String) (h : ¬ x = name) :
    (c.giveBack name).taken x = c.taken x := by
  show (c.setTaken name (c.taken name - 1)).taken x = c.taken x
  rw [setTaken_taken, if_neg h]

theorem tracks_refl (p : Policy) (l : Ledger) (pool : SharedCounts) : Tracks p l pool l pool := by
  intro g gr _ _
  rfl

theorem tracks_trans (p : Policy) (l0 l1 l2 : Ledger) (pool0 pool1 pool2 : SharedCounts)
    (h1 : Tracks p l0 pool0 l1 pool1) (h2 : Tracks p l1 pool1 l2 pool2) :
    Tracks p l0 pool0 l2 pool2 := by
  intro g gr hs hg
  have e1 := h1 g gr hs hg
  have e2 := h2 g gr hs hg
  omega

/-! ## Taking and giving back -/

/-- Taking a unit of `g`: for a shared grant, the pool's count of its name
and the session's held units both go up by one, and nothing else moves;
for any other grant, neither the pool nor a shared entry moves. -/
theorem takeUnit_tracks (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (l : Ledger) (pool : SharedCounts) (g : Nat) (hl : HoldsShared p l) :
    Tracks p l pool (takeUnit p l pool g).1 (takeUnit p l pool g).2 ∧
      HoldsShared p (takeUnit p l pool g).1 := by
  by_cases hs : p.isShared g = true
  · obtain ⟨gr0, hg0⟩ := hin g hs
    obtain ⟨n0, hn0⟩ := hl g hs
    have hname : grantName p g = gr0.name := by
      unfold grantName
      rw [hg0] <;> rfl
    have e1 : (takeUnit p l pool g).1 = modifyAt Quota.inc l g := by
      show (if p.isShared g then modifyAt Quota.inc l g else consumeAt l g) =
        modifyAt Quota.inc l g
      rw [if_pos hs]
    have e2 : (takeUnit p l pool g).2 = pool.take gr0.name := by
      show (if p.isShared g then pool.take (grantName p g) else pool) = pool.take gr0.name
      rw [if_pos hs, hname]
    rw [e1, e2]
    refine ⟨?_, ?_⟩
    · intro h hr hsh hgh
      by_cases hhg : h = g
      · rw [hhg] at hgh
        rw [hhg]
        rw [hg0] at hgh
        have hgr : gr0 = hr := Option.some.inj hgh
        rw [← hgr, taken_take_self, held_shared p l g hs,
          held_shared p (modifyAt Quota.inc l g) g hs, getAt_modifyAt_self, hn0]
        show pool.taken gr0.name + 1 + n0 = pool.taken gr0.name + (n0 + 1)
        omega
      · have hn : ¬ hr.name = gr0.name := fun e => hhg (hd h g hr gr0 hsh hs hgh hg0 e)
        rw [taken_take_ne pool gr0.name hr.name hn,
          held_congr p l (modifyAt Quota.inc l g) h (getAt_modifyAt_ne Quota.inc l g h hhg)]
    · intro h hsh
      by_cases hhg : h = g
      · rw [hhg, getAt_modifyAt_self, hn0]
        exact ⟨n0 + 1, rfl⟩
      · rw [getAt_modifyAt_ne Quota.inc l g h hhg]
        exact hl h hsh
  · have e1 : (takeUnit p l pool g).1 = consumeAt l g := by
      show (if p.isShared g then modifyAt Quota.inc l g else consumeAt l g) = consumeAt l g
      rw [if_neg hs]
    have e2 : (takeUnit p l pool g).2 = pool := by
      show (if p.isShared g then pool.take (grantName p g) else pool) = pool
      rw [if_neg hs]
    rw [e1, e2]
    have hne : ∀ (h : Nat), p.isShared h = true → ¬ h = g := by
      intro h hsh hhg
      rw [hhg] at hsh
      exact hs hsh
    refine ⟨?_, ?_⟩
    · intro h hr hsh hgh
      rw [held_congr p l (consumeAt l g) h (getAt_consumeAt_ne l g h (hne h hsh))]
    · intro h hsh
      rw [getAt_consumeAt_ne l g h (hne h hsh)]
      exact hl h hsh

/-- Giving a unit of `g` back: for a shared grant the session holds a unit
of, the pool's count and the held units both go down by one (the pool's
count is at least the held units, so it is not cut off at 0); otherwise
neither the pool nor a shared entry moves. -/
theorem giveBack_tracks (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (l : Ledger) (pool : SharedCounts) (g : Nat) (hl : HoldsShared p l)
    (hc : Covers p l pool) :
    Tracks p l pool (giveBack p l pool g).1 (giveBack p l pool g).2 ∧
      HoldsShared p (giveBack p l pool g).1 ∧
      Covers p (giveBack p l pool g).1 (giveBack p l pool g).2 := by
  by_cases hs : p.isShared g = true
  · obtain ⟨gr0, hg0⟩ := hin g hs
    obtain ⟨n0, hn0⟩ := hl g hs
    have hheld : Ledger.held p l g = n0 := by
      rw [held_shared p l g hs, hn0] <;> rfl
    by_cases h0 : Ledger.held p l g = 0
    · have e : giveBack p l pool g = (l, pool) := by
        unfold giveBack
        rw [if_pos hs, if_pos h0]
      rw [e]
      exact ⟨tracks_refl p l pool, hl, hc⟩
    · cases n0 with
      | zero => exact absurd hheld h0
      | succ m =>
        have hname : grantName p g = gr0.name := by
          unfold grantName
          rw [hg0] <;> rfl
        have er : refundShared p l g = modifyAt Quota.dec l g := by
          unfold refundShared
          rw [if_pos hs]
        have e : giveBack p l pool g = (modifyAt Quota.dec l g, pool.giveBack gr0.name) := by
          unfold giveBack
          rw [if_pos hs, if_neg h0, er, hname]
        rw [e]
        have hcov : m + 1 ≤ pool.taken gr0.name := by
          have h1 := hc g gr0 hs hg0
          rw [hheld] at h1
          exact h1
        have hnew : getAt (modifyAt Quota.dec l g) g = some (.limited m) := by
          rw [getAt_modifyAt_self, hn0] <;> rfl
        have hsame : ∀ (h : Nat), ¬ h = g → getAt (modifyAt Quota.dec l g) h = getAt l h :=
          fun h hhg => getAt_modifyAt_ne Quota.dec l g h hhg
        refine ⟨?_, ?_, ?_⟩
        · intro h hr hsh hgh
          by_cases hhg : h = g
          · rw [hhg] at hgh
            rw [hhg]
            rw [hg0] at hgh
            have hgr : gr0 = hr := Option.some.inj hgh
            rw [← hgr, taken_giveBack_self, hheld,
              held_shared p (modifyAt Quota.dec l g) g hs, hnew]
            show pool.taken gr0.name - 1 + (m + 1) = pool.taken gr0.name + m
            omega
          · have hn : ¬ hr.name = gr0.name := fun e => hhg (hd h g hr gr0 hsh hs hgh hg0 e)
            rw [taken_giveBack_ne pool gr0.name hr.name hn,
              held_congr p l (modifyAt Quota.dec l g) h (hsame h hhg)]
        · intro h hsh
          by_cases hhg : h = g
          · rw [hhg, hnew]
            exact ⟨m, rfl⟩
          · rw [hsame h hhg]
            exact hl h hsh
        · intro h hr hsh hgh
          by_cases hhg : h = g
          · rw [hhg] at hgh
            rw [hhg]
            rw [hg0] at hgh
            have hgr : gr0 = hr := Option.some.inj hgh
            rw [← hgr, taken_giveBack_self, held_shared p (modifyAt Quota.dec l g) g hs, hnew]
            show m ≤ pool.taken gr0.name - 1
            omega
          · have hn : ¬ hr.name = gr0.name := fun e => hhg (hd h g hr gr0 hsh hs hgh hg0 e)
            rw [taken_giveBack_ne pool gr0.name hr.name hn,
              held_congr p l (modifyAt Quota.dec l g) h (hsame h hhg)]
            exact hc h hr hsh hgh
  · have er : refundShared p l g = refundOne p l g := by
      unfold refundShared
      rw [if_neg hs]
    have e : giveBack p l pool g = (refundOne p l g, pool) := by
      unfold giveBack
      rw [if_neg hs, er]
    rw [e]
    have hsame : ∀ (h : Nat), p.isShared h = true → getAt (refundOne p l g) h = getAt l h := by
      intro h hsh
      have hhg : ¬ h = g := by
        intro hhg
        rw [hhg] at hsh
        exact hs hsh
      exact getAt_modifyAt_ne (Quota.refundCapped (capOf p g)) l g h hhg
    refine ⟨?_, ?_, ?_⟩
    · intro h hr hsh hgh
      rw [held_congr p l (refundOne p l g) h (hsame h hsh)]
    · intro h hsh
      rw [hsame h hsh]
      exact hl h hsh
    · intro h hr hsh hgh
      rw [held_congr p l (refundOne p l g) h (hsame h hsh)]
      exact hc h hr hsh hgh

/-- Refunds (`refund_in`): every give-back keeps the pool and the held
units in step. -/
theorem refundIn_tracks (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p) :
    ∀ (used : List Nat) (l : Ledger) (pool : SharedCounts), HoldsShared p l → Covers p l pool →
      Tracks p l pool (refundIn p l pool used).1 (refundIn p l pool used).2 ∧
        HoldsShared p (refundIn p l pool used).1 ∧
        Covers p (refundIn p l pool used).1 (refundIn p l pool used).2 := by
  intro used
  induction used with
  | nil =>
    intro l pool hl hc
    exact ⟨tracks_refl p l pool, hl, hc⟩
  | cons g gs ih =>
    intro l pool hl hc
    obtain ⟨t1, hl1, hc1⟩ := giveBack_tracks p hd hin l pool g hl hc
    obtain ⟨t2, hl2, hc2⟩ := ih (giveBack p l pool g).1 (giveBack p l pool g).2 hl1 hc1
    exact ⟨tracks_trans p l (giveBack p l pool g).1
      (refundIn p (giveBack p l pool g).1 (giveBack p l pool g).2 gs).1
      pool (giveBack p l pool g).2
      (refundIn p (giveBack p l pool g).1 (giveBack p l pool g).2 gs).2 t1 t2, hl2, hc2⟩

/-- Admission (`admit_in`): every unit taken keeps the pool and the held
units in step. -/
theorem admitChainIn_tracks (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (req : Request) (sets : List (List String)) :
    ∀ (chain : List Nat) (l : Ledger) (pool : SharedCounts)
      (r : List Nat × Ledger × SharedCounts),
      admitChainIn p req sets l pool chain = .ok r → HoldsShared p l →
      Tracks p l pool r.2.1 r.2.2 ∧ HoldsShared p r.2.1 := by
  intro chain
  induction chain with
  | nil =>
    intro l pool r h hl
    have h2 : (Except.ok ([], l, pool) : Except Nat (List Nat × Ledger × SharedCounts)) =
        Except.ok r := h
    cases h2
    exact ⟨tracks_refl p l pool, hl⟩
  | cons agent rest ih =>
    intro l pool r h hl
    cases hs : selectIn p l pool agent req sets with
    | none =>
      have h2 : optElim (selectIn p l pool agent req sets) (Except.error agent)
          (fun g => consUsedIn g (admitChainIn p req sets (takeUnit p l pool g).1
            (takeUnit p l pool g).2 rest)) = Except.ok r := h
      rw [hs] at h2
      have h3 : (Except.error agent : Except Nat (List Nat × Ledger × SharedCounts)) =
          Except.ok r := h2
      cases h3
    | some g =>
      have h2 : optElim (selectIn p l pool agent req sets) (Except.error agent)
          (fun g => consUsedIn g (admitChainIn p req sets (takeUnit p l pool g).1
            (takeUnit p l pool g).2 rest)) = Except.ok r := h
      rw [hs] at h2
      have h3 : consUsedIn g (admitChainIn p req sets (takeUnit p l pool g).1
          (takeUnit p l pool g).2 rest) = Except.ok r := h2
      obtain ⟨t1, hl1⟩ := takeUnit_tracks p hd hin l pool g hl
      cases hr : admitChainIn p req sets (takeUnit p l pool g).1 (takeUnit p l pool g).2 rest with
      | error a =>
        rw [hr] at h3
        have h4 : (Except.error a : Except Nat (List Nat × Ledger × SharedCounts)) =
            Except.ok r := h3
        cases h4
      | ok r' =>
        rw [hr] at h3
        have h4 : (Except.ok (g :: r'.1, r'.2) : Except Nat (List Nat × Ledger × SharedCounts)) =
            Except.ok r := h3
        cases h4
        obtain ⟨t2, hl2⟩ := ih (takeUnit p l pool g).1 (takeUnit p l pool g).2 r' hr hl1
        exact ⟨tracks_trans p l (takeUnit p l pool g).1 r'.2.1 pool (takeUnit p l pool g).2
          r'.2.2 t1 t2, hl2⟩

/-! ## One step of one session -/

/-- **stepIn_tracks.** One step of a session against the tenant's pool
(any event: a call admitted, paused, denied or a duplicate; an approval
allowed or denied by its re-check; a rejection; a success; a failure; an
unknown outcome; a seed) changes the units the pool counts as taken from
each shared grant by exactly the change of the units this session holds
of it, and keeps the session's shared entries counts. Needs the session to
hold no more than the pool counts (`Covers`), which `PoolExact` gives. -/
theorem stepIn_tracks (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (s : State) (pool : SharedCounts) (e : Event) (c : Checks)
    (hl : HoldsShared p s.ledger) (hc : Covers p s.ledger pool) :
    Tracks p s.ledger pool (stepIn p s pool e c).2.1.ledger (stepIn p s pool e c).2.2 ∧
      HoldsShared p (stepIn p s pool e c).2.1.ledger := by
  cases e with
  | call id req =>
    have key : ∀ (b : Bool),
        Tracks p s.ledger pool
            (afterAdmitIn p s pool id b (admitIn p s.ledger pool req s.sets)).2.1.ledger
            (afterAdmitIn p s pool id b (admitIn p s.ledger pool req s.sets)).2.2 ∧
          HoldsShared p
            (afterAdmitIn p s pool id b (admitIn p s.ledger pool req s.sets)).2.1.ledger := by
      intro b
      cases ha : admitIn p s.ledger pool req s.sets with
      | error a => exact ⟨tracks_refl p s.ledger pool, hl⟩
      | ok r =>
        have hled : (afterAdmitIn p s pool id b (Except.ok r)).2.1.ledger = r.2.1 :=
          stepAdmitted_ledger p s id r.1 r.2.1 b
        rw [hled]
        exact admitChainIn_tracks p hd hin req s.sets (p.agentChain req.agent) s.ledger pool r
          ha hl
    show Tracks p s.ledger pool (guardFreshIn s pool id (stepCallIn p s pool id req c)).2.1.ledger
        (guardFreshIn s pool id (stepCallIn p s pool id req c)).2.2 ∧
      HoldsShared p (guardFreshIn s pool id (stepCallIn p s pool id req c)).2.1.ledger
    rcases guardFreshIn_cases s pool id (stepCallIn p s pool id req c) with hg | hg
    · rw [hg]
      exact ⟨tracks_refl p s.ledger pool, hl⟩
    · rw [hg]
      cases c with
      | deny => exact ⟨tracks_refl p s.ledger pool, hl⟩
      | pass => exact key false
      | pause => exact key true
  | approve id =>
    show Tracks p s.ledger pool (approveWithIn p s pool id c (mapFind s.paused id)).2.1.ledger
        (approveWithIn p s pool id c (mapFind s.paused id)).2.2 ∧
      HoldsShared p (approveWithIn p s pool id c (mapFind s.paused id)).2.1.ledger
    cases mapFind s.paused id with
    | none => exact ⟨tracks_refl p s.ledger pool, hl⟩
    | some used =>
      cases c with
      | deny =>
        obtain ⟨t, hl1, _⟩ := refundIn_tracks p hd hin used s.ledger pool hl hc
        exact ⟨t, hl1⟩
      | pass => exact ⟨tracks_refl p s.ledger pool, hl⟩
      | pause => exact ⟨tracks_refl p s.ledger pool, hl⟩
  | reject id =>
    show Tracks p s.ledger pool (rejectWithIn p s pool id (mapFind s.paused id)).2.1.ledger
        (rejectWithIn p s pool id (mapFind s.paused id)).2.2 ∧
      HoldsShared p (rejectWithIn p s pool id (mapFind s.paused id)).2.1.ledger
    cases mapFind s.paused id with
    | none => exact ⟨tracks_refl p s.ledger pool, hl⟩
    | some used =>
      obtain ⟨t, hl1, _⟩ := refundIn_tracks p hd hin used s.ledger pool hl hc
      exact ⟨t, hl1⟩
  | succeeded id ds =>
    show Tracks p s.ledger pool (succeedWith p s id ds (mapFind s.running id)).2.ledger pool ∧
      HoldsShared p (succeedWith p s id ds (mapFind s.running id)).2.ledger
    cases mapFind s.running id with
    | none => exact ⟨tracks_refl p s.ledger pool, hl⟩
    | some _ => exact ⟨tracks_refl p s.ledger pool, hl⟩
  | failed id =>
    show Tracks p s.ledger pool (failWithIn p s pool id (mapFind s.running id)).2.1.ledger
        (failWithIn p s pool id (mapFind s.running id)).2.2 ∧
      HoldsShared p (failWithIn p s pool id (mapFind s.running id)).2.1.ledger
    cases mapFind s.running id with
    | none => exact ⟨tracks_refl p s.ledger pool, hl⟩
    | some used =>
      obtain ⟨t, hl1, _⟩ := refundIn_tracks p hd hin used s.ledger pool hl hc
      exact ⟨t, hl1⟩
  | unknown id =>
    show Tracks p s.ledger pool (unknownWith s id (mapFind s.running id)).2.ledger pool ∧
      HoldsShared p (unknownWith s id (mapFind s.running id)).2.ledger
    cases mapFind s.running id with
    | none => exact ⟨tracks_refl p s.ledger pool, hl⟩
    | some _ => exact ⟨tracks_refl p s.ledger pool, hl⟩
  | seed k vs =>
    show Tracks p s.ledger pool (seedWith s k vs (getAt s.sets k)).2.ledger pool ∧
      HoldsShared p (seedWith s k vs (getAt s.sets k)).2.ledger
    cases getAt s.sets k with
    | none => exact ⟨tracks_refl p s.ledger pool, hl⟩
    | some _ => exact ⟨tracks_refl p s.ledger pool, hl⟩

/-! ## The sessions together -/

/-- Replacing session `i` (`s`) by `s'` changes the sum by the difference
of the two. -/
theorem heldSum_modifyAt (p : Policy) (g : Nat) (s s' : State) :
    ∀ (ss : List State) (i : Nat), getAt ss i = some s →
      heldSum p g (modifyAt (fun _ => s') ss i) + Ledger.held p s.ledger g =
        heldSum p g ss + Ledger.held p s'.ledger g := by
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
      show Ledger.held p s'.ledger g + heldSum p g ts + Ledger.held p s.ledger g =
        Ledger.held p s.ledger g + heldSum p g ts + Ledger.held p s'.ledger g
      omega
    | succ i =>
      have h2 : getAt ts i = some s := h
      have h3 := ih i h2
      show Ledger.held p t.ledger g + heldSum p g (modifyAt (fun _ => s') ts i) +
          Ledger.held p s.ledger g =
        Ledger.held p t.ledger g + heldSum p g ts + Ledger.held p s'.ledger g
      omega

/-- One session holds at most what all of them hold. -/
theorem held_le_heldSum (p : Policy) (g : Nat) (s : State) :
    ∀ (ss : List State) (i : Nat), getAt ss i = some s →
      Ledger.held p s.ledger g ≤ heldSum p g ss := by
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
      rw [← h3]
      show Ledger.held p t.ledger g ≤ Ledger.held p t.ledger g + heldSum p g ts
      omega
    | succ i =>
      have h2 : getAt ts i = some s := h
      have h3 := ih i h2
      show Ledger.held p s.ledger g ≤ Ledger.held p t.ledger g + heldSum p g ts
      omega

theorem allHold_modifyAt (p : Policy) (ss : List State) (i : Nat) (s' : State)
    (h : AllHoldShared p ss) (h' : HoldsShared p s'.ledger) :
    AllHoldShared p (modifyAt (fun _ => s') ss i) := by
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

/-- One event of one session keeps the pool equal to the sum of what the
sessions hold. -/
theorem tenantStep_exact (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p)
    (ss : List State) (pool : SharedCounts) (ev : TenantEvent)
    (hx : PoolExact p ss pool) (ha : AllHoldShared p ss) :
    PoolExact p (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2 ∧
      AllHoldShared p (tenantStep p ss pool ev).1 := by
  cases hi : getAt ss ev.1 with
  | none =>
    have e : tenantStep p ss pool ev = (ss, pool) := by
      unfold tenantStep
      rw [hi] <;> rfl
    rw [e]
    exact ⟨hx, ha⟩
  | some s =>
    have e : tenantStep p ss pool ev =
        (modifyAt (fun _ => (stepIn p s pool ev.2.1 ev.2.2).2.1) ss ev.1,
          (stepIn p s pool ev.2.1 ev.2.2).2.2) := by
      unfold tenantStep
      rw [hi] <;> rfl
    rw [e]
    have hls : HoldsShared p s.ledger := ha ev.1 s hi
    have hcs : Covers p s.ledger pool := by
      intro g gr hs hg
      rw [hx g gr hs hg]
      exact held_le_heldSum p g s ss ev.1 hi
    obtain ⟨ht, hl'⟩ := stepIn_tracks p hd hin s pool ev.2.1 ev.2.2 hls hcs
    refine ⟨?_, allHold_modifyAt p ss ev.1 (stepIn p s pool ev.2.1 ev.2.2).2.1 ha hl'⟩
    intro g gr hs hg
    have e1 := ht g gr hs hg
    have e2 := heldSum_modifyAt p g s (stepIn p s pool ev.2.1 ev.2.2).2.1 ss ev.1 hi
    have e3 := hx g gr hs hg
    show (stepIn p s pool ev.2.1 ev.2.2).2.2.taken gr.name =
      heldSum p g (modifyAt (fun _ => (stepIn p s pool ev.2.1 ev.2.2).2.1) ss ev.1)
    omega

/-- **runTenant_exact.** If the pool counts exactly what the sessions hold
(and their shared entries are counts), it still does after any
interleaving of their events. -/
theorem runTenant_exact (p : Policy) (hd : SharedNamesDistinct p) (hin : SharedInRange p) :
    ∀ (evs : List TenantEvent) (ss : List State) (pool : SharedCounts),
      PoolExact p ss pool → AllHoldShared p ss →
      PoolExact p (runTenant p ss pool evs).1 (runTenant p ss pool evs).2 ∧
        AllHoldShared p (runTenant p ss pool evs).1 := by
  intro evs
  induction evs with
  | nil =>
    intro ss pool hx ha
    exact ⟨hx, ha⟩
  | cons ev rest ih =>
    intro ss pool hx ha
    obtain ⟨hx', ha'⟩ := tenantStep_exact p hd hin ss pool ev hx ha
    exact ih (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2 hx' ha'

theorem heldSum_zero (p : Policy) (g : Nat) (hs : p.isShared g = true) :
    ∀ (ss : List State),
      (∀ (i : Nat) (s : State), getAt ss i = some s → getAt s.ledger g = some (.limited 0)) →
      heldSum p g ss = 0 := by
  intro ss
  induction ss with
  | nil =>
    intro _
    rfl
  | cons t ts ih =>
    intro h
    have h0 : Ledger.held p t.ledger g = 0 := by
      rw [held_shared p t.ledger g hs, h 0 t (getAt_cons_zero t ts)] <;> rfl
    have h1 : heldSum p g ts = 0 := ih (fun i s hi => h (i + 1) s hi)
    show Ledger.held p t.ledger g + heldSum p g ts = 0
    omega

/-- **pool_taken_eq_sum_held.** Whatever the sessions of a tenant do, in
any interleaving (calls admitted, paused, denied or duplicated; approvals
allowed or denied by their re-check; rejections; successes; failures with
refunds; unknown outcomes; seeds), starting from an empty pool and sessions
that hold nothing (as every new session does), the units the pool counts as
taken from a shared grant (`quota q per tenant`) are exactly the units the
sessions hold of it, added up: nothing leaks out of the pool and nothing is
counted twice. For a user: after a failure or a rejection the unit is back
in the pool for every session, and a unit in the pool is held by exactly
one session. Needs the policy checks of `validate.rs`: shared grants are
grants of the policy with distinct names. -/
theorem pool_taken_eq_sum_held (p : Policy) (hd : SharedNamesDistinct p)
    (hin : SharedInRange p) (ss : List State) (evs : List TenantEvent)
    (h0 : HoldNothing p ss) :
    PoolExact p (runTenant p ss SharedCounts.empty evs).1
      (runTenant p ss SharedCounts.empty evs).2 := by
  have hx : PoolExact p ss SharedCounts.empty := by
    intro g gr hs _
    have hz := heldSum_zero p g hs ss (fun i s hi => h0 i s hi g hs)
    show 0 = heldSum p g ss
    rw [hz]
  have ha : AllHoldShared p ss := by
    intro i s hi g hs
    exact ⟨0, h0 i s hi g hs⟩
  exact (runTenant_exact p hd hin evs ss SharedCounts.empty hx ha).1

/-- Sessions that start at `State.initial p` hold nothing: `Ledger.initial`
starts every shared grant at `limited 0`, as Rust's `Ledger::initial` does. -/
theorem initial_holdNothing (p : Policy) (hin : SharedInRange p) (ss : List State)
    (hs : ∀ (i : Nat) (s : State), getAt ss i = some s → s = State.initial p) :
    HoldNothing p ss := by
  intro i s hi g hg
  rw [hs i s hi]
  obtain ⟨gr, hgr⟩ := hin g hg
  have h3 := getAt_initial p g gr hgr
  rw [if_pos hg] at h3
  exact h3

/-- **pool_taken_eq_sum_held_initial.** `pool_taken_eq_sum_held` for sessions
that all start at `State.initial p` (every session of a tenant, as the
gateway opens it), from the empty pool: after any interleaving of their
events through `stepIn`, every shared grant's units taken in the pool are
exactly the units the sessions hold of it, added up. -/
theorem pool_taken_eq_sum_held_initial (p : Policy) (hd : SharedNamesDistinct p)
    (hin : SharedInRange p) (ss : List State) (evs : List TenantEvent)
    (hs : ∀ (i : Nat) (s : State), getAt ss i = some s → s = State.initial p) :
    PoolExact p (runTenant p ss SharedCounts.empty evs).1
      (runTenant p ss SharedCounts.empty evs).2 :=
  pool_taken_eq_sum_held p hd hin ss evs (initial_holdNothing p hin ss hs)

end Agenra
