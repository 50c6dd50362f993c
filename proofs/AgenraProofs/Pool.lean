/-
Quota scope (`quota N per tenant`): across any interleaving of the events of
any number of sessions that share a tenant's pool (`stepIn`), the units
taken from a shared grant never exceed its quota.

Style as in `AgenraProofs.Ledger`: `show`, `rw` with the `rfl` equations,
structural induction, `cases`, `by_cases`, `omega`; no `simp`.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger
import AgenraProofs.Ledger

namespace Agenra

/-- Every shared grant with quota `limited q` has at most `q` units taken in
the pool. -/
def PoolWithin (p : Policy) (pool : SharedCounts) : Prop :=
  ∀ (g : Nat) (gr : Grant) (q : Nat), p.isShared g = true → getAt p.grants g = some gr →
    gr.quota = .limited q → pool.taken gr.name ≤ q

/-- Shared grants have distinct names (`validate.rs` rejects a shared grant
whose name another grant has). The pool is keyed by name, so two shared
grants with one name would share one count. -/
def SharedNamesDistinct (p : Policy) : Prop :=
  ∀ (g h : Nat) (gr hr : Grant), p.isShared g = true → p.isShared h = true →
    getAt p.grants g = some gr → getAt p.grants h = some hr → gr.name = hr.name → g = h

/-- Events of a tenant's sessions: which session (an index into the list of
session states), the event and what the checks decided. -/
abbrev TenantEvent := Nat × Event × Checks

/-- One event of session `i` against the shared pool; an index with no
session changes nothing. -/
def tenantStep (p : Policy) (ss : List State) (pool : SharedCounts) (ev : TenantEvent) :
    List State × SharedCounts :=
  optElim (getAt ss ev.1) (ss, pool)
    (fun s => (modifyAt (fun _ => (stepIn p s pool ev.2.1 ev.2.2).2.1) ss ev.1,
               (stepIn p s pool ev.2.1 ev.2.2).2.2))

/-- Any interleaving of the sessions' events, each against the pool the
previous one left. -/
def runTenant (p : Policy) : List State → SharedCounts → List TenantEvent →
    List State × SharedCounts
  | ss, pool, [] => (ss, pool)
  | ss, pool, ev :: rest =>
    runTenant p (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2 rest

/-! ## Taking and giving back -/

theorem setTaken_taken (c : SharedCounts) (name x : String) (n : Nat) :
    (c.setTaken name n).taken x = if x = name then n else c.taken x := rfl

/-- A unit is taken from a shared grant only while the pool has one left,
so the count stays within the quota. -/
theorem takeUnit_within (p : Policy) (hd : SharedNamesDistinct p) (l : Ledger)
    (pool : SharedCounts) (g : Nat) (hq : hasQuotaIn p l pool g = true)
    (hw : PoolWithin p pool) : PoolWithin p (takeUnit p l pool g).2 := by
  by_cases hs : p.isShared g = true
  · have hq2 : sharedAvailable pool (getAt p.grants g) = true := by
      have e : hasQuotaIn p l pool g =
          (if p.isShared g then sharedAvailable pool (getAt p.grants g) else hasQuota l g) := rfl
      rw [e, if_pos hs] at hq
      exact hq
    cases hg : getAt p.grants g with
    | none =>
      rw [hg] at hq2
      have h3 : false = true := hq2
      cases h3
    | some gr0 =>
      rw [hg] at hq2
      have hname : grantName p g = gr0.name := by
        unfold grantName
        rw [hg] <;> rfl
      have e2 : (takeUnit p l pool g).2 = pool.take gr0.name := by
        show (if p.isShared g then pool.take (grantName p g) else pool) = pool.take gr0.name
        rw [if_pos hs, hname]
      rw [e2]
      intro g' gr q hs' hg' hq'
      show (if gr.name = gr0.name then pool.taken gr0.name + 1 else pool.taken gr.name) ≤ q
      by_cases hn : gr.name = gr0.name
      · rw [if_pos hn]
        have hgg : g' = g := hd g' g gr gr0 hs' hs hg' hg hn
        rw [hgg, hg] at hg'
        have hgr : gr0 = gr := Option.some.inj hg'
        rw [← hgr] at hq'
        cases hq0 : gr0.quota with
        | unlimited =>
          rw [hq0] at hq'
          cases hq'
        | limited q0 =>
          rw [hq0] at hq'
          have hqq : q0 = q := Quota.limited.inj hq'
          have hav : quotaLeft pool gr0.name gr0.quota = true := hq2
          rw [hq0] at hav
          have hdec : decide (0 < pool.remaining gr0.name q0) = true := hav
          have hlt : 0 < pool.remaining gr0.name q0 := of_decide_eq_true hdec
          have hlt2 : 0 < q0 - pool.taken gr0.name := hlt
          omega
      · rw [if_neg hn]
        exact hw g' gr q hs' hg' hq'
  · have e2 : (takeUnit p l pool g).2 = pool := by
      show (if p.isShared g then pool.take (grantName p g) else pool) = pool
      rw [if_neg hs]
    rw [e2]
    exact hw

/-- Giving a unit back never raises a count. -/
theorem giveBack_le (p : Policy) (l : Ledger) (pool : SharedCounts) (g : Nat) (x : String) :
    (giveBack p l pool g).2.taken x ≤ pool.taken x := by
  unfold giveBack
  by_cases hs : p.isShared g = true
  · rw [if_pos hs]
    by_cases h0 : Ledger.held p l g = 0
    · rw [if_pos h0] <;> exact Nat.le_refl _
    · rw [if_neg h0]
      show (pool.setTaken (grantName p g) (pool.taken (grantName p g) - 1)).taken x ≤ pool.taken x
      rw [setTaken_taken]
      by_cases hx : x = grantName p g
      · rw [if_pos hx, hx]
        omega
      · rw [if_neg hx] <;> exact Nat.le_refl _
  · rw [if_neg hs] <;> exact Nat.le_refl _

theorem giveBack_within (p : Policy) (l : Ledger) (pool : SharedCounts) (g : Nat)
    (hw : PoolWithin p pool) : PoolWithin p (giveBack p l pool g).2 := by
  intro g' gr q hs' hg' hq'
  exact Nat.le_trans (giveBack_le p l pool g gr.name) (hw g' gr q hs' hg' hq')

theorem refundIn_within (p : Policy) : ∀ (used : List Nat) (l : Ledger) (pool : SharedCounts),
    PoolWithin p pool → PoolWithin p (refundIn p l pool used).2 := by
  intro used
  induction used with
  | nil =>
    intro l pool hw
    exact hw
  | cons g gs ih =>
    intro l pool hw
    exact ih (giveBack p l pool g).1 (giveBack p l pool g).2 (giveBack_within p l pool g hw)

/-! ## Selection and admission -/

theorem selectFromIn_hasQuota (p : Policy) (l : Ledger) (pool : SharedCounts) (agent : Nat)
    (req : Request) (sets : List (List String)) : ∀ (gs : List Grant) (i g : Nat),
    selectFromIn p l pool agent req sets i gs = some g → hasQuotaIn p l pool g = true := by
  intro gs
  induction gs with
  | nil =>
    intro i g h
    have h2 : (none : Option Nat) = some g := h
    cases h2
  | cons gr rest ih =>
    intro i g h
    have h1 : (if (grantMatches p gr agent req sets && hasQuotaIn p l pool i) then some i
        else selectFromIn p l pool agent req sets (i + 1) rest) = some g := h
    by_cases hc : (grantMatches p gr agent req sets && hasQuotaIn p l pool i) = true
    · rw [if_pos hc] at h1
      have hig : i = g := Option.some.inj h1
      rw [← hig]
      rw [Bool.and_eq_true] at hc
      exact hc.2
    · rw [if_neg hc] at h1
      exact ih (i + 1) g h1

/-- Admission takes units of shared grants only while the pool has them. -/
theorem admitChainIn_within (p : Policy) (hd : SharedNamesDistinct p) (req : Request)
    (sets : List (List String)) :
    ∀ (chain : List Nat) (l : Ledger) (pool : SharedCounts) (r : List Nat × Ledger × SharedCounts),
      admitChainIn p req sets l pool chain = .ok r → PoolWithin p pool → PoolWithin p r.2.2 := by
  intro chain
  induction chain with
  | nil =>
    intro l pool r h hw
    have h2 : (Except.ok ([], l, pool) : Except Nat (List Nat × Ledger × SharedCounts)) =
        Except.ok r := h
    cases h2
    exact hw
  | cons agent rest ih =>
    intro l pool r h hw
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
      have hq : hasQuotaIn p l pool g = true :=
        selectFromIn_hasQuota p l pool agent req sets p.grants 0 g hs
      have hw2 := takeUnit_within p hd l pool g hq hw
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
        exact ih (takeUnit p l pool g).1 (takeUnit p l pool g).2 r' hr hw2

/-! ## One step, and any interleaving -/

/-- **stepIn_pool_within.** One step of any session against the tenant's
pool keeps every shared grant's units taken within its quota. -/
theorem stepIn_pool_within (p : Policy) (hd : SharedNamesDistinct p) (s : State)
    (pool : SharedCounts) (e : Event) (c : Checks) (hw : PoolWithin p pool) :
    PoolWithin p (stepIn p s pool e c).2.2 := by
  cases e with
  | call id req =>
    have key : ∀ (b : Bool),
        PoolWithin p (afterAdmitIn p s pool id b (admitIn p s.ledger pool req s.sets)).2.2 := by
      intro b
      cases ha : admitIn p s.ledger pool req s.sets with
      | error a => exact hw
      | ok r => exact admitChainIn_within p hd req s.sets (p.agentChain req.agent) s.ledger pool r ha hw
    show PoolWithin p (guardFreshIn s pool id (stepCallIn p s pool id req c)).2.2
    rcases guardFreshIn_cases s pool id (stepCallIn p s pool id req c) with hg | hg
    · rw [hg]
      exact hw
    · rw [hg]
      cases c with
      | deny => exact hw
      | pass => exact key false
      | pause => exact key true
  | approve id =>
    show PoolWithin p (approveWithIn p s pool id c (mapFind s.paused id)).2.2
    cases mapFind s.paused id with
    | none => exact hw
    | some used =>
      cases c with
      | deny => exact refundIn_within p used s.ledger pool hw
      | pass => exact hw
      | pause => exact hw
  | reject id =>
    show PoolWithin p (rejectWithIn p s pool id (mapFind s.paused id)).2.2
    cases mapFind s.paused id with
    | none => exact hw
    | some used => exact refundIn_within p used s.ledger pool hw
  | succeeded id ds => exact hw
  | failed id =>
    show PoolWithin p (failWithIn p s pool id (mapFind s.running id)).2.2
    cases mapFind s.running id with
    | none => exact hw
    | some used => exact refundIn_within p used s.ledger pool hw
  | unknown id => exact hw
  | seed k vs => exact hw

theorem tenantStep_within (p : Policy) (hd : SharedNamesDistinct p) (ss : List State)
    (pool : SharedCounts) (ev : TenantEvent) (hw : PoolWithin p pool) :
    PoolWithin p (tenantStep p ss pool ev).2 := by
  show PoolWithin p (optElim (getAt ss ev.1) (ss, pool)
    (fun s => (modifyAt (fun _ => (stepIn p s pool ev.2.1 ev.2.2).2.1) ss ev.1,
               (stepIn p s pool ev.2.1 ev.2.2).2.2))).2
  cases getAt ss ev.1 with
  | none => exact hw
  | some s => exact stepIn_pool_within p hd s pool ev.2.1 ev.2.2 hw

theorem runTenant_within (p : Policy) (hd : SharedNamesDistinct p) :
    ∀ (evs : List TenantEvent) (ss : List State) (pool : SharedCounts),
      PoolWithin p pool → PoolWithin p (runTenant p ss pool evs).2 := by
  intro evs
  induction evs with
  | nil =>
    intro ss pool hw
    exact hw
  | cons ev rest ih =>
    intro ss pool hw
    exact ih (tenantStep p ss pool ev).1 (tenantStep p ss pool ev).2
      (tenantStep_within p hd ss pool ev hw)

theorem empty_within (p : Policy) : PoolWithin p SharedCounts.empty := by
  intro g gr q _ _ _
  show 0 ≤ q
  omega

/-- **shared_quota_never_exceeded.** Whatever the sessions of a tenant do,
in any interleaving (calls, approvals allowed or denied by the re-check,
rejections, successes, failures with refunds, unknown outcomes, seeds), and
whatever state each session starts in, the units taken from a shared grant
(`quota q per tenant`) by all of them together never exceed `q`, starting
from an empty pool. For a user: "5 payments a day" shared by a tenant means
at most 5 in flight or spent across all its sessions, not 5 per session.
Needs the policy check that shared grants have distinct names
(`SharedNamesDistinct`; the pool counts by name). -/
theorem shared_quota_never_exceeded (p : Policy) (hd : SharedNamesDistinct p)
    (ss : List State) (evs : List TenantEvent) :
    PoolWithin p (runTenant p ss SharedCounts.empty evs).2 :=
  runTenant_within p hd evs ss SharedCounts.empty (empty_within p)

end Agenra
