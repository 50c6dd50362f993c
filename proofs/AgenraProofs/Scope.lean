/-
Quota scope is a conservative extension: on a policy without shared grants,
`stepIn` (Rust's `step_in`) with any pool is `step` with the pool unchanged.

Style as in `AgenraProofs.Ledger`: `show`, `rw`, structural induction,
`cases`, `by_cases`; no `simp`.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger
import AgenraProofs.Ledger

namespace Agenra

theorem isShared_none (p : Policy) (h : p.shared = []) (g : Nat) : p.isShared g = false := by
  unfold Policy.isShared
  rw [h] <;> rfl

theorem hasQuotaIn_none (p : Policy) (h : p.shared = []) (l : Ledger) (pool : SharedCounts)
    (g : Nat) : hasQuotaIn p l pool g = hasQuota l g := by
  unfold hasQuotaIn
  rw [isShared_none p h g] <;> rfl

theorem selectFromIn_none (p : Policy) (h : p.shared = []) (l : Ledger) (pool : SharedCounts)
    (agent : Nat) (req : Request) (sets : List (List String)) :
    ∀ (gs : List Grant) (i : Nat),
      selectFromIn p l pool agent req sets i gs = selectFrom p l agent req sets i gs := by
  intro gs
  induction gs with
  | nil =>
    intro i
    rfl
  | cons gr rest ih =>
    intro i
    show (if (grantMatches p gr agent req sets && hasQuotaIn p l pool i) then some i
        else selectFromIn p l pool agent req sets (i + 1) rest) =
      (if (grantMatches p gr agent req sets && hasQuota l i) then some i
        else selectFrom p l agent req sets (i + 1) rest)
    rw [hasQuotaIn_none p h l pool i, ih (i + 1)]

theorem takeUnit_none (p : Policy) (h : p.shared = []) (l : Ledger) (pool : SharedCounts)
    (g : Nat) : takeUnit p l pool g = (consumeAt l g, pool) := by
  show (consumeShared p l g, if p.isShared g then pool.take (grantName p g) else pool) =
    (consumeAt l g, pool)
  unfold consumeShared
  rw [isShared_none p h g] <;> rfl

theorem giveBack_none (p : Policy) (h : p.shared = []) (l : Ledger) (pool : SharedCounts)
    (g : Nat) : giveBack p l pool g = (refundOne p l g, pool) := by
  unfold giveBack refundShared
  rw [isShared_none p h g] <;> rfl

theorem refundIn_none (p : Policy) (h : p.shared = []) :
    ∀ (used : List Nat) (l : Ledger) (pool : SharedCounts),
      refundIn p l pool used = (refund p l used, pool) := by
  intro used
  induction used with
  | nil =>
    intro l pool
    rfl
  | cons g gs ih =>
    intro l pool
    show refundIn p (giveBack p l pool g).1 (giveBack p l pool g).2 gs =
      (refund p (refundOne p l g) gs, pool)
    rw [giveBack_none p h l pool g]
    exact ih (refundOne p l g) pool

/-- An admission result with the pool attached. -/
def withPoolE (pool : SharedCounts) :
    Except Nat (List Nat × Ledger) → Except Nat (List Nat × Ledger × SharedCounts)
  | .error a => .error a
  | .ok r => .ok (r.1, r.2, pool)

theorem admitChainIn_none (p : Policy) (h : p.shared = []) (req : Request)
    (sets : List (List String)) :
    ∀ (chain : List Nat) (l : Ledger) (pool : SharedCounts),
      admitChainIn p req sets l pool chain = withPoolE pool (admitChain p req sets l chain) := by
  intro chain
  induction chain with
  | nil =>
    intro l pool
    rfl
  | cons agent rest ih =>
    intro l pool
    show optElim (selectIn p l pool agent req sets) (Except.error agent)
        (fun g => consUsedIn g
          (admitChainIn p req sets (takeUnit p l pool g).1 (takeUnit p l pool g).2 rest)) =
      withPoolE pool (optElim (select p l agent req sets) (Except.error agent)
        (fun g => consUsed g (admitChain p req sets (consume l g).2 rest)))
    have hs : selectIn p l pool agent req sets = select p l agent req sets :=
      selectFromIn_none p h l pool agent req sets p.grants 0
    rw [hs]
    cases select p l agent req sets with
    | none => rfl
    | some g =>
      show consUsedIn g
          (admitChainIn p req sets (takeUnit p l pool g).1 (takeUnit p l pool g).2 rest) =
        withPoolE pool (consUsed g (admitChain p req sets (consumeAt l g) rest))
      rw [takeUnit_none p h l pool g]
      show consUsedIn g (admitChainIn p req sets (consumeAt l g) pool rest) =
        withPoolE pool (consUsed g (admitChain p req sets (consumeAt l g) rest))
      rw [ih (consumeAt l g) pool]
      cases admitChain p req sets (consumeAt l g) rest with
      | error a => rfl
      | ok r => rfl

/-- **stepIn_unshared.** On a policy without shared grants (`p.shared = []`),
one `stepIn` (Rust's `step_in`) against any pool is one `step` with the
pool unchanged. For a user: declaring no `quota N per tenant` grant leaves
the semantics exactly as before quota scope, and Lean's `step` is the
private-pool `step` of Rust for such policies. -/
theorem stepIn_unshared (p : Policy) (h : p.shared = []) (s : State) (pool : SharedCounts)
    (e : Event) (c : Checks) : stepIn p s pool e c = withPool (step p s e c) pool := by
  cases e with
  | call id req =>
    have hadm : admitIn p s.ledger pool req s.sets =
        withPoolE pool (admitCall p s.ledger req s.sets) :=
      admitChainIn_none p h req s.sets (p.agentChain req.agent) s.ledger pool
    have hrest : stepCallIn p s pool id req c = withPool (stepCall p s id req c) pool := by
      cases c with
      | deny => rfl
      | pass =>
        show afterAdmitIn p s pool id false (admitIn p s.ledger pool req s.sets) =
          withPool (afterAdmit p s id false (admitCall p s.ledger req s.sets)) pool
        rw [hadm]
        cases admitCall p s.ledger req s.sets with
        | error a => rfl
        | ok r => rfl
      | pause =>
        show afterAdmitIn p s pool id true (admitIn p s.ledger pool req s.sets) =
          withPool (afterAdmit p s id true (admitCall p s.ledger req s.sets)) pool
        rw [hadm]
        cases admitCall p s.ledger req s.sets with
        | error a => rfl
        | ok r => rfl
    -- The freshness guard is the same test on both sides.
    show guardFreshIn s pool id (stepCallIn p s pool id req c) =
      withPool (guardFresh s id (stepCall p s id req c)) pool
    unfold guardFreshIn guardFresh
    cases isHeld s id with
    | true => rfl
    | false => exact hrest
  | approve id =>
    show approveWithIn p s pool id c (mapFind s.paused id) =
      withPool (approveWith p s id c (mapFind s.paused id)) pool
    cases mapFind s.paused id with
    | none => rfl
    | some used =>
      cases c with
      | deny =>
        show (Outcome.deny, { s with paused := mapErase s.paused id,
                                      ledger := (refundIn p s.ledger pool used).1 },
            (refundIn p s.ledger pool used).2) =
          withPool (approveWith p s id Checks.deny (some used)) pool
        rw [refundIn_none p h used s.ledger pool] <;> rfl
      | pass => rfl
      | pause => rfl
  | reject id =>
    show rejectWithIn p s pool id (mapFind s.paused id) =
      withPool (rejectWith p s id (mapFind s.paused id)) pool
    cases mapFind s.paused id with
    | none => rfl
    | some used =>
      show (Outcome.applied, { s with paused := mapErase s.paused id,
                                      ledger := (refundIn p s.ledger pool used).1 },
          (refundIn p s.ledger pool used).2) =
        withPool (rejectWith p s id (some used)) pool
      rw [refundIn_none p h used s.ledger pool] <;> rfl
  | succeeded id ds => rfl
  | failed id =>
    show failWithIn p s pool id (mapFind s.running id) =
      withPool (failWith p s id (mapFind s.running id)) pool
    cases mapFind s.running id with
    | none => rfl
    | some used =>
      show (Outcome.applied, { s with running := mapErase s.running id,
                                      ledger := (refundIn p s.ledger pool used).1 },
          (refundIn p s.ledger pool used).2) =
        withPool (failWith p s id (some used)) pool
      rw [refundIn_none p h used s.ledger pool] <;> rfl
  | unknown id => rfl
  | seed k vs => rfl

end Agenra
