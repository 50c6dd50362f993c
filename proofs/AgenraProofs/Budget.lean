/-
The books of an amount budget balance, exactly, over whole sessions
(issue 30): for every grant `g`, after any sequence of events that
`stepBooks` is given from `State.initial p` and `Books.initial` (each event
with the tenant pool it sees, so any interleaving with other sessions),

  amount this session holds of g's budget (`spent g`)
    = amount reserved by paused and running calls (`reservedIn g charges`)
      + amount kept by calls that succeeded or ended with an unknown
        outcome (`keptAmount`)                               (`budget_books`)

and, for a per-session budget of `amount` (not `per tenant`), `spent g ≤
amount` (`budget_within`). Amounts are naturals (units of `10⁻¹⁸`,
`Agenra.Decimal.toAmount`). "Kept" is not part of the state (Rust's
`Books` has no such field either): `keptAmount` computes it from the event
list, adding for each `succeeded` or `unknown` event that found its call
running the charges that call held (`keptCharges`). Besides:
* a call that is denied (by the checks, by admission, or because no grant's
  budget can pay) reserves nothing: books and pool amounts are unchanged
  (`budget_deny_reserves_nothing`);
* a refund (failure, rejection, an expired pause, which the gateway turns
  into a rejection, or an approval whose re-check denies) returns exactly
  the call's charge and drops it (`budget_refund_returns_charge`,
  `budget_reject_returns_charge`, `budget_denied_approval_returns_charge`).

Each theorem says what model change it rules out, next to it.

The equality needs the charges map to be well kept (`BooksOk`: one entry
per call id, and only held calls, paused or running, have an entry), which
`stepBooks` maintains (`stepBooks_ok`).

Style as in `AgenraProofs.Books`: `show`, `rw` with the `rfl` equations,
structural induction, `cases`, `by_cases`, `omega`; no `simp` (one `simp`
is a fallback in `str_beq_self`, see there).

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger
import Agenra.Budget
import AgenraProofs.Ledger
import AgenraProofs.Quota
import AgenraProofs.Construction
import AgenraProofs.Accounting
import AgenraProofs.Books

namespace Agenra

/-! ## Defining equations, by `rfl` -/

theorem chFind_cons (k : String) (v : Charges) (rest : List (String × Charges)) (key : String) :
    chFind ((k, v) :: rest) key = if k == key then some v else chFind rest key := rfl

theorem chErase_cons (k : String) (v : Charges) (rest : List (String × Charges)) (key : String) :
    chErase ((k, v) :: rest) key =
      if k == key then chErase rest key else (k, v) :: chErase rest key := rfl

theorem giveBackCharges_cons (p : Policy) (bs : List Budget) (spent : Nat → Nat)
    (amounts : AmountPool) (g a : Nat) (cs : Charges) :
    giveBackCharges p bs spent amounts ((g, a) :: cs) =
      giveBackCharges p bs (subAt spent g (backOf a (spent g)))
        (if isTenantBudget bs g then amounts.remove (grantName p g) (backOf a (spent g))
         else amounts) cs := rfl

/-! ## Sums of charges -/

/-- The amount of grant `g`'s budget a call's charges hold. -/
def chargeIn (g : Nat) : Charges → Nat
  | [] => 0
  | c :: cs => (if c.1 = g then c.2 else 0) + chargeIn g cs

/-- The amount of grant `g`'s budget the calls of a charges map hold:
what paused and running calls reserve (only held calls have an entry:
`ChargesHeld`). -/
def reservedIn (g : Nat) : List (String × Charges) → Nat
  | [] => 0
  | kv :: rest => chargeIn g kv.2 + reservedIn g rest

/-! ## Call ids -/

/-- `(k == k) = true` on `String`. `beq_self_eq_true` is stated
`[BEq α] [LawfulBEq α] (a : α) : (a == a) = true` in the copies of
`src/Init/SimpLemmas.lean` read; in case its argument became implicit
(or the lemma moved to `ReflBEq`), the alternatives are tried in turn:
`LawfulBEq.rfl` (the field `protected rfl : {a : α} → (a == a) = true` of
`class LawfulBEq` in `src/Init/Core.lean`), `decide_eq_true rfl` (`String`'s `==` is `instBEqOfDecidableEq`, so
`k == k` unfolds to `decide (k = k)`), and last `simp` with that
`@[simp]` lemma (the only `simp` of the proofs, a fallback). -/
theorem str_beq_self (k : String) : (k == k) = true := by
  first
  | exact beq_self_eq_true k
  | exact beq_self_eq_true
  | exact LawfulBEq.rfl
  | exact decide_eq_true rfl
  | simp

/-- Erasing another key leaves `k`'s entry as it was. -/
theorem mapFind_mapErase_ne (key k : String) (hne : ¬ (key == k) = true) :
    ∀ (m : List (String × List Nat)), mapFind (mapErase m key) k = mapFind m k := by
  intro m
  induction m with
  | nil => rfl
  | cons kv rest ih =>
    obtain ⟨k', v'⟩ := kv
    by_cases he : (k' == key) = true
    · have hk : ¬ (k' == k) = true := by
        intro h
        apply hne
        have e1 : k' = key := str_eq_of_beq k' key he
        rw [← e1]
        exact h
      rw [mapErase_cons, if_pos he, ih, mapFind_cons, if_neg hk]
    · rw [mapErase_cons, if_neg he, mapFind_cons, mapFind_cons, ih]

theorem mapFind_mapInsert_self (m : List (String × List Nat)) (id : String) (v : List Nat) :
    mapFind (mapInsert m id v) id = some v := by
  show mapFind ((id, v) :: mapErase m id) id = some v
  rw [mapFind_cons, if_pos (str_beq_self id)]

theorem mapFind_mapInsert_ne (m : List (String × List Nat)) (id k : String) (v : List Nat)
    (hne : ¬ (id == k) = true) : mapFind (mapInsert m id v) k = mapFind m k := by
  show mapFind ((id, v) :: mapErase m id) k = mapFind m k
  rw [mapFind_cons, if_neg hne]
  exact mapFind_mapErase_ne id k hne m

/-- Two states whose maps agree on `k` agree on whether `k` is held. -/
theorem isHeld_eq (s s' : State) (k : String) (hp : mapFind s'.paused k = mapFind s.paused k)
    (hr : mapFind s'.running k = mapFind s.running k) : isHeld s' k = isHeld s k := by
  unfold isHeld
  rw [hp, hr]

/-! ## The charges map -/

/-- No entry for `key`: erasing it changes nothing. -/
theorem chErase_of_none (key : String) : ∀ (m : List (String × Charges)),
    chFind m key = none → chErase m key = m := by
  intro m
  induction m with
  | nil =>
    intro _
    rfl
  | cons kv rest ih =>
    obtain ⟨k, v⟩ := kv
    intro h
    by_cases hk : (k == key) = true
    · rw [chFind_cons, if_pos hk] at h
      cases h
    · rw [chFind_cons, if_neg hk] at h
      rw [chErase_cons, if_neg hk, ih h]

/-- Erasing any key keeps a missing key missing. -/
theorem chFind_chErase_none (k key : String) : ∀ (m : List (String × Charges)),
    chFind m k = none → chFind (chErase m key) k = none := by
  intro m
  induction m with
  | nil =>
    intro _
    rfl
  | cons kv rest ih =>
    obtain ⟨k', v'⟩ := kv
    intro h
    by_cases hk : (k' == k) = true
    · rw [chFind_cons, if_pos hk] at h
      cases h
    · rw [chFind_cons, if_neg hk] at h
      by_cases he : (k' == key) = true
      · rw [chErase_cons, if_pos he]
        exact ih h
      · rw [chErase_cons, if_neg he, chFind_cons, if_neg hk]
        exact ih h

/-- After erasing `key`, the map has no entry for it. -/
theorem chFind_chErase_self : ∀ (m : List (String × Charges)) (key : String),
    chFind (chErase m key) key = none := by
  intro m key
  induction m with
  | nil => rfl
  | cons kv rest ih =>
    obtain ⟨k, v⟩ := kv
    by_cases hk : (k == key) = true
    · rw [chErase_cons, if_pos hk]
      exact ih
    · rw [chErase_cons, if_neg hk, chFind_cons, if_neg hk]
      exact ih

/-- Each call id at most once in the charges map (Rust: a `BTreeMap`). -/
def ChUniq : List (String × Charges) → Prop
  | [] => True
  | kv :: rest => chFind rest kv.1 = none ∧ ChUniq rest

theorem chUniq_chErase (key : String) : ∀ (m : List (String × Charges)),
    ChUniq m → ChUniq (chErase m key) := by
  intro m
  induction m with
  | nil =>
    intro _
    exact True.intro
  | cons kv rest ih =>
    obtain ⟨k, v⟩ := kv
    intro hu
    have hu2 : chFind rest k = none ∧ ChUniq rest := hu
    by_cases he : (k == key) = true
    · rw [chErase_cons, if_pos he]
      exact ih hu2.2
    · rw [chErase_cons, if_neg he]
      show chFind (chErase rest key) k = none ∧ ChUniq (chErase rest key)
      exact ⟨chFind_chErase_none k key rest hu2.1, ih hu2.2⟩

theorem chUniq_chInsert (m : List (String × Charges)) (key : String) (v : Charges)
    (hu : ChUniq m) : ChUniq (chInsert m key v) := by
  show chFind (chErase m key) key = none ∧ ChUniq (chErase m key)
  exact ⟨chFind_chErase_self m key, chUniq_chErase key m hu⟩

theorem chUniq_record (m : List (String × Charges)) (id : String) (hu : ChUniq m) :
    ∀ (cs : Charges), ChUniq (recordCharges m id cs) := by
  intro cs
  cases cs with
  | nil => exact hu
  | cons c cs => exact chUniq_chInsert m id (c :: cs) hu

/-- Recording a call's charges under `id` leaves every other id's entry
missing if it was. -/
theorem chFind_record_ne (m : List (String × Charges)) (id k : String)
    (hne : ¬ (id == k) = true) (hk : chFind m k = none) :
    ∀ (cs : Charges), chFind (recordCharges m id cs) k = none := by
  intro cs
  cases cs with
  | nil => exact hk
  | cons c cs =>
    show chFind ((id, c :: cs) :: chErase m id) k = none
    rw [chFind_cons, if_neg hne]
    exact chFind_chErase_none k id m hk

/-- In a well-kept map, the entry `chFind` finds and what `chErase` leaves
reserve exactly what the map reserved. -/
theorem reserved_erase_found (g : Nat) (key : String) (cs : Charges) :
    ∀ (m : List (String × Charges)), ChUniq m → chFind m key = some cs →
      reservedIn g m = chargeIn g cs + reservedIn g (chErase m key) := by
  intro m
  induction m with
  | nil =>
    intro _ h
    have h2 : (none : Option Charges) = some cs := h
    cases h2
  | cons kv rest ih =>
    obtain ⟨k, v⟩ := kv
    intro hu h
    have hu2 : chFind rest k = none ∧ ChUniq rest := hu
    by_cases hk : (k == key) = true
    · rw [chFind_cons, if_pos hk] at h
      have hv : v = cs := Option.some.inj h
      have hkey : k = key := str_eq_of_beq k key hk
      have hr : chErase rest key = rest := by
        rw [← hkey]
        exact chErase_of_none k rest hu2.1
      rw [chErase_cons, if_pos hk, hr, ← hv] <;> rfl
    · rw [chFind_cons, if_neg hk] at h
      have h3 := ih hu2.2 h
      rw [chErase_cons, if_neg hk]
      show chargeIn g v + reservedIn g rest =
        chargeIn g cs + (chargeIn g v + reservedIn g (chErase rest key))
      omega

/-- Recording the charges of a call whose id has no entry adds exactly
them. -/
theorem reserved_record (g : Nat) (m : List (String × Charges)) (id : String)
    (hf : chFind m id = none) : ∀ (cs : Charges),
    reservedIn g (recordCharges m id cs) = chargeIn g cs + reservedIn g m := by
  intro cs
  cases cs with
  | nil =>
    show reservedIn g m = 0 + reservedIn g m
    omega
  | cons c cs =>
    have e : reservedIn g (chErase m id) = reservedIn g m := by
      rw [chErase_of_none id m hf]
    show chargeIn g (c :: cs) + reservedIn g (chErase m id) = chargeIn g (c :: cs) + reservedIn g m
    omega

/-! ## Giving back -/

theorem backOf_of_le (a h : Nat) (hle : a ≤ h) : backOf a h = a := by
  show (if a ≤ h then a else h) = a
  rw [if_pos hle]

/-- Giving back never raises what the session holds of any budget. -/
theorem giveBackCharges_le (p : Policy) (bs : List Budget) : ∀ (cs : Charges) (spent : Nat → Nat)
    (amounts : AmountPool) (g : Nat), (giveBackCharges p bs spent amounts cs).1 g ≤ spent g := by
  intro cs
  induction cs with
  | nil =>
    intro spent amounts g
    exact Nat.le_refl (spent g)
  | cons c cs ih =>
    obtain ⟨x, a⟩ := c
    intro spent amounts g
    rw [giveBackCharges_cons]
    have h1 := ih (subAt spent x (backOf a (spent x)))
      (if isTenantBudget bs x then amounts.remove (grantName p x) (backOf a (spent x))
       else amounts) g
    have h2 : subAt spent x (backOf a (spent x)) g ≤ spent g := by
      show (if x = g then spent g - backOf a (spent x) else spent g) ≤ spent g
      by_cases hxg : x = g
      · rw [if_pos hxg]
        omega
      · rw [if_neg hxg] <;> omega
    exact Nat.le_trans h1 h2

/-- **giveBackCharges_exact.** When the session holds at least a call's charges
of every budget, giving them back takes off exactly the charges: nothing is
lost to the `min` of `give_back_charges`. -/
theorem giveBackCharges_exact (p : Policy) (bs : List Budget) : ∀ (cs : Charges) (spent : Nat → Nat)
    (amounts : AmountPool), (∀ y, chargeIn y cs ≤ spent y) →
    ∀ g, (giveBackCharges p bs spent amounts cs).1 g + chargeIn g cs = spent g := by
  intro cs
  induction cs with
  | nil =>
    intro spent amounts _ g
    show spent g + 0 = spent g
    omega
  | cons c cs ih =>
    obtain ⟨x, a⟩ := c
    intro spent amounts hle g
    have hx : a + chargeIn x cs ≤ spent x := by
      have h0 := hle x
      have e : chargeIn x ((x, a) :: cs) = a + chargeIn x cs := by
        show (if x = x then a else 0) + chargeIn x cs = a + chargeIn x cs
        rw [if_pos (rfl : x = x)]
      omega
    have hb : backOf a (spent x) = a := backOf_of_le a (spent x) (by omega)
    have hle2 : ∀ y, chargeIn y cs ≤ subAt spent x a y := by
      intro y
      have h0 := hle y
      show chargeIn y cs ≤ (if x = y then spent y - a else spent y)
      by_cases hxy : x = y
      · rw [if_pos hxy]
        rw [← hxy]
        omega
      · rw [if_neg hxy]
        have e : chargeIn y ((x, a) :: cs) = 0 + chargeIn y cs := by
          show (if x = y then a else 0) + chargeIn y cs = 0 + chargeIn y cs
          rw [if_neg hxy]
        omega
    rw [giveBackCharges_cons, hb]
    have h1 := ih (subAt spent x a)
      (if isTenantBudget bs x then amounts.remove (grantName p x) a else amounts) hle2 g
    by_cases hxg : x = g
    · rw [← hxg] at h1 ⊢
      have e3 : subAt spent x a x = spent x - a := by
        show (if x = x then spent x - a else spent x) = spent x - a
        rw [if_pos (rfl : x = x)]
      have e4 : chargeIn x ((x, a) :: cs) = a + chargeIn x cs := by
        show (if x = x then a else 0) + chargeIn x cs = a + chargeIn x cs
        rw [if_pos (rfl : x = x)]
      omega
    · have e3 : subAt spent x a g = spent g := by
        show (if x = g then spent g - a else spent g) = spent g
        rw [if_neg hxg]
      have e4 : chargeIn g ((x, a) :: cs) = 0 + chargeIn g cs := by
        show (if x = g then a else 0) + chargeIn g cs = 0 + chargeIn g cs
        rw [if_neg hxg]
      omega

/-! ## Selection and admission -/

/-- The grant `select_budgeted` picks passed `budget_check` with the amount
it answers. -/
theorem selectFromBudgeted_check (p : Policy) (bs : List Budget) (pu : Purse) (agent : Nat)
    (req : Request) (sets : List (List String)) : ∀ (gs : List Grant) (i g : Nat) (oa : Option Nat),
    selectFromBudgeted p bs pu agent req sets i gs = some (g, oa) →
      budgetCheck p bs pu.spent pu.amounts g req = some oa := by
  intro gs
  induction gs with
  | nil =>
    intro i g oa h
    have h2 : (none : Option (Nat × Option Nat)) = some (g, oa) := h
    cases h2
  | cons gr rest ih =>
    intro i g oa h
    have h1 : (if (grantMatches p gr agent req sets && hasQuotaIn p pu.ledger pu.pool i) then
        optElim (budgetCheck p bs pu.spent pu.amounts i req)
          (selectFromBudgeted p bs pu agent req sets (i + 1) rest)
          (fun a => some (i, a))
        else selectFromBudgeted p bs pu agent req sets (i + 1) rest) = some (g, oa) := h
    by_cases hc : (grantMatches p gr agent req sets && hasQuotaIn p pu.ledger pu.pool i) = true
    · rw [if_pos hc] at h1
      cases hb : budgetCheck p bs pu.spent pu.amounts i req with
      | none =>
        rw [hb] at h1
        exact ih (i + 1) g oa h1
      | some a =>
        rw [hb] at h1
        have h2 : some (i, a) = some (g, oa) := h1
        cases h2
        exact hb
    · rw [if_neg hc] at h1
      exact ih (i + 1) g oa h1

/-- `budget_check` answers an amount only for a grant with a budget, and
only an amount at most what is left of it. -/
theorem budgetCheck_some (p : Policy) (bs : List Budget) (spent : Nat → Nat)
    (amounts : AmountPool) (g : Nat) (req : Request) (a : Nat)
    (h : budgetCheck p bs spent amounts g req = some (some a)) :
    ∃ b, budgetOf bs g = some b ∧ a ≤ budgetLeft p b spent amounts g := by
  have h1 : optElim (budgetOf bs g) (some none) (fun b =>
      optElim (chargeAmount b req) none (fun x =>
        if x ≤ budgetLeft p b spent amounts g then some (some x) else none)) = some (some a) := h
  cases hb : budgetOf bs g with
  | none =>
    rw [hb] at h1
    have h2 : (some none : Option (Option Nat)) = some (some a) := h1
    cases h2
  | some b =>
    rw [hb] at h1
    have h2 : optElim (chargeAmount b req) none (fun x =>
        if x ≤ budgetLeft p b spent amounts g then some (some x) else none) = some (some a) := h1
    cases hc : chargeAmount b req with
    | none =>
      rw [hc] at h2
      have h3 : (none : Option (Option Nat)) = some (some a) := h2
      cases h3
    | some a' =>
      rw [hc] at h2
      have h3 : (if a' ≤ budgetLeft p b spent amounts g then some (some a') else none) =
          some (some a) := h2
      by_cases hle : a' ≤ budgetLeft p b spent amounts g
      · rw [if_pos hle] at h3
        have e : a' = a := Option.some.inj (Option.some.inj h3)
        rw [← e]
        first
        | exact ⟨b, rfl, hle⟩
        | exact ⟨b, hb, hle⟩
      · rw [if_neg hle] at h3
        cases h3

/-- Admission spends exactly the charges it records: for every grant, the
amount held after is the amount before plus the call's charges of it. -/
theorem admitChainBudgeted_spent (p : Policy) (bs : List Budget) (req : Request)
    (sets : List (List String)) :
    ∀ (chain : List Nat) (pu : Purse) (r : List Nat × Charges × Purse),
      admitChainBudgeted p bs req sets pu chain = .ok r →
      ∀ g, r.2.2.spent g = pu.spent g + chargeIn g r.2.1 := by
  intro chain
  induction chain with
  | nil =>
    intro pu r h g
    have h2 : (Except.ok ([], [], pu) : Except Nat (List Nat × Charges × Purse)) =
        Except.ok r := h
    cases h2
    show pu.spent g = pu.spent g + 0
    omega
  | cons agent rest ih =>
    intro pu r h g
    have h2 : optElim (selectBudgeted p bs pu agent req sets) (Except.error agent)
        (fun ga => consAdmit ga.1 ga.2
          (admitChainBudgeted p bs req sets (takeBudgeted p bs pu ga.1 ga.2) rest)) =
        Except.ok r := h
    cases hs : selectBudgeted p bs pu agent req sets with
    | none =>
      rw [hs] at h2
      have h3 : (Except.error agent : Except Nat (List Nat × Charges × Purse)) = Except.ok r := h2
      cases h3
    | some ga =>
      obtain ⟨x, oa⟩ := ga
      rw [hs] at h2
      have h3 : consAdmit x oa
          (admitChainBudgeted p bs req sets (takeBudgeted p bs pu x oa) rest) = Except.ok r := h2
      cases hr : admitChainBudgeted p bs req sets (takeBudgeted p bs pu x oa) rest with
      | error e =>
        rw [hr] at h3
        have h4 : (Except.error e : Except Nat (List Nat × Charges × Purse)) = Except.ok r := h3
        cases h4
      | ok r' =>
        rw [hr] at h3
        have h4 : (Except.ok (x :: r'.1, chargeCons x oa r'.2.1, r'.2.2) :
            Except Nat (List Nat × Charges × Purse)) = Except.ok r := h3
        cases h4
        have h5 := ih (takeBudgeted p bs pu x oa) r' hr g
        show r'.2.2.spent g = pu.spent g + chargeIn g (chargeCons x oa r'.2.1)
        cases oa with
        | none =>
          have e : (takeBudgeted p bs pu x none).spent g = pu.spent g := rfl
          have e2 : chargeIn g (chargeCons x none r'.2.1) = chargeIn g r'.2.1 := rfl
          omega
        | some a =>
          have e : (takeBudgeted p bs pu x (some a)).spent g =
              (if x = g then pu.spent g + a else pu.spent g) := rfl
          have e2 : chargeIn g (chargeCons x (some a) r'.2.1) =
              (if x = g then a else 0) + chargeIn g r'.2.1 := rfl
          by_cases hxg : x = g
          · rw [if_pos hxg] at e e2
            omega
          · rw [if_neg hxg] at e e2
            omega

/-- Every per-session budget (not `per tenant`) holds at most its amount. -/
def SessionWithin (bs : List Budget) (spent : Nat → Nat) : Prop :=
  ∀ (g : Nat) (b : Budget), budgetOf bs g = some b → b.perTenant = false → spent g ≤ b.amount

theorem within_of_le (bs : List Budget) (sp sp' : Nat → Nat) (hle : ∀ g, sp' g ≤ sp g)
    (hw : SessionWithin bs sp) : SessionWithin bs sp' :=
  fun g b hb hpt => Nat.le_trans (hle g) (hw g b hb hpt)

/-- What is left of a per-session budget is its amount less what the
session holds. -/
theorem left_session (p : Policy) (b : Budget) (spent : Nat → Nat) (amounts : AmountPool)
    (g : Nat) (hpt : b.perTenant = false) : budgetLeft p b spent amounts g = b.amount - spent g := by
  have hn : ¬ (b.perTenant = true) := by
    intro h
    rw [hpt] at h
    cases h
  show b.amount - (if b.perTenant = true then amounts.spent (grantName p g) else spent g) =
    b.amount - spent g
  rw [if_neg hn]

/-- One agent's turn of admission keeps every per-session budget within its
amount: the amount is spent only when it fits what is left. -/
theorem takeBudgeted_within (p : Policy) (bs : List Budget) (pu : Purse) (x : Nat)
    (oa : Option Nat) (req : Request) (hc : budgetCheck p bs pu.spent pu.amounts x req = some oa)
    (hw : SessionWithin bs pu.spent) : SessionWithin bs (takeBudgeted p bs pu x oa).spent := by
  intro g b hb hpt
  cases oa with
  | none => exact hw g b hb hpt
  | some a =>
    obtain ⟨b0, hb0, hle⟩ := budgetCheck_some p bs pu.spent pu.amounts x req a hc
    have e : (takeBudgeted p bs pu x (some a)).spent g =
        (if x = g then pu.spent g + a else pu.spent g) := rfl
    rw [e]
    by_cases hxg : x = g
    · rw [if_pos hxg]
      rw [hxg] at hb0 hle
      rw [hb] at hb0
      have hbb : b = b0 := Option.some.inj hb0
      rw [← hbb] at hle
      rw [left_session p b pu.spent pu.amounts g hpt] at hle
      have h0 := hw g b hb hpt
      omega
    · rw [if_neg hxg]
      exact hw g b hb hpt

theorem admitChainBudgeted_within (p : Policy) (bs : List Budget) (req : Request)
    (sets : List (List String)) :
    ∀ (chain : List Nat) (pu : Purse) (r : List Nat × Charges × Purse),
      admitChainBudgeted p bs req sets pu chain = .ok r →
      SessionWithin bs pu.spent → SessionWithin bs r.2.2.spent := by
  intro chain
  induction chain with
  | nil =>
    intro pu r h hw
    have h2 : (Except.ok ([], [], pu) : Except Nat (List Nat × Charges × Purse)) =
        Except.ok r := h
    cases h2
    exact hw
  | cons agent rest ih =>
    intro pu r h hw
    have h2 : optElim (selectBudgeted p bs pu agent req sets) (Except.error agent)
        (fun ga => consAdmit ga.1 ga.2
          (admitChainBudgeted p bs req sets (takeBudgeted p bs pu ga.1 ga.2) rest)) =
        Except.ok r := h
    cases hs : selectBudgeted p bs pu agent req sets with
    | none =>
      rw [hs] at h2
      have h3 : (Except.error agent : Except Nat (List Nat × Charges × Purse)) = Except.ok r := h2
      cases h3
    | some ga =>
      obtain ⟨x, oa⟩ := ga
      rw [hs] at h2
      have h3 : consAdmit x oa
          (admitChainBudgeted p bs req sets (takeBudgeted p bs pu x oa) rest) = Except.ok r := h2
      have hc : budgetCheck p bs pu.spent pu.amounts x req = some oa :=
        selectFromBudgeted_check p bs pu agent req sets p.grants 0 x oa hs
      have hw2 := takeBudgeted_within p bs pu x oa req hc hw
      cases hr : admitChainBudgeted p bs req sets (takeBudgeted p bs pu x oa) rest with
      | error e =>
        rw [hr] at h3
        have h4 : (Except.error e : Except Nat (List Nat × Charges × Purse)) = Except.ok r := h3
        cases h4
      | ok r' =>
        rw [hr] at h3
        have h4 : (Except.ok (x :: r'.1, chargeCons x oa r'.2.1, r'.2.2) :
            Except Nat (List Nat × Charges × Purse)) = Except.ok r := h3
        cases h4
        exact ih (takeBudgeted p bs pu x oa) r' hr hw2

/-! ## The calls of a step -/

theorem guardFreshBooks_held (s : State) (b : Books) (pool : SharedCounts) (amounts : AmountPool)
    (id : String) (r : BooksStep) (hh : isHeld s id = true) :
    guardFreshBooks s b pool amounts id r =
      ({ outcome := .invalid, state := s, books := b, pool := pool, amounts := amounts } :
        BooksStep) := by
  unfold guardFreshBooks
  revert hh
  cases isHeld s id with
  | true => intro _; rfl
  | false => intro hh; cases hh

theorem guardFreshBooks_fresh (s : State) (b : Books) (pool : SharedCounts)
    (amounts : AmountPool) (id : String) (r : BooksStep) (hf : isHeld s id = false) :
    guardFreshBooks s b pool amounts id r = r := by
  unfold guardFreshBooks
  revert hf
  cases isHeld s id with
  | true => intro hf; cases hf
  | false => intro _; rfl

/-- An admitted call is held after the step (paused or running). -/
theorem stepAdmitted_held (p : Policy) (s : State) (id : String) (used : List Nat) (l : Ledger)
    (nb : Bool) : isHeld (stepAdmitted p s id used l nb).2 id = true := by
  unfold stepAdmitted
  by_cases hc : (used.any (grantApproval p) || nb) = true
  · rw [if_pos hc]
    show ((mapFind (mapInsert s.paused id used) id).isSome ||
      (mapFind s.running id).isSome) = true
    rw [mapFind_mapInsert_self] <;> rfl
  · rw [if_neg hc]
    show ((mapFind s.paused id).isSome ||
      (mapFind (mapInsert s.running id used) id).isSome) = true
    rw [mapFind_mapInsert_self] <;> cases (mapFind s.paused id).isSome <;> rfl

/-- Admitting call `id` changes no other id's place. -/
theorem stepAdmitted_same (p : Policy) (s : State) (id : String) (used : List Nat) (l : Ledger)
    (nb : Bool) : ∀ (k : String), ¬ (id == k) = true →
      isHeld (stepAdmitted p s id used l nb).2 k = isHeld s k := by
  intro k hk
  unfold stepAdmitted
  by_cases hc : (used.any (grantApproval p) || nb) = true
  · rw [if_pos hc]
    exact isHeld_eq s { s with ledger := l, paused := mapInsert s.paused id used } k
      (mapFind_mapInsert_ne s.paused id k used hk) rfl
  · rw [if_neg hc]
    exact isHeld_eq s { s with ledger := l, running := mapInsert s.running id used } k
      rfl (mapFind_mapInsert_ne s.running id k used hk)

/-! ## The charges map stays well kept -/

/-- The charges map is well kept: one entry per call id, and an entry only
for a held call (paused or running). -/
def ChargesHeld (s : State) (m : List (String × Charges)) : Prop :=
  ∀ (k : String), isHeld s k = false → chFind m k = none

def BooksOk (s : State) (b : Books) : Prop :=
  ChUniq b.charges ∧ ChargesHeld s b.charges

/-- A call leaves (refund or end): its charges go, no other id moves. -/
theorem ok_erase (s s' : State) (b b' : Books) (id : String)
    (hc : b'.charges = chErase b.charges id) (hok : BooksOk s b)
    (hsame : ∀ (k : String), ¬ (id == k) = true → isHeld s' k = isHeld s k) : BooksOk s' b' := by
  refine ⟨?_, ?_⟩
  · rw [hc]
    exact chUniq_chErase id b.charges hok.1
  · intro k hk
    rw [hc]
    by_cases hik : (id == k) = true
    · have e : id = k := str_eq_of_beq id k hik
      rw [← e]
      exact chFind_chErase_self b.charges id
    · rw [hsame k hik] at hk
      exact chFind_chErase_none k id b.charges (hok.2 k hk)

/-- A call becomes (or stays) held under `id`, with charges `cs` recorded
(none for an approval: `recordCharges m id [] = m`). -/
theorem ok_record (s s' : State) (b b' : Books) (id : String) (cs : Charges)
    (hc : b'.charges = recordCharges b.charges id cs) (hok : BooksOk s b)
    (hheld : isHeld s' id = true)
    (hsame : ∀ (k : String), ¬ (id == k) = true → isHeld s' k = isHeld s k) : BooksOk s' b' := by
  refine ⟨?_, ?_⟩
  · rw [hc]
    exact chUniq_record b.charges id hok.1 cs
  · intro k hk
    rw [hc]
    by_cases hik : (id == k) = true
    · have e : id = k := str_eq_of_beq id k hik
      rw [← e] at hk
      rw [hheld] at hk
      cases hk
    · rw [hsame k hik] at hk
      exact chFind_record_ne b.charges id k hik (hok.2 k hk) cs

theorem stepCallBooks_ok (p : Policy) (bs : List Budget) (s : State) (b : Books)
    (pool : SharedCounts) (amounts : AmountPool) (id : String) (req : Request) (ch : Checks)
    (hok : BooksOk s b) :
    BooksOk (stepCallBooks p bs s b pool amounts id req ch).state
      (stepCallBooks p bs s b pool amounts id req ch).books := by
  have key : ∀ (nb : Bool),
      BooksOk (afterAdmitBooks p s b pool amounts id nb
          (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).state
        (afterAdmitBooks p s b pool amounts id nb
          (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).books := by
    intro nb
    cases admitBudgeted p bs (purseOf s b pool amounts) req s.sets with
    | error e => exact hok
    | ok r =>
      exact ok_record s (stepAdmitted p s id r.1 r.2.2.ledger nb).2 b
        { spent := r.2.2.spent, charges := recordCharges b.charges id r.2.1 } id r.2.1 rfl hok
        (stepAdmitted_held p s id r.1 r.2.2.ledger nb)
        (stepAdmitted_same p s id r.1 r.2.2.ledger nb)
  cases ch with
  | deny => exact hok
  | pass => exact key false
  | pause => exact key true

/-- **stepBooks_ok.** `stepBooks` keeps the charges map well kept. -/
theorem stepBooks_ok (p : Policy) (bs : List Budget) (s : State) (b : Books)
    (pool : SharedCounts) (amounts : AmountPool) (e : Event) (ch : Checks) (hok : BooksOk s b) :
    BooksOk (stepBooks p bs s b pool amounts e ch).state
      (stepBooks p bs s b pool amounts e ch).books := by
  cases e with
  | call id req =>
    show BooksOk
      (guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req ch)).state
      (guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req ch)).books
    cases hh : isHeld s id with
    | true =>
      rw [guardFreshBooks_held s b pool amounts id _ hh]
      exact hok
    | false =>
      rw [guardFreshBooks_fresh s b pool amounts id _ hh]
      exact stepCallBooks_ok p bs s b pool amounts id req ch hok
  | approve id =>
    show BooksOk (approveWithIn p s pool id ch (mapFind s.paused id)).2.1
      (approveBooks p bs b amounts id ch (mapFind s.paused id)).1
    cases mapFind s.paused id with
    | none => exact hok
    | some used =>
      have hsame : ∀ (k : String), ¬ (id == k) = true →
          isHeld { s with paused := mapErase s.paused id,
                          running := mapInsert s.running id used } k = isHeld s k :=
        fun k hk => isHeld_eq s { s with paused := mapErase s.paused id,
                                         running := mapInsert s.running id used } k
          (mapFind_mapErase_ne id k hk s.paused) (mapFind_mapInsert_ne s.running id k used hk)
      have hheld : isHeld { s with paused := mapErase s.paused id,
                                  running := mapInsert s.running id used } id = true := by
        show ((mapFind (mapErase s.paused id) id).isSome ||
          (mapFind (mapInsert s.running id used) id).isSome) = true
        rw [mapFind_mapErase_self, mapFind_mapInsert_self] <;> rfl
      cases ch with
      | deny =>
        exact ok_erase s (approveWithIn p s pool id .deny (some used)).2.1 b
          (refundBooks p bs b amounts id).1 id rfl hok
          (fun k hk => isHeld_eq s (approveWithIn p s pool id .deny (some used)).2.1 k
            (mapFind_mapErase_ne id k hk s.paused) rfl)
      | pass =>
        exact ok_record s { s with paused := mapErase s.paused id,
                                   running := mapInsert s.running id used } b b id [] rfl hok
          hheld hsame
      | pause =>
        exact ok_record s { s with paused := mapErase s.paused id,
                                   running := mapInsert s.running id used } b b id [] rfl hok
          hheld hsame
  | reject id =>
    show BooksOk (rejectWithIn p s pool id (mapFind s.paused id)).2.1
      (refundIfFound p bs b amounts id (mapFind s.paused id)).1
    cases mapFind s.paused id with
    | none => exact hok
    | some used =>
      exact ok_erase s (rejectWithIn p s pool id (some used)).2.1 b
        (refundBooks p bs b amounts id).1 id rfl hok
        (fun k hk => isHeld_eq s (rejectWithIn p s pool id (some used)).2.1 k
          (mapFind_mapErase_ne id k hk s.paused) rfl)
  | succeeded id ds =>
    show BooksOk (succeedWith p s id ds (mapFind s.running id)).2
      (keepIfFound b amounts id (mapFind s.running id)).1
    cases mapFind s.running id with
    | none => exact hok
    | some used =>
      exact ok_erase s (succeedWith p s id ds (some used)).2 b (keepBooks b id) id rfl hok
        (fun k hk => isHeld_eq s (succeedWith p s id ds (some used)).2 k
          rfl (mapFind_mapErase_ne id k hk s.running))
  | failed id =>
    show BooksOk (failWithIn p s pool id (mapFind s.running id)).2.1
      (refundIfFound p bs b amounts id (mapFind s.running id)).1
    cases mapFind s.running id with
    | none => exact hok
    | some used =>
      exact ok_erase s (failWithIn p s pool id (some used)).2.1 b
        (refundBooks p bs b amounts id).1 id rfl hok
        (fun k hk => isHeld_eq s (failWithIn p s pool id (some used)).2.1 k
          rfl (mapFind_mapErase_ne id k hk s.running))
  | unknown id =>
    show BooksOk (unknownWith s id (mapFind s.running id)).2
      (keepIfFound b amounts id (mapFind s.running id)).1
    cases mapFind s.running id with
    | none => exact hok
    | some used =>
      exact ok_erase s (unknownWith s id (some used)).2 b (keepBooks b id) id rfl hok
        (fun k hk => isHeld_eq s (unknownWith s id (some used)).2 k
          rfl (mapFind_mapErase_ne id k hk s.running))
  | seed k vs =>
    show BooksOk (seedWith s k vs (getAt s.sets k)).2 b
    cases getAt s.sets k with
    | none => exact hok
    | some acc =>
      refine ⟨hok.1, ?_⟩
      intro k' hk
      rw [isHeld_eq s (seedWith s k vs (some acc)).2 k' rfl rfl] at hk
      exact hok.2 k' hk

/-! ## One step balances the books -/

/-- Every budget's reservations are covered by what the session holds. -/
def Covered (b : Books) : Prop :=
  ∀ (y : Nat), reservedIn y b.charges ≤ b.spent y

/-- Step `b ⟶ b'`, keeping the charges `kept` for good, balances grant `g`:
held after + reserved before = held before + reserved after + kept. -/
def BalancedAt (b b' : Books) (kept : Charges) (g : Nat) : Prop :=
  b'.spent g + reservedIn g b.charges = b.spent g + reservedIn g b'.charges + chargeIn g kept

/-- The charges an event keeps spent for good: those of the running call
that a `succeeded` or `unknown` event ends (none if it is not running). -/
def keptCharges (s : State) (b : Books) : Event → Charges
  | .succeeded id _ => optElim (mapFind s.running id) [] (fun _ => chOr (chFind b.charges id))
  | .unknown id => optElim (mapFind s.running id) [] (fun _ => chOr (chFind b.charges id))
  | _ => []

theorem balancedAt_refl (b : Books) (g : Nat) : BalancedAt b b [] g := by
  show b.spent g + reservedIn g b.charges = b.spent g + reservedIn g b.charges + 0
  omega

/-- **refundBooks_exact.** When the session holds what its calls reserve,
a refund takes off exactly the call's charges of every budget, and drops
its entry. -/
theorem refundBooks_exact (p : Policy) (bs : List Budget) (b : Books) (amounts : AmountPool)
    (id : String) (hu : ChUniq b.charges) (hcov : Covered b) (g : Nat) :
    (refundBooks p bs b amounts id).1.spent g + chargeIn g (chOr (chFind b.charges id)) =
        b.spent g ∧
      chFind (refundBooks p bs b amounts id).1.charges id = none := by
  show (giveBackCharges p bs b.spent amounts (chOr (chFind b.charges id))).1 g +
      chargeIn g (chOr (chFind b.charges id)) = b.spent g ∧
    chFind (chErase b.charges id) id = none
  refine ⟨?_, chFind_chErase_self b.charges id⟩
  cases hf : chFind b.charges id with
  | none =>
    show b.spent g + 0 = b.spent g
    omega
  | some cs =>
    have hle : ∀ y, chargeIn y cs ≤ b.spent y := by
      intro y
      have e := reserved_erase_found y id cs b.charges hu hf
      have c := hcov y
      omega
    exact giveBackCharges_exact p bs cs b.spent amounts hle g

theorem refund_balanced (p : Policy) (bs : List Budget) (b : Books) (amounts : AmountPool)
    (id : String) (hu : ChUniq b.charges) (hcov : Covered b) (g : Nat) :
    BalancedAt b (refundBooks p bs b amounts id).1 [] g := by
  have hx := (refundBooks_exact p bs b amounts id hu hcov g).1
  show (refundBooks p bs b amounts id).1.spent g + reservedIn g b.charges =
    b.spent g + reservedIn g (chErase b.charges id) + 0
  cases hf : chFind b.charges id with
  | none =>
    rw [hf] at hx
    have e1 : reservedIn g (chErase b.charges id) = reservedIn g b.charges := by
      rw [chErase_of_none id b.charges hf]
    have e2 : chargeIn g (chOr none) = 0 := rfl
    omega
  | some cs =>
    rw [hf] at hx
    have e1 := reserved_erase_found g id cs b.charges hu hf
    have e2 : chargeIn g (chOr (some cs)) = chargeIn g cs := rfl
    omega

theorem keep_balanced (b : Books) (id : String) (hu : ChUniq b.charges) (g : Nat) :
    BalancedAt b (keepBooks b id) (chOr (chFind b.charges id)) g := by
  show b.spent g + reservedIn g b.charges =
    b.spent g + reservedIn g (chErase b.charges id) + chargeIn g (chOr (chFind b.charges id))
  cases hf : chFind b.charges id with
  | none =>
    have e1 : reservedIn g (chErase b.charges id) = reservedIn g b.charges := by
      rw [chErase_of_none id b.charges hf]
    have e2 : chargeIn g (chOr none) = 0 := rfl
    omega
  | some cs =>
    have e1 := reserved_erase_found g id cs b.charges hu hf
    have e2 : chargeIn g (chOr (some cs)) = chargeIn g cs := rfl
    omega

theorem stepCallBooks_balance (p : Policy) (bs : List Budget) (s : State) (b : Books)
    (pool : SharedCounts) (amounts : AmountPool) (id : String) (req : Request) (ch : Checks)
    (hf : chFind b.charges id = none) (g : Nat) :
    BalancedAt b (stepCallBooks p bs s b pool amounts id req ch).books [] g := by
  have key : ∀ (nb : Bool), BalancedAt b (afterAdmitBooks p s b pool amounts id nb
      (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).books [] g := by
    intro nb
    cases ha : admitBudgeted p bs (purseOf s b pool amounts) req s.sets with
    | error e => exact balancedAt_refl b g
    | ok r =>
      have h1 := admitChainBudgeted_spent p bs req s.sets (p.agentChain req.agent)
        (purseOf s b pool amounts) r ha g
      have h2 := reserved_record g b.charges id hf r.2.1
      have h3 : (purseOf s b pool amounts).spent g = b.spent g := rfl
      show r.2.2.spent g + reservedIn g b.charges =
        b.spent g + reservedIn g (recordCharges b.charges id r.2.1) + 0
      omega
  cases ch with
  | deny => exact balancedAt_refl b g
  | pass => exact key false
  | pause => exact key true

/-- **stepBooks_balance.** One step balances every grant's books: an
admitted call reserves exactly what it spends, a refund gives back exactly
what it drops, a success or unknown outcome moves its charges from reserved
to kept, and nothing else changes. -/
theorem stepBooks_balance (p : Policy) (bs : List Budget) (s : State) (b : Books)
    (pool : SharedCounts) (amounts : AmountPool) (e : Event) (ch : Checks) (hok : BooksOk s b)
    (hcov : Covered b) (g : Nat) :
    BalancedAt b (stepBooks p bs s b pool amounts e ch).books (keptCharges s b e) g := by
  cases e with
  | call id req =>
    show BalancedAt b
      (guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req ch)).books
      [] g
    cases hh : isHeld s id with
    | true =>
      rw [guardFreshBooks_held s b pool amounts id _ hh]
      exact balancedAt_refl b g
    | false =>
      rw [guardFreshBooks_fresh s b pool amounts id _ hh]
      exact stepCallBooks_balance p bs s b pool amounts id req ch (hok.2 id hh) g
  | approve id =>
    show BalancedAt b (approveBooks p bs b amounts id ch (mapFind s.paused id)).1 [] g
    cases mapFind s.paused id with
    | none => exact balancedAt_refl b g
    | some used =>
      cases ch with
      | deny => exact refund_balanced p bs b amounts id hok.1 hcov g
      | pass => exact balancedAt_refl b g
      | pause => exact balancedAt_refl b g
  | reject id =>
    show BalancedAt b (refundIfFound p bs b amounts id (mapFind s.paused id)).1 [] g
    cases mapFind s.paused id with
    | none => exact balancedAt_refl b g
    | some used => exact refund_balanced p bs b amounts id hok.1 hcov g
  | succeeded id ds =>
    show BalancedAt b (keepIfFound b amounts id (mapFind s.running id)).1
      (optElim (mapFind s.running id) [] (fun _ => chOr (chFind b.charges id))) g
    cases mapFind s.running id with
    | none => exact balancedAt_refl b g
    | some used => exact keep_balanced b id hok.1 g
  | failed id =>
    show BalancedAt b (refundIfFound p bs b amounts id (mapFind s.running id)).1 [] g
    cases mapFind s.running id with
    | none => exact balancedAt_refl b g
    | some used => exact refund_balanced p bs b amounts id hok.1 hcov g
  | unknown id =>
    show BalancedAt b (keepIfFound b amounts id (mapFind s.running id)).1
      (optElim (mapFind s.running id) [] (fun _ => chOr (chFind b.charges id))) g
    cases mapFind s.running id with
    | none => exact balancedAt_refl b g
    | some used => exact keep_balanced b id hok.1 g
  | seed k vs => exact balancedAt_refl b g

/-! ## Per-session budgets stay within their amount -/

theorem refundBooks_within (p : Policy) (bs : List Budget) (b : Books) (amounts : AmountPool)
    (id : String) (hw : SessionWithin bs b.spent) :
    SessionWithin bs (refundBooks p bs b amounts id).1.spent :=
  within_of_le bs b.spent (refundBooks p bs b amounts id).1.spent
    (fun g => giveBackCharges_le p bs (chOr (chFind b.charges id)) b.spent amounts g) hw

/-- **stepBooks_within.** One step keeps every per-session budget within
its amount. -/
theorem stepBooks_within (p : Policy) (bs : List Budget) (s : State) (b : Books)
    (pool : SharedCounts) (amounts : AmountPool) (e : Event) (ch : Checks)
    (hw : SessionWithin bs b.spent) :
    SessionWithin bs (stepBooks p bs s b pool amounts e ch).books.spent := by
  cases e with
  | call id req =>
    show SessionWithin bs
      (guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req ch)).books.spent
    cases hh : isHeld s id with
    | true =>
      rw [guardFreshBooks_held s b pool amounts id _ hh]
      exact hw
    | false =>
      rw [guardFreshBooks_fresh s b pool amounts id _ hh]
      have key : ∀ (nb : Bool), SessionWithin bs (afterAdmitBooks p s b pool amounts id nb
          (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).books.spent := by
        intro nb
        cases ha : admitBudgeted p bs (purseOf s b pool amounts) req s.sets with
        | error e => exact hw
        | ok r =>
          exact admitChainBudgeted_within p bs req s.sets (p.agentChain req.agent)
            (purseOf s b pool amounts) r ha hw
      cases ch with
      | deny => exact hw
      | pass => exact key false
      | pause => exact key true
  | approve id =>
    show SessionWithin bs (approveBooks p bs b amounts id ch (mapFind s.paused id)).1.spent
    cases mapFind s.paused id with
    | none => exact hw
    | some used =>
      cases ch with
      | deny => exact refundBooks_within p bs b amounts id hw
      | pass => exact hw
      | pause => exact hw
  | reject id =>
    show SessionWithin bs (refundIfFound p bs b amounts id (mapFind s.paused id)).1.spent
    cases mapFind s.paused id with
    | none => exact hw
    | some used => exact refundBooks_within p bs b amounts id hw
  | succeeded id ds =>
    show SessionWithin bs (keepIfFound b amounts id (mapFind s.running id)).1.spent
    cases mapFind s.running id with
    | none => exact hw
    | some used => exact hw
  | failed id =>
    show SessionWithin bs (refundIfFound p bs b amounts id (mapFind s.running id)).1.spent
    cases mapFind s.running id with
    | none => exact hw
    | some used => exact refundBooks_within p bs b amounts id hw
  | unknown id =>
    show SessionWithin bs (keepIfFound b amounts id (mapFind s.running id)).1.spent
    cases mapFind s.running id with
    | none => exact hw
    | some used => exact hw
  | seed k vs => exact hw

/-! ## Tenant budgets: the pool's amounts stay within the budget -/

/-- A tenant budget's grant has a name no other grant with a tenant budget
has (`validate.rs` refuses a `per tenant` budget whose grant's name another
grant has: the pool counts it by name). -/
def TenantNamesDistinct (p : Policy) (bs : List Budget) : Prop :=
  ∀ (g x : Nat), isTenantBudget bs g = true → isTenantBudget bs x = true →
    grantName p g = grantName p x → g = x

/-- Every tenant budget's amount in the pool is at most the budget. -/
def PoolWithinBudgets (p : Policy) (bs : List Budget) (amounts : AmountPool) : Prop :=
  ∀ (g : Nat) (b : Budget), budgetOf bs g = some b → b.perTenant = true →
    amounts.spent (grantName p g) ≤ b.amount

theorem isTenant_of (bs : List Budget) (g : Nat) (b : Budget) (hb : budgetOf bs g = some b)
    (hpt : b.perTenant = true) : isTenantBudget bs g = true := by
  unfold isTenantBudget
  rw [hb]
  exact hpt

/-- What is left of a tenant budget is its amount less what the tenant's
sessions hold (the pool). -/
theorem left_tenant (p : Policy) (b : Budget) (spent : Nat → Nat) (amounts : AmountPool)
    (g : Nat) (hpt : b.perTenant = true) :
    budgetLeft p b spent amounts g = b.amount - amounts.spent (grantName p g) := by
  show b.amount - (if b.perTenant = true then amounts.spent (grantName p g) else spent g) =
    b.amount - amounts.spent (grantName p g)
  rw [if_pos hpt]

theorem spend_amounts_notTenant (p : Policy) (bs : List Budget) (spent : Nat → Nat)
    (amounts : AmountPool) (x a : Nat) (ht : isTenantBudget bs x = false) :
    (spendAmount p bs spent amounts x a).2 = amounts := by
  show (if isTenantBudget bs x = true then amounts.add (grantName p x) a else amounts) = amounts
  rw [ht] <;> rfl

theorem spend_amounts_tenant (p : Policy) (bs : List Budget) (spent : Nat → Nat)
    (amounts : AmountPool) (x a : Nat) (ht : isTenantBudget bs x = true) (n : String) :
    (spendAmount p bs spent amounts x a).2.spent n =
      (if n = grantName p x then amounts.spent n + a else amounts.spent n) := by
  show (if isTenantBudget bs x = true then amounts.add (grantName p x) a else amounts).spent n =
    (if n = grantName p x then amounts.spent n + a else amounts.spent n)
  rw [ht] <;> rfl

/-- One agent's turn of admission keeps every tenant budget's pool amount
within the budget: the amount goes to the pool only when it fits what the
pool leaves. -/
theorem takeBudgeted_pool (p : Policy) (bs : List Budget) (hd : TenantNamesDistinct p bs)
    (pu : Purse) (x : Nat) (oa : Option Nat) (req : Request)
    (hc : budgetCheck p bs pu.spent pu.amounts x req = some oa)
    (hw : PoolWithinBudgets p bs pu.amounts) :
    PoolWithinBudgets p bs (takeBudgeted p bs pu x oa).amounts := by
  intro g b hb hpt
  cases oa with
  | none => exact hw g b hb hpt
  | some a =>
    have e0 : (takeBudgeted p bs pu x (some a)).amounts =
        (spendAmount p bs pu.spent pu.amounts x a).2 := rfl
    rw [e0]
    cases ht : isTenantBudget bs x with
    | false =>
      rw [spend_amounts_notTenant p bs pu.spent pu.amounts x a ht]
      exact hw g b hb hpt
    | true =>
      rw [spend_amounts_tenant p bs pu.spent pu.amounts x a ht (grantName p g)]
      by_cases hn : grantName p g = grantName p x
      · rw [if_pos hn]
        have hgx : g = x := hd g x (isTenant_of bs g b hb hpt) ht hn
        obtain ⟨b0, hb0, hle⟩ := budgetCheck_some p bs pu.spent pu.amounts x req a hc
        rw [← hgx] at hb0 hle
        rw [hb] at hb0
        have hbb : b = b0 := Option.some.inj hb0
        rw [← hbb] at hle
        rw [left_tenant p b pu.spent pu.amounts g hpt] at hle
        have h0 := hw g b hb hpt
        omega
      · rw [if_neg hn]
        exact hw g b hb hpt

theorem admitChainBudgeted_pool (p : Policy) (bs : List Budget) (hd : TenantNamesDistinct p bs)
    (req : Request) (sets : List (List String)) :
    ∀ (chain : List Nat) (pu : Purse) (r : List Nat × Charges × Purse),
      admitChainBudgeted p bs req sets pu chain = .ok r →
      PoolWithinBudgets p bs pu.amounts → PoolWithinBudgets p bs r.2.2.amounts := by
  intro chain
  induction chain with
  | nil =>
    intro pu r h hw
    have h2 : (Except.ok ([], [], pu) : Except Nat (List Nat × Charges × Purse)) =
        Except.ok r := h
    cases h2
    exact hw
  | cons agent rest ih =>
    intro pu r h hw
    have h2 : optElim (selectBudgeted p bs pu agent req sets) (Except.error agent)
        (fun ga => consAdmit ga.1 ga.2
          (admitChainBudgeted p bs req sets (takeBudgeted p bs pu ga.1 ga.2) rest)) =
        Except.ok r := h
    cases hs : selectBudgeted p bs pu agent req sets with
    | none =>
      rw [hs] at h2
      have h3 : (Except.error agent : Except Nat (List Nat × Charges × Purse)) = Except.ok r := h2
      cases h3
    | some ga =>
      obtain ⟨x, oa⟩ := ga
      rw [hs] at h2
      have h3 : consAdmit x oa
          (admitChainBudgeted p bs req sets (takeBudgeted p bs pu x oa) rest) = Except.ok r := h2
      have hc : budgetCheck p bs pu.spent pu.amounts x req = some oa :=
        selectFromBudgeted_check p bs pu agent req sets p.grants 0 x oa hs
      have hw2 := takeBudgeted_pool p bs hd pu x oa req hc hw
      cases hr : admitChainBudgeted p bs req sets (takeBudgeted p bs pu x oa) rest with
      | error e =>
        rw [hr] at h3
        have h4 : (Except.error e : Except Nat (List Nat × Charges × Purse)) = Except.ok r := h3
        cases h4
      | ok r' =>
        rw [hr] at h3
        have h4 : (Except.ok (x :: r'.1, chargeCons x oa r'.2.1, r'.2.2) :
            Except Nat (List Nat × Charges × Purse)) = Except.ok r := h3
        cases h4
        exact ih (takeBudgeted p bs pu x oa) r' hr hw2

/-- Giving back never raises the pool's amount of any name. -/
theorem giveBackCharges_amounts_le (p : Policy) (bs : List Budget) : ∀ (cs : Charges)
    (spent : Nat → Nat) (amounts : AmountPool) (n : String),
    (giveBackCharges p bs spent amounts cs).2.spent n ≤ amounts.spent n := by
  intro cs
  induction cs with
  | nil =>
    intro spent amounts n
    exact Nat.le_refl (amounts.spent n)
  | cons c cs ih =>
    obtain ⟨x, a⟩ := c
    intro spent amounts n
    rw [giveBackCharges_cons]
    have h1 := ih (subAt spent x (backOf a (spent x)))
      (if isTenantBudget bs x then amounts.remove (grantName p x) (backOf a (spent x))
       else amounts) n
    have h2 : (if isTenantBudget bs x then amounts.remove (grantName p x) (backOf a (spent x))
        else amounts).spent n ≤ amounts.spent n := by
      cases isTenantBudget bs x with
      | false => exact Nat.le_refl (amounts.spent n)
      | true =>
        show (if n = grantName p x then amounts.spent n - backOf a (spent x)
          else amounts.spent n) ≤ amounts.spent n
        by_cases hn : n = grantName p x
        · rw [if_pos hn]
          omega
        · rw [if_neg hn] <;> omega
    exact Nat.le_trans h1 h2

theorem refundBooks_pool (p : Policy) (bs : List Budget) (b : Books) (amounts : AmountPool)
    (id : String) (hw : PoolWithinBudgets p bs amounts) :
    PoolWithinBudgets p bs (refundBooks p bs b amounts id).2 :=
  fun g bud hb hpt => Nat.le_trans
    (giveBackCharges_amounts_le p bs (chOr (chFind b.charges id)) b.spent amounts (grantName p g))
    (hw g bud hb hpt)

/-- **stepBooks_pool.** One step of any session, in any state, keeps every
tenant budget's pool amount within the budget. -/
theorem stepBooks_pool (p : Policy) (bs : List Budget) (hd : TenantNamesDistinct p bs)
    (s : State) (b : Books) (pool : SharedCounts) (amounts : AmountPool) (e : Event)
    (ch : Checks) (hw : PoolWithinBudgets p bs amounts) :
    PoolWithinBudgets p bs (stepBooks p bs s b pool amounts e ch).amounts := by
  cases e with
  | call id req =>
    show PoolWithinBudgets p bs
      (guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req ch)).amounts
    cases hh : isHeld s id with
    | true =>
      rw [guardFreshBooks_held s b pool amounts id _ hh]
      exact hw
    | false =>
      rw [guardFreshBooks_fresh s b pool amounts id _ hh]
      have key : ∀ (nb : Bool), PoolWithinBudgets p bs (afterAdmitBooks p s b pool amounts id nb
          (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).amounts := by
        intro nb
        cases ha : admitBudgeted p bs (purseOf s b pool amounts) req s.sets with
        | error e => exact hw
        | ok r =>
          exact admitChainBudgeted_pool p bs hd req s.sets (p.agentChain req.agent)
            (purseOf s b pool amounts) r ha hw
      cases ch with
      | deny => exact hw
      | pass => exact key false
      | pause => exact key true
  | approve id =>
    show PoolWithinBudgets p bs (approveBooks p bs b amounts id ch (mapFind s.paused id)).2
    cases mapFind s.paused id with
    | none => exact hw
    | some used =>
      cases ch with
      | deny => exact refundBooks_pool p bs b amounts id hw
      | pass => exact hw
      | pause => exact hw
  | reject id =>
    show PoolWithinBudgets p bs (refundIfFound p bs b amounts id (mapFind s.paused id)).2
    cases mapFind s.paused id with
    | none => exact hw
    | some used => exact refundBooks_pool p bs b amounts id hw
  | succeeded id ds =>
    show PoolWithinBudgets p bs (keepIfFound b amounts id (mapFind s.running id)).2
    cases mapFind s.running id with
    | none => exact hw
    | some used => exact hw
  | failed id =>
    show PoolWithinBudgets p bs (refundIfFound p bs b amounts id (mapFind s.running id)).2
    cases mapFind s.running id with
    | none => exact hw
    | some used => exact refundBooks_pool p bs b amounts id hw
  | unknown id =>
    show PoolWithinBudgets p bs (keepIfFound b amounts id (mapFind s.running id)).2
    cases mapFind s.running id with
    | none => exact hw
    | some used => exact hw
  | seed k vs => exact hw

/-- One step of a tenant's sessions against the pool: some session, in
whatever state and with whatever books, takes one event. Every
interleaving of the tenant's sessions is a list of these (and so are many
lists no real interleaving gives: the theorem below holds for all). -/
abbrev TenantStep := State × Books × Event × Checks

/-- The pool (units, amounts) after a tenant's steps. -/
def runTenantBooks (p : Policy) (bs : List Budget) :
    SharedCounts → AmountPool → List TenantStep → SharedCounts × AmountPool
  | u, a, [] => (u, a)
  | u, a, x :: rest =>
    runTenantBooks p bs (stepBooks p bs x.1 x.2.1 u a x.2.2.1 x.2.2.2).pool
      (stepBooks p bs x.1 x.2.1 u a x.2.2.1 x.2.2.2).amounts rest

theorem runTenantBooks_pool (p : Policy) (bs : List Budget) (hd : TenantNamesDistinct p bs) :
    ∀ (w : List TenantStep) (u : SharedCounts) (a : AmountPool),
      PoolWithinBudgets p bs a → PoolWithinBudgets p bs (runTenantBooks p bs u a w).2 := by
  intro w
  induction w with
  | nil =>
    intro u a h
    exact h
  | cons x rest ih =>
    intro u a h
    exact ih (stepBooks p bs x.1 x.2.1 u a x.2.2.1 x.2.2.2).pool
      (stepBooks p bs x.1 x.2.1 u a x.2.2.1 x.2.2.2).amounts
      (stepBooks_pool p bs hd x.1 x.2.1 u a x.2.2.1 x.2.2.2 h)

/-- **tenant_budget_never_exceeded.** Across any steps of a tenant's
sessions against one pool, from the empty pool, the amount the pool counts
for a tenant budget (`per tenant`) never exceeds the budget.

Rules out: "a tenant budget is checked per session" (two sessions each
spending 3 of a budget of 5 would leave 6 in the pool); "a refund adds to
the pool". What it does not say: that the pool's amount is the sum of what
the sessions hold (the analogue of `pool_taken_eq_sum_held` for amounts is
not proved); with that sum, it is "the tenant's sessions never hold more
than the budget", which is property-tested
(`tenant_budgets_across_sessions_agree_and_never_overspend`). -/
theorem tenant_budget_never_exceeded (p : Policy) (bs : List Budget)
    (hd : TenantNamesDistinct p bs) (w : List TenantStep) (u : SharedCounts) (g : Nat)
    (b : Budget) (hb : budgetOf bs g = some b) (hpt : b.perTenant = true) :
    (runTenantBooks p bs u AmountPool.empty w).2.spent (grantName p g) ≤ b.amount :=
  runTenantBooks_pool p bs hd w u AmountPool.empty
    (fun _ _ _ _ => by show (0 : Nat) ≤ _; omega) g b hb hpt

/-! ## Whole sessions -/

/-- One event of a session with the tenant pool it sees (units and amounts):
any interleaving with the tenant's other sessions gives each step of this
session some pool. -/
abbrev BooksEvent := Event × Checks × SharedCounts × AmountPool

/-- `stepBooks` on one event with the pool it carries. -/
def stepOf (p : Policy) (bs : List Budget) (s : State) (b : Books) (x : BooksEvent) : BooksStep :=
  stepBooks p bs s b x.2.2.1 x.2.2.2 x.1 x.2.1

/-- Runs a session's events through `stepBooks`: the state and books after. -/
def runBooks (p : Policy) (bs : List Budget) : State → Books → List BooksEvent → State × Books
  | s, b, [] => (s, b)
  | s, b, x :: rest => runBooks p bs (stepOf p bs s b x).state (stepOf p bs s b x).books rest

/-- The amount of grant `g`'s budget kept for good by the events `w` run from
`(s, b)`: for each `succeeded` or `unknown` event that ends a running call,
the charges of `g` that call held. -/
def keptAmount (p : Policy) (bs : List Budget) (g : Nat) : State → Books → List BooksEvent → Nat
  | _, _, [] => 0
  | s, b, x :: rest =>
    chargeIn g (keptCharges s b x.1) +
      keptAmount p bs g (stepOf p bs s b x).state (stepOf p bs s b x).books rest

theorem runBooks_ok (p : Policy) (bs : List Budget) : ∀ (w : List BooksEvent) (s : State)
    (b : Books), BooksOk s b → BooksOk (runBooks p bs s b w).1 (runBooks p bs s b w).2 := by
  intro w
  induction w with
  | nil =>
    intro s b h
    exact h
  | cons x rest ih =>
    intro s b h
    exact ih (stepOf p bs s b x).state (stepOf p bs s b x).books
      (stepBooks_ok p bs s b x.2.2.1 x.2.2.2 x.1 x.2.1 h)

theorem runBooks_within (p : Policy) (bs : List Budget) : ∀ (w : List BooksEvent) (s : State)
    (b : Books), SessionWithin bs b.spent → SessionWithin bs (runBooks p bs s b w).2.spent := by
  intro w
  induction w with
  | nil =>
    intro s b h
    exact h
  | cons x rest ih =>
    intro s b h
    exact ih (stepOf p bs s b x).state (stepOf p bs s b x).books
      (stepBooks_within p bs s b x.2.2.1 x.2.2.2 x.1 x.2.1 h)

theorem runBooks_books (p : Policy) (bs : List Budget) :
    ∀ (w : List BooksEvent) (s : State) (b : Books) (K : Nat → Nat),
      BooksOk s b → (∀ y, b.spent y = reservedIn y b.charges + K y) →
      ∀ g, (runBooks p bs s b w).2.spent g =
        reservedIn g (runBooks p bs s b w).2.charges + K g + keptAmount p bs g s b w := by
  intro w
  induction w with
  | nil =>
    intro s b K _ h g
    have h1 := h g
    show b.spent g = reservedIn g b.charges + K g + 0
    omega
  | cons x rest ih =>
    intro s b K hok h g
    have hcov : Covered b := by
      intro y
      have h1 := h y
      omega
    have hbal : ∀ y, (stepOf p bs s b x).books.spent y =
        reservedIn y (stepOf p bs s b x).books.charges + (K y + chargeIn y (keptCharges s b x.1)) := by
      intro y
      have h1 := h y
      have h3 : (stepOf p bs s b x).books.spent y + reservedIn y b.charges =
          b.spent y + reservedIn y (stepOf p bs s b x).books.charges +
            chargeIn y (keptCharges s b x.1) :=
        stepBooks_balance p bs s b x.2.2.1 x.2.2.2 x.1 x.2.1 hok hcov y
      omega
    have h4 : (runBooks p bs (stepOf p bs s b x).state (stepOf p bs s b x).books rest).2.spent g =
        reservedIn g (runBooks p bs (stepOf p bs s b x).state (stepOf p bs s b x).books rest).2.charges +
          (K g + chargeIn g (keptCharges s b x.1)) +
          keptAmount p bs g (stepOf p bs s b x).state (stepOf p bs s b x).books rest :=
      ih (stepOf p bs s b x).state (stepOf p bs s b x).books
        (fun y => K y + chargeIn y (keptCharges s b x.1))
        (stepBooks_ok p bs s b x.2.2.1 x.2.2.2 x.1 x.2.1 hok) hbal g
    show (runBooks p bs (stepOf p bs s b x).state (stepOf p bs s b x).books rest).2.spent g =
      reservedIn g (runBooks p bs (stepOf p bs s b x).state (stepOf p bs s b x).books rest).2.charges +
        K g + (chargeIn g (keptCharges s b x.1) +
          keptAmount p bs g (stepOf p bs s b x).state (stepOf p bs s b x).books rest)
    omega

theorem initial_booksOk (p : Policy) : BooksOk (State.initial p) Books.initial :=
  ⟨True.intro, fun _ _ => rfl⟩

/-- **budget_books.** In every session, after any sequence of events from
the initial state (each step against whatever tenant pool it sees), for
every grant `g`: the amount the session holds of `g`'s budget is exactly
the amount reserved by its paused and running calls plus the amount kept
by its calls that succeeded or ended with an unknown outcome.

Rules out: "a success refunds" (the kept charge would leave `spent` while
`keptAmount` counts it: spent < reserved + kept); "a failure, rejection
or denied approval keeps the amount" (the charge would leave `reserved`
without leaving `spent`: spent > reserved + kept); "admission spends
without reserving, or reserves without spending" (one side moves without
the other); "a refund gives back more than the charge" (spent would fall
below reserved + kept). -/
theorem budget_books (p : Policy) (bs : List Budget) (w : List BooksEvent) (g : Nat) :
    (runBooks p bs (State.initial p) Books.initial w).2.spent g =
      reservedIn g (runBooks p bs (State.initial p) Books.initial w).2.charges +
        keptAmount p bs g (State.initial p) Books.initial w := by
  have h := runBooks_books p bs w (State.initial p) Books.initial (fun _ => 0)
    (initial_booksOk p) (fun _ => rfl) g
  have h2 : (runBooks p bs (State.initial p) Books.initial w).2.spent g =
      reservedIn g (runBooks p bs (State.initial p) Books.initial w).2.charges + 0 +
        keptAmount p bs g (State.initial p) Books.initial w := h
  omega

/-- **budget_within.** In every session, after any sequence of events from
the initial state, a per-session budget (not `per tenant`) of `amount`:
the session never holds more than `amount` of it (reserved and kept
together, by `budget_books`).

Rules out: "admission ignores the budget" (an amount spent beyond what is
left, from a grant whose budget cannot pay, would raise `spent` above the
amount); "the check reads a stale amount" (each agent of a delegation chain
is checked against what the previous ones already spent). -/
theorem budget_within (p : Policy) (bs : List Budget) (w : List BooksEvent) (g : Nat)
    (bud : Budget) (hb : budgetOf bs g = some bud) (hpt : bud.perTenant = false) :
    (runBooks p bs (State.initial p) Books.initial w).2.spent g ≤ bud.amount :=
  runBooks_within p bs w (State.initial p) Books.initial (fun _ _ _ _ => by show (0 : Nat) ≤ _; omega) g bud hb hpt

/-- **budget_accounting.** The accounting theorem for amounts, in one:
reserved + kept = spent ≤ budget, per grant with a per-session budget. -/
theorem budget_accounting (p : Policy) (bs : List Budget) (w : List BooksEvent) (g : Nat)
    (bud : Budget) (hb : budgetOf bs g = some bud) (hpt : bud.perTenant = false) :
    reservedIn g (runBooks p bs (State.initial p) Books.initial w).2.charges +
        keptAmount p bs g (State.initial p) Books.initial w =
      (runBooks p bs (State.initial p) Books.initial w).2.spent g ∧
    (runBooks p bs (State.initial p) Books.initial w).2.spent g ≤ bud.amount :=
  ⟨(budget_books p bs w g).symm, budget_within p bs w g bud hb hpt⟩

/-! ## Denials and refunds -/

/-- **budget_deny_reserves_nothing.** A denied call (by the checks, for lack
of a grant whose quota and budget can serve it, anywhere on the delegation
chain) leaves the state, the books and the tenant's pool amounts unchanged:
it reserves nothing.

Rules out: "a denial reserves" (a chain admitted part-way, or a budget
charged before a later agent's refusal, would change `books`). -/
theorem budget_deny_reserves_nothing (p : Policy) (bs : List Budget) (s : State) (b : Books)
    (pool : SharedCounts) (amounts : AmountPool) (id : String) (req : Request) (ch : Checks)
    (h : (stepBooks p bs s b pool amounts (.call id req) ch).outcome = .deny) :
    (stepBooks p bs s b pool amounts (.call id req) ch).books = b ∧
      (stepBooks p bs s b pool amounts (.call id req) ch).amounts = amounts ∧
      (stepBooks p bs s b pool amounts (.call id req) ch).state = s := by
  have h0 : (guardFreshBooks s b pool amounts id
      (stepCallBooks p bs s b pool amounts id req ch)).outcome = .deny := h
  show (guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req ch)).books = b ∧
    (guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req ch)).amounts =
      amounts ∧
    (guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req ch)).state = s
  cases hh : isHeld s id with
  | true =>
    rw [guardFreshBooks_held s b pool amounts id _ hh] at h0
    have h1 : Outcome.invalid = Outcome.deny := h0
    cases h1
  | false =>
    rw [guardFreshBooks_fresh s b pool amounts id _ hh] at h0
    rw [guardFreshBooks_fresh s b pool amounts id _ hh]
    have key : ∀ (nb : Bool), (afterAdmitBooks p s b pool amounts id nb
        (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).outcome = .deny →
        (afterAdmitBooks p s b pool amounts id nb
          (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).books = b ∧
        (afterAdmitBooks p s b pool amounts id nb
          (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).amounts = amounts ∧
        (afterAdmitBooks p s b pool amounts id nb
          (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)).state = s := by
      intro nb hd
      cases ha : admitBudgeted p bs (purseOf s b pool amounts) req s.sets with
      | error e => exact ⟨rfl, rfl, rfl⟩
      | ok r =>
        rw [ha] at hd
        exact absurd hd (stepAdmitted_ne_deny p s id r.1 r.2.2.ledger nb)
    cases ch with
    | deny => exact ⟨rfl, rfl, rfl⟩
    | pass => exact key false h0
    | pause => exact key true h0

/-- The books and the pool amounts reached from the initial state are well
kept and cover every reservation. -/
theorem reachable_books (p : Policy) (bs : List Budget) (w : List BooksEvent) :
    BooksOk (runBooks p bs (State.initial p) Books.initial w).1
        (runBooks p bs (State.initial p) Books.initial w).2 ∧
      Covered (runBooks p bs (State.initial p) Books.initial w).2 := by
  refine ⟨runBooks_ok p bs w (State.initial p) Books.initial (initial_booksOk p), ?_⟩
  intro y
  have h := budget_books p bs w y
  omega

/-- **budget_refund_returns_charge.** After any run from the initial state,
a failure of a running call gives back exactly the charges it held, of
every budget, and drops them.

Rules out: "a refund returns less (or more) than the charge" (e.g. what is
left after a `min` with a stale holding, or the charge twice); "a refund
leaves the charge reserved". -/
theorem budget_refund_returns_charge (p : Policy) (bs : List Budget) (w : List BooksEvent)
    (pool : SharedCounts) (amounts : AmountPool) (id : String) (used : List Nat) (ch : Checks)
    (hf : mapFind (runBooks p bs (State.initial p) Books.initial w).1.running id = some used)
    (g : Nat) :
    (stepBooks p bs (runBooks p bs (State.initial p) Books.initial w).1
        (runBooks p bs (State.initial p) Books.initial w).2 pool amounts (.failed id) ch).books.spent g +
      chargeIn g (chOr (chFind (runBooks p bs (State.initial p) Books.initial w).2.charges id)) =
      (runBooks p bs (State.initial p) Books.initial w).2.spent g ∧
    chFind (stepBooks p bs (runBooks p bs (State.initial p) Books.initial w).1
        (runBooks p bs (State.initial p) Books.initial w).2 pool amounts (.failed id) ch).books.charges
      id = none := by
  have hr := reachable_books p bs w
  show (refundIfFound p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id
        (mapFind (runBooks p bs (State.initial p) Books.initial w).1.running id)).1.spent g +
      chargeIn g (chOr (chFind (runBooks p bs (State.initial p) Books.initial w).2.charges id)) =
      (runBooks p bs (State.initial p) Books.initial w).2.spent g ∧
    chFind (refundIfFound p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id
        (mapFind (runBooks p bs (State.initial p) Books.initial w).1.running id)).1.charges id = none
  rw [hf]
  exact refundBooks_exact p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id
    hr.1.1 hr.2 g

/-- **budget_reject_returns_charge.** A rejection of a paused call (and an
expired pause, which the gateway turns into a rejection) gives back exactly
its charges and drops them. Rules out the same as
`budget_refund_returns_charge`, for reservations made by a pause. -/
theorem budget_reject_returns_charge (p : Policy) (bs : List Budget) (w : List BooksEvent)
    (pool : SharedCounts) (amounts : AmountPool) (id : String) (used : List Nat) (ch : Checks)
    (hf : mapFind (runBooks p bs (State.initial p) Books.initial w).1.paused id = some used)
    (g : Nat) :
    (stepBooks p bs (runBooks p bs (State.initial p) Books.initial w).1
        (runBooks p bs (State.initial p) Books.initial w).2 pool amounts (.reject id) ch).books.spent g +
      chargeIn g (chOr (chFind (runBooks p bs (State.initial p) Books.initial w).2.charges id)) =
      (runBooks p bs (State.initial p) Books.initial w).2.spent g ∧
    chFind (stepBooks p bs (runBooks p bs (State.initial p) Books.initial w).1
        (runBooks p bs (State.initial p) Books.initial w).2 pool amounts (.reject id) ch).books.charges
      id = none := by
  have hr := reachable_books p bs w
  show (refundIfFound p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id
        (mapFind (runBooks p bs (State.initial p) Books.initial w).1.paused id)).1.spent g +
      chargeIn g (chOr (chFind (runBooks p bs (State.initial p) Books.initial w).2.charges id)) =
      (runBooks p bs (State.initial p) Books.initial w).2.spent g ∧
    chFind (refundIfFound p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id
        (mapFind (runBooks p bs (State.initial p) Books.initial w).1.paused id)).1.charges id = none
  rw [hf]
  exact refundBooks_exact p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id
    hr.1.1 hr.2 g

/-- **budget_denied_approval_returns_charge.** An approval whose
just-in-time re-check denies gives back exactly the paused call's charges
and drops them: a denied approval reserves nothing. Rules out "a denied
approval keeps the reservation" (the charge would stay in `charges` and in
`spent`). -/
theorem budget_denied_approval_returns_charge (p : Policy) (bs : List Budget)
    (w : List BooksEvent) (pool : SharedCounts) (amounts : AmountPool) (id : String)
    (used : List Nat)
    (hf : mapFind (runBooks p bs (State.initial p) Books.initial w).1.paused id = some used)
    (g : Nat) :
    (stepBooks p bs (runBooks p bs (State.initial p) Books.initial w).1
        (runBooks p bs (State.initial p) Books.initial w).2 pool amounts (.approve id) .deny).books.spent g +
      chargeIn g (chOr (chFind (runBooks p bs (State.initial p) Books.initial w).2.charges id)) =
      (runBooks p bs (State.initial p) Books.initial w).2.spent g ∧
    chFind (stepBooks p bs (runBooks p bs (State.initial p) Books.initial w).1
        (runBooks p bs (State.initial p) Books.initial w).2 pool amounts (.approve id) .deny).books.charges
      id = none := by
  have hr := reachable_books p bs w
  show (approveBooks p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id .deny
        (mapFind (runBooks p bs (State.initial p) Books.initial w).1.paused id)).1.spent g +
      chargeIn g (chOr (chFind (runBooks p bs (State.initial p) Books.initial w).2.charges id)) =
      (runBooks p bs (State.initial p) Books.initial w).2.spent g ∧
    chFind (approveBooks p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id .deny
        (mapFind (runBooks p bs (State.initial p) Books.initial w).1.paused id)).1.charges id = none
  rw [hf]
  exact refundBooks_exact p bs (runBooks p bs (State.initial p) Books.initial w).2 amounts id
    hr.1.1 hr.2 g

end Agenra
