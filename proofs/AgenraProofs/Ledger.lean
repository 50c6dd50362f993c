/-
Theorems about the ledger semantics of `Agenra.Ledger`.

Style: every recursive definition gets its defining equations as `rfl`
lemmas below, and the proofs use only those (through `rw`), structural
induction, `cases`, `by_cases`, `obtain`, `subst`, `revert` and `omega`;
results of `step` are taken apart with `congrArg Prod.fst`/`congrArg
Prod.snd`, or `cases` on the pair equation, after the sides are written out
and checked by definitional unfolding (no `split`, no `simp`).
The only library lemmas used are `Nat.le_refl`, `if_pos`, `if_neg` and
`Bool.and_eq_true`, plus the terms `congrArg`, `Eq.trans`, `Eq.symm` and
`absurd` (see `docs/lean.md`).

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger

namespace Agenra

/-! ## Defining equations, by `rfl` -/

-- The `[]` equations case on the index too, so that they hold by `rfl` whichever
-- argument (list or index) Lean picks for the structural recursion.
theorem getAt_nil {α : Type} (i : Nat) : getAt ([] : List α) i = none := by
  cases i <;> rfl

theorem getAt_cons_zero {α : Type} (a : α) (as : List α) : getAt (a :: as) 0 = some a := rfl

theorem getAt_cons_succ {α : Type} (a : α) (as : List α) (i : Nat) :
    getAt (a :: as) (i + 1) = getAt as i := rfl

theorem modifyAt_nil {α : Type} (f : α → α) (i : Nat) : modifyAt f [] i = [] := by
  cases i <;> rfl

theorem modifyAt_cons_zero {α : Type} (f : α → α) (a : α) (as : List α) :
    modifyAt f (a :: as) 0 = f a :: as := rfl

theorem modifyAt_cons_succ {α : Type} (f : α → α) (a : α) (as : List α) (i : Nat) :
    modifyAt f (a :: as) (i + 1) = a :: modifyAt f as i := rfl

theorem consumeAt_nil (i : Nat) : consumeAt [] i = [] := by
  cases i <;> rfl

theorem consumeAt_cons_zero (q : Quota) (qs : List Quota) :
    consumeAt (q :: qs) 0 = q.dec :: qs := rfl

theorem consumeAt_cons_succ (q : Quota) (qs : List Quota) (i : Nat) :
    consumeAt (q :: qs) (i + 1) = q :: consumeAt qs i := rfl

theorem refund_nil (p : Policy) (l : List Quota) : refund p l [] = l := rfl

theorem refund_cons (p : Policy) (l : List Quota) (g : Nat) (gs : List Nat) :
    refund p l (g :: gs) = refund p (refundOne p l g) gs := rfl

theorem selectFrom_nil (p : Policy) (l : Ledger) (agent : Nat) (req : Request)
    (sets : List (List String)) (i : Nat) :
    selectFrom p l agent req sets i [] = none := rfl

theorem selectFrom_cons (p : Policy) (l : Ledger) (agent : Nat) (req : Request)
    (sets : List (List String)) (i : Nat) (gr : Grant) (rest : List Grant) :
    selectFrom p l agent req sets i (gr :: rest) =
      if (grantMatches p gr agent req sets && hasQuota l i) then some i
      else selectFrom p l agent req sets (i + 1) rest := rfl

theorem mapFind_cons (k : String) (v : List Nat) (rest : List (String × List Nat))
    (key : String) :
    mapFind ((k, v) :: rest) key = if k == key then some v else mapFind rest key := rfl

theorem mapErase_cons (k : String) (v : List Nat) (rest : List (String × List Nat))
    (key : String) :
    mapErase ((k, v) :: rest) key =
      if k == key then mapErase rest key else (k, v) :: mapErase rest key := rfl

/-! ## Indexes in and out of range -/

/-- `getAt` (`slice::get`) is `none` on every index at or past the end. -/
theorem getAt_none_of_length_le {α : Type} : ∀ (l : List α) (i : Nat),
    l.length ≤ i → getAt l i = none := by
  intro l
  induction l with
  | nil =>
    intro i _
    exact getAt_nil i
  | cons a as ih =>
    intro i h
    cases i with
    | zero =>
      -- `(a :: as).length` unfolds to `as.length + 1` (`List.length`, Prelude).
      have h2 : as.length + 1 ≤ 0 := h
      exact absurd h2 (by omega)
    | succ i =>
      have h2 : as.length + 1 ≤ i + 1 := h
      rw [getAt_cons_succ]
      exact ih i (by omega)

/-- `getAt` (`slice::get`) finds an element at every index before the end. -/
theorem getAt_some_of_lt {α : Type} : ∀ (l : List α) (i : Nat),
    i < l.length → ∃ a, getAt l i = some a := by
  intro l
  induction l with
  | nil =>
    intro i h
    have h2 : i < 0 := h
    exact absurd h2 (by omega)
  | cons a as ih =>
    intro i h
    cases i with
    | zero => exact ⟨a, getAt_cons_zero a as⟩
    | succ i =>
      have h2 : i + 1 < as.length + 1 := h
      rw [getAt_cons_succ]
      exact ih i (by omega)

/-! ## Consuming -/

/-- Consuming a `limited n` entry leaves `limited m` with `m ≤ n`. -/
theorem Quota.dec_limited (n : Nat) :
    ∃ m, some (Quota.limited n).dec = some (Quota.limited m) ∧ m ≤ n := by
  cases n with
  | zero => exact ⟨0, rfl, Nat.le_refl 0⟩
  | succ k => exact ⟨k, rfl, by omega⟩

/-- `consumeAt` never increases any limited entry (the consumed one or any other). -/
theorem consumeAt_le : ∀ (l : List Quota) (g j n : Nat),
    getAt l j = some (.limited n) →
    ∃ m, getAt (consumeAt l g) j = some (.limited m) ∧ m ≤ n := by
  intro l
  induction l with
  | nil =>
    intro g j n h
    rw [getAt_nil] at h
    cases h
  | cons q qs ih =>
    intro g j n h
    cases g with
    | zero =>
      cases j with
      | zero =>
        rw [getAt_cons_zero] at h
        cases h
        rw [consumeAt_cons_zero, getAt_cons_zero]
        exact Quota.dec_limited n
      | succ j =>
        rw [getAt_cons_succ] at h
        rw [consumeAt_cons_zero, getAt_cons_succ]
        exact ⟨n, h, Nat.le_refl n⟩
    | succ g =>
      cases j with
      | zero =>
        rw [getAt_cons_zero] at h
        rw [consumeAt_cons_succ, getAt_cons_zero]
        exact ⟨n, h, Nat.le_refl n⟩
      | succ j =>
        rw [getAt_cons_succ] at h
        rw [consumeAt_cons_succ, getAt_cons_succ]
        exact ih g j n h

/-- **consume_le.** `Ledger::consume(g)` never increases any grant's remaining
count: an entry `j` that is `limited n` before is `limited m`, `m ≤ n`, after. -/
theorem consume_le (l : Ledger) (g j n : Nat) (h : getAt l j = some (.limited n)) :
    ∃ m, getAt (consume l g).2 j = some (.limited m) ∧ m ≤ n :=
  consumeAt_le l g j n h

/-- `consumeAt` leaves an exhausted entry's ledger unchanged. -/
theorem consumeAt_exhausted : ∀ (l : List Quota) (g : Nat),
    getAt l g = some (.limited 0) → consumeAt l g = l := by
  intro l
  induction l with
  | nil =>
    intro g _
    exact consumeAt_nil g
  | cons q qs ih =>
    intro g h
    cases g with
    | zero =>
      rw [getAt_cons_zero] at h
      cases h
      rfl
    | succ g =>
      rw [getAt_cons_succ] at h
      rw [consumeAt_cons_succ, ih g h]

/-- **consume_exhausted.** A `limited 0` entry is never consumed: `consume`
reports `false` and returns the ledger unchanged. -/
theorem consume_exhausted (l : Ledger) (g : Nat) (h : getAt l g = some (.limited 0)) :
    consume l g = (false, l) := by
  have h1 : hasQuota l g = false := (congrArg quotaAvailable h).trans rfl
  have h2 : consumeAt l g = l := consumeAt_exhausted l g h
  show (hasQuota l g, consumeAt l g) = (false, l)
  rw [h1, h2]

/-! ## Refunding -/

/-- Refunding a `limited n` entry, `n ≤ c`, under the cap `limited c` stays `≤ c`. -/
theorem refundCapped_le (n c : Nat) (hn : n ≤ c) :
    ∃ m, some (Quota.refundCapped (some (.limited c)) (.limited n)) = some (Quota.limited m)
      ∧ m ≤ c := by
  by_cases hlt : n < c
  · refine ⟨n + 1, ?_, by omega⟩
    show some (if n < c then Quota.limited (n + 1) else Quota.limited n) =
      some (Quota.limited (n + 1))
    rw [if_pos hlt]
  · refine ⟨n, ?_, hn⟩
    show some (if n < c then Quota.limited (n + 1) else Quota.limited n) =
      some (Quota.limited n)
    rw [if_neg hlt]

/-- Refunding entry `g` under the cap `cap` keeps every limited entry `j` whose
cap is `limited c` (when `j = g`) at most `c`. -/
theorem modifyAt_refund_le (cap : Option Quota) : ∀ (l : List Quota) (g j n c : Nat),
    (g = j → cap = some (.limited c)) → getAt l j = some (.limited n) → n ≤ c →
    ∃ m, getAt (modifyAt (Quota.refundCapped cap) l g) j = some (.limited m) ∧ m ≤ c := by
  intro l
  induction l with
  | nil =>
    intro g j n c _ h _
    rw [getAt_nil] at h
    cases h
  | cons q qs ih =>
    intro g j n c hcap h hn
    cases g with
    | zero =>
      cases j with
      | zero =>
        rw [getAt_cons_zero] at h
        cases h
        have hc : cap = some (.limited c) := hcap rfl
        rw [modifyAt_cons_zero, getAt_cons_zero, hc]
        exact refundCapped_le n c hn
      | succ j =>
        rw [getAt_cons_succ] at h
        rw [modifyAt_cons_zero, getAt_cons_succ]
        exact ⟨n, h, hn⟩
    | succ g =>
      cases j with
      | zero =>
        rw [getAt_cons_zero] at h
        rw [modifyAt_cons_succ, getAt_cons_zero]
        exact ⟨n, h, hn⟩
      | succ j =>
        rw [getAt_cons_succ] at h
        rw [modifyAt_cons_succ, getAt_cons_succ]
        exact ih g j n c (fun hgj => hcap (by omega)) h hn

/-- `Ledger::refund(g)` never takes a limited entry above the policy's quota
for that grant, given it was at most that quota before. -/
theorem refundOne_le_quota (p : Policy) (l : Ledger) (g j n c : Nat)
    (hcap : capOf p j = some (.limited c)) (h : getAt l j = some (.limited n)) (hn : n ≤ c) :
    ∃ m, getAt (refundOne p l g) j = some (.limited m) ∧ m ≤ c :=
  modifyAt_refund_le (capOf p g) l g j n c
    (fun hgj => by
      rw [hgj]
      exact hcap)
    h hn

/-- **refund_le_quota.** `refund` (spec.rs) over any list of grants never takes
a limited entry above the policy's quota for that grant (`capOf p j`), given
it was at most that quota before. -/
theorem refund_le_quota (p : Policy) : ∀ (used : List Nat) (l : Ledger) (j n c : Nat),
    capOf p j = some (.limited c) → getAt l j = some (.limited n) → n ≤ c →
    ∃ m, getAt (refund p l used) j = some (.limited m) ∧ m ≤ c := by
  intro used
  induction used with
  | nil =>
    intro l j n c _ h hn
    rw [refund_nil]
    exact ⟨n, h, hn⟩
  | cons g gs ih =>
    intro l j n c hcap h hn
    obtain ⟨m, hm, hmc⟩ := refundOne_le_quota p l g j n c hcap h hn
    rw [refund_cons]
    exact ih (refundOne p l g) j m c hcap hm hmc

/-! ## Selection -/

/-- The search of `select` only returns grants that still have quota. -/
theorem selectFrom_hasQuota (p : Policy) (l : Ledger) (agent : Nat) (req : Request)
    (sets : List (List String)) : ∀ (gs : List Grant) (i g : Nat),
    selectFrom p l agent req sets i gs = some g → hasQuota l g = true := by
  intro gs
  induction gs with
  | nil =>
    intro i g h
    rw [selectFrom_nil] at h
    cases h
  | cons gr rest ih =>
    intro i g h
    rw [selectFrom_cons] at h
    by_cases hc : (grantMatches p gr agent req sets && hasQuota l i) = true
    · rw [if_pos hc] at h
      cases h
      rw [Bool.and_eq_true] at hc
      exact hc.2
    · rw [if_neg hc] at h
      exact ih (i + 1) g h

/-- `select` only returns grants that still have quota, so the `consume` in
admission always takes a unit. -/
theorem select_hasQuota (p : Policy) (l : Ledger) (agent : Nat) (req : Request)
    (sets : List (List String)) (g : Nat) (h : select p l agent req sets = some g) :
    hasQuota l g = true :=
  selectFrom_hasQuota p l agent req sets p.grants 0 g h

/-! ## Conditions -/

/-- The binary form of Rust's `Cond::And(cs)` evaluates like `cs.iter().all(..)`. -/
theorem ArgCond.eval_allOf (args : List Value) (agent : Nat) (sets : List (List String)) :
    ∀ (cs : List ArgCond),
      (ArgCond.allOf cs).eval args agent sets = cs.all (fun c => c.eval args agent sets) := by
  intro cs
  induction cs with
  | nil => rfl
  | cons c cs ih =>
    show (c.eval args agent sets && (ArgCond.allOf cs).eval args agent sets) =
      (c.eval args agent sets && cs.all (fun d => d.eval args agent sets))
    rw [ih]

/-- The binary form of Rust's `Cond::Or(cs)` evaluates like `cs.iter().any(..)`. -/
theorem ArgCond.eval_anyOf (args : List Value) (agent : Nat) (sets : List (List String)) :
    ∀ (cs : List ArgCond),
      (ArgCond.anyOf cs).eval args agent sets = cs.any (fun c => c.eval args agent sets) := by
  intro cs
  induction cs with
  | nil => rfl
  | cons c cs ih =>
    show (c.eval args agent sets || (ArgCond.anyOf cs).eval args agent sets) =
      (c.eval args agent sets || cs.any (fun d => d.eval args agent sets))
    rw [ih]

/-! ## Maps -/

/-- After erasing `key`, the map has no entry for it. -/
theorem mapFind_mapErase_self : ∀ (m : List (String × List Nat)) (key : String),
    mapFind (mapErase m key) key = none := by
  intro m key
  induction m with
  | nil => rfl
  | cons kv rest ih =>
    obtain ⟨k, v⟩ := kv
    by_cases hk : (k == key) = true
    · rw [mapErase_cons, if_pos hk]
      exact ih
    · rw [mapErase_cons, if_neg hk, mapFind_cons, if_neg hk]
      exact ih

/-! ## The life of a call -/

/-- The freshness guard either rejects the call (`invalid`, state unchanged)
or leaves the step proper as it is. -/
theorem guardFresh_cases (s : State) (id : String) (r : Outcome × State) :
    guardFresh s id r = (Outcome.invalid, s) ∨ guardFresh s id r = r := by
  unfold guardFresh
  cases isHeld s id with
  | true => exact Or.inl rfl
  | false => exact Or.inr rfl

/-- On a fresh id the guard is the identity. -/
theorem guardFresh_fresh (s : State) (id : String) (r : Outcome × State)
    (hf : isHeld s id = false) : guardFresh s id r = r := by
  unfold guardFresh
  revert hf
  cases isHeld s id with
  | true => intro hf; cases hf
  | false => intro _; rfl

/-- `guardFresh_cases` for `step_in`: `invalid` with state and pool
unchanged, or the step proper. -/
theorem guardFreshIn_cases (s : State) (pool : SharedCounts) (id : String)
    (r : Outcome × State × SharedCounts) :
    guardFreshIn s pool id r = (Outcome.invalid, s, pool) ∨ guardFreshIn s pool id r = r := by
  unfold guardFreshIn
  cases isHeld s id with
  | true => exact Or.inl rfl
  | false => exact Or.inr rfl

/-- A call with a held id (paused or running) is `invalid` and changes
nothing: a duplicate call id can neither take units nor overwrite the
units another call holds. -/
theorem call_held_invalid (p : Policy) (s : State) (id : String) (req : Request)
    (checks : Checks) (hh : isHeld s id = true) :
    step p s (.call id req) checks = (.invalid, s) := by
  show guardFresh s id (stepCall p s id req checks) = (.invalid, s)
  unfold guardFresh
  revert hh
  cases isHeld s id with
  | true => intro _; rfl
  | false => intro hh; cases hh

/-- A fresh call that the checks deny is denied before admission: the
state is unchanged (no admission runs). -/
theorem call_checks_deny (p : Policy) (s : State) (id : String) (req : Request)
    (hf : isHeld s id = false) :
    step p s (.call id req) .deny = (.deny, s) := by
  show guardFresh s id (stepCall p s id req .deny) = (.deny, s)
  rw [guardFresh_fresh s id _ hf] <;> rfl

/-- A fresh call whose admission fails is denied with the state unchanged,
whatever the checks said. -/
theorem admission_failure_denies (p : Policy) (s : State) (id : String) (req : Request)
    (checks : Checks) (a : Nat) (hf : isHeld s id = false)
    (ha : admitCall p s.ledger req s.sets = .error a) :
    step p s (.call id req) checks = (.deny, s) := by
  show guardFresh s id (stepCall p s id req checks) = (.deny, s)
  rw [guardFresh_fresh s id _ hf]
  cases checks with
  | deny => rfl
  | pass =>
    show afterAdmit p s id false (admitCall p s.ledger req s.sets) = (.deny, s)
    rw [ha] <;> rfl
  | pause =>
    show afterAdmit p s id true (admitCall p s.ledger req s.sets) = (.deny, s)
    rw [ha] <;> rfl

/-- An admitted call is never denied: it pauses or runs. -/
theorem stepAdmitted_ne_deny (p : Policy) (s : State) (id : String) (used : List Nat)
    (ledger : Ledger) (needsPause : Bool) :
    (stepAdmitted p s id used ledger needsPause).1 ≠ Outcome.deny := by
  intro h
  unfold stepAdmitted at h
  -- Move `h` back into the goal and case on the `Bool` condition itself:
  -- `cases` replaces it by `true`/`false` in the goal, and the `if` on
  -- `true = true`/`false = true` then reduces by computation (`Bool.decEq`
  -- in `src/Init/Prelude.lean`), which the `have`s check by unfolding.
  revert h
  cases (used.any (grantApproval p) || needsPause) with
  | true =>
    intro h
    have h2 : Outcome.pause used = Outcome.deny := h
    cases h2
  | false =>
    intro h
    have h2 : Outcome.allow used = Outcome.deny := h
    cases h2

/-- `afterAdmit` denies only a failed admission, and then keeps the state. -/
theorem afterAdmit_deny (p : Policy) (s s' : State) (id : String) (needsPause : Bool)
    (r : Except Nat (List Nat × Ledger)) (h : afterAdmit p s id needsPause r = (.deny, s')) :
    s' = s := by
  cases r with
  | error a =>
    have h2 : ((Outcome.deny, s) : Outcome × State) = (Outcome.deny, s') := h
    exact (congrArg Prod.snd h2).symm
  | ok r =>
    have h2 : (stepAdmitted p s id r.1 r.2 needsPause).1 = Outcome.deny := congrArg Prod.fst h
    exact absurd h2 (stepAdmitted_ne_deny p s id r.1 r.2 needsPause)

/-- A denied call leaves the whole state unchanged, whether the checks denied
it (`checks = .deny`) or admission failed. (A call with a held id is
`invalid`, never `deny`.) -/
theorem deny_unchanged (p : Policy) (s s' : State) (id : String) (req : Request)
    (checks : Checks) (h : step p s (.call id req) checks = (.deny, s')) :
    s' = s := by
  have h0 : guardFresh s id (stepCall p s id req checks) = (.deny, s') := h
  rcases guardFresh_cases s id (stepCall p s id req checks) with hg | hg
  · rw [hg] at h0
    have h2 : Outcome.invalid = Outcome.deny := congrArg Prod.fst h0
    cases h2
  · rw [hg] at h0
    have h1 : stepCall p s id req checks = (.deny, s') := h0
    cases checks with
    | deny =>
      have h2 : ((Outcome.deny, s) : Outcome × State) = (Outcome.deny, s') := h1
      exact (congrArg Prod.snd h2).symm
    | pass => exact afterAdmit_deny p s s' id false (admitCall p s.ledger req s.sets) h1
    | pause => exact afterAdmit_deny p s s' id true (admitCall p s.ledger req s.sets) h1

/-- **deny_consumes_nothing.** A denied call consumes nothing, whether the
checks denied it or admission failed. -/
theorem deny_consumes_nothing (p : Policy) (s s' : State) (id : String) (req : Request)
    (checks : Checks) (h : step p s (.call id req) checks = (.deny, s')) :
    s'.ledger = s.ledger := by
  rw [deny_unchanged p s s' id req checks h]

/-- **approve_deny_refunds.** Approval is a just-in-time re-authorization:
when the re-check denies the approval of a paused call, the answer is
`deny`, the reserved units are refunded and the call is no longer paused. -/
theorem approve_deny_refunds (p : Policy) (s s' : State) (id : String) (used : List Nat)
    (o : Outcome) (hp : mapFind s.paused id = some used)
    (h : step p s (.approve id) .deny = (o, s')) :
    o = .deny ∧ s'.ledger = refund p s.ledger used ∧ mapFind s'.paused id = none := by
  have h1 : approveWith p s id .deny (mapFind s.paused id) = (o, s') := h
  rw [hp] at h1
  have h2 : approveWith p s id .deny (some used) =
      (Outcome.deny,
        ({ s with paused := mapErase s.paused id, ledger := refund p s.ledger used } : State)) :=
    rfl
  have h3 := h2.symm.trans h1
  have ho : Outcome.deny = o := congrArg Prod.fst h3
  have hs : ({ s with paused := mapErase s.paused id, ledger := refund p s.ledger used } : State)
      = s' := congrArg Prod.snd h3
  subst ho
  subst hs
  exact ⟨rfl, rfl, mapFind_mapErase_self s.paused id⟩

/-- **approve_deny_within_quota.** After a denied approval, a grant whose
remaining count was within its quota (`capOf p j = some (.limited c)`) still
is: the refund never passes the quota. -/
theorem approve_deny_within_quota (p : Policy) (s s' : State) (id : String)
    (used : List Nat) (o : Outcome) (hp : mapFind s.paused id = some used)
    (h : step p s (.approve id) .deny = (o, s')) (j n c : Nat)
    (hcap : capOf p j = some (.limited c)) (hj : getAt s.ledger j = some (.limited n))
    (hn : n ≤ c) :
    ∃ m, getAt s'.ledger j = some (.limited m) ∧ m ≤ c := by
  obtain ⟨_, hl, _⟩ := approve_deny_refunds p s s' id used o hp h
  rw [hl]
  exact refund_le_quota p used s.ledger j n c hcap hj hn

/-! ## Seeding a discovered set -/

/-- `seedWith` changes only `sets`: whatever set lookup it is given, the
ledger and the paused and running calls come out unchanged. -/
theorem seedWith_keeps (s s' : State) (k : Nat) (vs : List String) (o : Outcome) :
    ∀ (r : Option (List String)), seedWith s k vs r = (o, s') →
      s'.ledger = s.ledger ∧ s'.paused = s.paused ∧ s'.running = s.running := by
  intro r h
  cases r with
  | none =>
    have h2 : ((Outcome.invalid, s) : Outcome × State) = (o, s') := h
    cases h2
    exact ⟨rfl, rfl, rfl⟩
  | some _ =>
    have h2 : ((Outcome.applied,
        { s with sets := modifyAt (fun acc => addAll acc vs) s.sets k }) : Outcome × State) =
        (o, s') := h
    cases h2
    exact ⟨rfl, rfl, rfl⟩

/-- **seed_keeps_ledger.** Seeding a discovered set never touches authority:
the ledger after a `seed` event is the ledger before it, whatever the
outcome (`applied` or `invalid`) and whatever `checks` says. -/
theorem seed_keeps_ledger (p : Policy) (s s' : State) (k : Nat) (vs : List String)
    (c : Checks) (o : Outcome) :
    step p s (.seed k vs) c = (o, s') → s'.ledger = s.ledger :=
  fun h => (seedWith_keeps s s' k vs o (getAt s.sets k) h).1

/-- Seeding leaves the paused and the running calls as they are. -/
theorem seed_keeps_calls (p : Policy) (s s' : State) (k : Nat) (vs : List String)
    (c : Checks) (o : Outcome) :
    step p s (.seed k vs) c = (o, s') → s'.paused = s.paused ∧ s'.running = s.running :=
  fun h => (seedWith_keeps s s' k vs o (getAt s.sets k) h).2

/-- A seed event for a set index at or past the end of `s.sets` is `invalid`
and changes nothing (Rust: `get_mut` gives `None`). -/
theorem seed_out_of_range (p : Policy) (s : State) (k : Nat) (vs : List String) (c : Checks)
    (hk : s.sets.length ≤ k) :
    step p s (.seed k vs) c = (Outcome.invalid, s) := by
  have hn : getAt s.sets k = none := getAt_none_of_length_le s.sets k hk
  show seedWith s k vs (getAt s.sets k) = _
  rw [hn] <;> rfl

/-- A seed event for a set index in range is `applied`, and the values are
added to that set (and only there: `modifyAt`). -/
theorem seed_in_range (p : Policy) (s : State) (k : Nat) (vs : List String) (c : Checks)
    (hk : k < s.sets.length) :
    step p s (.seed k vs) c =
      (Outcome.applied, { s with sets := modifyAt (fun acc => addAll acc vs) s.sets k }) := by
  obtain ⟨m, hm⟩ := getAt_some_of_lt s.sets k hk
  show seedWith s k vs (getAt s.sets k) = _
  rw [hm] <;> rfl

/-! ## Executable sanity checks (evaluated by the elaborator) -/

example : consume [Quota.limited 1, Quota.unlimited] 0 = (true, [Quota.limited 0, Quota.unlimited]) :=
  rfl

example : consume [Quota.limited 0, Quota.unlimited] 0 = (false, [Quota.limited 0, Quota.unlimited]) :=
  rfl

example : consume [Quota.limited 0, Quota.unlimited] 1 = (true, [Quota.limited 0, Quota.unlimited]) :=
  rfl

-- Decimals compare numerically: 98.70 = 98.7 (two representations of one number).
example : Decimal.eqv ⟨9870, 2⟩ ⟨987, 1⟩ = true := by decide
-- 98.7 < 98.71
example : ordLt (Decimal.cmp ⟨987, 1⟩ ⟨9871, 2⟩) = true := by decide
-- -1.5 < -1.25
example : ordLt (Decimal.cmp ⟨-15, 1⟩ ⟨-125, 2⟩) = true := by decide
-- 100 > 99.999999999999999999
example : ordGt (Decimal.cmp ⟨100, 0⟩ ⟨99999999999999999999, 18⟩) = true := by decide
-- `values_equal`: an integer and a decimal compare by value.
example : valuesEqual (.int 98) (.decimal ⟨9800, 2⟩) = true := by decide
-- `le 98.70` holds on the decimal 98.7.
example : ArgOp.eval (.le ⟨9870, 2⟩) .all (.decimal ⟨987, 1⟩) [] = true := by decide

-- List quantifiers: `all` on `[]` is true, `any` on `[]` is false.
example : ArgOp.eval (.lt ⟨100, 0⟩) .all (.list []) [] = true := by decide
example : ArgOp.eval (.lt ⟨100, 0⟩) .any (.list []) [] = false := by decide
-- Every element, or some element.
example : ArgOp.eval (.lt ⟨10, 0⟩) .all (.list [.int 3, .int 12]) [] = false := by decide
example : ArgOp.eval (.lt ⟨10, 0⟩) .any (.list [.int 3, .int 12]) [] = true := by decide

-- Null rules: `== null` holds on an absent argument, `!= null` does not, and
-- any other test is false on it.
example : ArgOp.eval (.eq .null) .all .null [] = true := by decide
example : ArgOp.eval (.ne .null) .all .null [] = false := by decide
example : ArgOp.eval (.notIn []) .all .null [] = false := by decide

-- Conditions: the empty `and` is true, the empty `or` is false.
example : (ArgCond.allOf []).eval [] 0 [] = true := by decide
example : (ArgCond.anyOf []).eval [] 0 [] = false := by decide

-- Seeding, on a policy with two discovered sets (indexes 0 and 1; the
-- initial state has `sets = [[], []]`): index 1 is the last in range, index 2
-- the first out of range. `rfl`: both sides compute; adding one value to an
-- empty set compares no strings.
--
-- The policy is written with structure-instance notation, which fills the
-- defaulted field `shared := []`; the anonymous constructor `⟨…⟩` fills no
-- defaults (`elabAnonymousCtor`, `src/Lean/Elab/BuiltinNotation.lean`, rejects
-- fewer arguments than `Policy.mk` has explicit fields, and `Policy.mk` has five).
def seedPolicy : Policy := { tools := [], agents := [], grants := [], sets := ["a", "b"] }

example : (step seedPolicy (State.initial seedPolicy)
    (.seed 1 ["x"]) .pass).1 = Outcome.applied := rfl
example : (step seedPolicy (State.initial seedPolicy)
    (.seed 1 ["x"]) .pass).2.sets = [[], ["x"]] := rfl
example : (step seedPolicy (State.initial seedPolicy)
    (.seed 2 ["x"]) .pass).1 = Outcome.invalid := rfl
example : (step seedPolicy (State.initial seedPolicy)
    (.seed 2 ["x"]) .pass).2.sets = [[], []] := rfl

end Agenra
