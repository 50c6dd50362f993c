/-
Agenra.Budget: amount budgets (`budget AMOUNT on PARAM`, issue 30), the
amount bookkeeping that `rust/core/src/spec/mod.rs` carries beside the unit
ledger (`Books`, `step_books`, `select_budgeted`, `admit_budgeted`,
`budget_check`, `spend`, `give_back_charges`), mirrored definition by
definition on top of `Agenra.Ledger`'s `stepIn` (the unit semantics, which
stays as it is: `step`, `stepIn` and their theorems are untouched).

**Amounts are naturals.** A Rust `Decimal` has at most 18 digits after the
point (`decimal.rs`, `MAX_SCALE`), so every amount a budget can be charged
(a decimal that is not negative) is exactly the natural number
`mantissa · 10^(18 − scale)`: the amount counted in units of `10⁻¹⁸`
(`Decimal.toAmount`). Budgets (`Budget.amount`) are given in the same
units. Exact: comparing, adding and subtracting such naturals is comparing,
adding and subtracting the decimals, which is what Rust does (`checked_add`,
`saturating_sub`, `cmp`) as long as no `i128` overflows (Rust's 20-digit
bound; the model has no bound).

Where this model is simpler than the Rust code (also in `docs/lean.md`,
"Amount budgets"):
* `Books.spent` and `AmountPool.spent` are functions (Rust: maps that drop
  an entry at 0; a function cannot tell an absent entry from 0, and Rust
  never tells them apart either: `unwrap_or_default`).
* `budgetOf` takes the first budget of the grant in the list (Rust: a
  binary search in budgets sorted by grant, one per grant, `validate.rs`).
* Why a grant's budget does not serve (`BudgetRefusal::Missing`,
  `Negative`, `Exceeds`) is one answer here: `budgetCheck` is `none`.
* Out-of-range grant indexes read the name `""` (`grantName`); Rust
  indexes `policy.grants[g]` (in range: `g` comes from selection).

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger

namespace Agenra

/-! ## Amounts -/

/-- Digits after the point at which amounts are counted: Rust's
`MAX_SCALE` (`decimal.rs`), the most a `Decimal` has. -/
def amountScale : Nat := 18

/-- A decimal as an amount: `mantissa · 10^(18 − scale)` units of `10⁻¹⁸`;
`none` when it is negative (`BudgetRefusal::Negative`) or has more than 18
digits after the point (Rust's decimals never do). -/
def Decimal.toAmount (d : Decimal) : Option Nat :=
  if d.mantissa < 0 then none
  else if amountScale < d.scale then none
  else some (d.mantissa.toNat * 10 ^ (amountScale - d.scale))

/-- `Budget` (`policy.rs`): grant `grant` spends the value of its tool's
parameter `param` from a budget of `amount` (in units of `10⁻¹⁸`), per
session or, with `perTenant`, shared by the tenant's sessions (kept in the
tenant's pool under the grant's name). -/
structure Budget where
  grant : Nat
  amount : Nat
  param : Nat
  perTenant : Bool := false
  deriving Repr

/-- `Policy::budget_of`: the budget of grant `g`, if it has one. -/
def budgetOf : List Budget → Nat → Option Budget
  | [], _ => none
  | b :: bs, g => if b.grant = g then some b else budgetOf bs g

/-- The amount a call spends of budget `b` (`charge_of`, without the
reason): the value of the budget's parameter, an integer or a decimal
(`Decimal::of_value`), as an amount; `none` when it is absent, not a
number or negative. -/
def chargeAmount (b : Budget) (req : Request) : Option Nat :=
  match getAt req.args b.param with
  | some v =>
    match v.asDecimal with
    | some d => d.toAmount
    | none => none
  | none => none

/-! ## Books -/

/-- What one call holds of budgets (`Charges`): `(grant, amount)` per
serving grant with a budget, in serving order. -/
abbrev Charges := List (Nat × Nat)

/-- The amounts a tenant's sessions hold of each tenant budget, by grant
name (the `spent` part of Rust's `SharedCounts`; the unit part is
`Agenra.SharedCounts`). -/
structure AmountPool where
  spent : String → Nat

/-- Nothing held (`SharedCounts::default`). -/
def AmountPool.empty : AmountPool := { spent := fun _ => 0 }

/-- `Books`: the amount this session holds of each budget (`spent`, by
grant index) and what each paused or running call holds (`charges`, by
call id; a call that spends from no budget has no entry). -/
structure Books where
  spent : Nat → Nat
  charges : List (String × Charges)

/-- `Books::default`: nothing held, no charges. -/
def Books.initial : Books := { spent := fun _ => 0, charges := [] }

/-- `charges.get(id)` (association list, as `mapFind`). -/
def chFind : List (String × Charges) → String → Option Charges
  | [], _ => none
  | (k, v) :: rest, key => if k == key then some v else chFind rest key

/-- `charges.remove(id)`: every entry for `key` erased (as `mapErase`). -/
def chErase : List (String × Charges) → String → List (String × Charges)
  | [], _ => []
  | (k, v) :: rest, key => if k == key then chErase rest key else (k, v) :: chErase rest key

/-- `charges.insert(id, cs)`: replaces any entry for `key`. -/
def chInsert (m : List (String × Charges)) (key : String) (v : Charges) :
    List (String × Charges) :=
  (key, v) :: chErase m key

/-- `unwrap_or_default` on a call's charges. -/
def chOr : Option Charges → Charges
  | some cs => cs
  | none => []

/-- `if !charges.is_empty() { b.charges.insert(id, charges) }`. -/
def recordCharges (m : List (String × Charges)) (id : String) : Charges →
    List (String × Charges)
  | [] => m
  | c :: cs => chInsert m id (c :: cs)

/-! ## Spending and giving back -/

/-- `f` with `a` added at `g`. -/
def addAt (f : Nat → Nat) (g a : Nat) : Nat → Nat :=
  fun x => if g = x then f x + a else f x

/-- `f` with `a` taken off at `g` (never below zero: `Nat` subtraction,
Rust's `saturating_sub`). -/
def subAt (f : Nat → Nat) (g a : Nat) : Nat → Nat :=
  fun x => if g = x then f x - a else f x

/-- `SharedCounts::add_spent` on the amounts. -/
def AmountPool.add (c : AmountPool) (name : String) (a : Nat) : AmountPool :=
  { spent := fun x => if x = name then c.spent x + a else c.spent x }

/-- `SharedCounts::remove_spent`: never below zero. -/
def AmountPool.remove (c : AmountPool) (name : String) (a : Nat) : AmountPool :=
  { spent := fun x => if x = name then c.spent x - a else c.spent x }

/-- `policy.budget_of(g).is_some_and(|b| b.per_tenant)`. -/
def isTenantBudget (bs : List Budget) (g : Nat) : Bool :=
  match budgetOf bs g with
  | some b => b.perTenant
  | none => false

/-- `budget_left`: what is left of budget `b` of grant `g`: its amount less
what this session holds (`spent g`), or, for a tenant budget, less what the
tenant's sessions hold (`amounts`, by the grant's name); never below zero. -/
def budgetLeft (p : Policy) (b : Budget) (spent : Nat → Nat) (amounts : AmountPool) (g : Nat) :
    Nat :=
  b.amount - (if b.perTenant then amounts.spent (grantName p g) else spent g)

/-- `budget_check`: `some none` for a grant without a budget (it serves as
before), `some (some a)` when the call's amount `a` is at most what is left,
`none` when the grant's budget cannot pay (the grant does not serve:
`BudgetRefusal`). -/
def budgetCheck (p : Policy) (bs : List Budget) (spent : Nat → Nat) (amounts : AmountPool)
    (g : Nat) (req : Request) : Option (Option Nat) :=
  optElim (budgetOf bs g) (some none) (fun b =>
    optElim (chargeAmount b req) none (fun a =>
      if a ≤ budgetLeft p b spent amounts g then some (some a) else none))

/-- `spend`: the session holds `a` more of grant `g`'s budget, and so does
the pool for a tenant budget (`add_held` adds nothing for `a = 0`, which is
the same function here). -/
def spendAmount (p : Policy) (bs : List Budget) (spent : Nat → Nat) (amounts : AmountPool)
    (g a : Nat) : (Nat → Nat) × AmountPool :=
  (addAt spent g a, if isTenantBudget bs g then amounts.add (grantName p g) a else amounts)

/-- `amount.min(held)`: what giving back a charge of `a` returns when the
session holds `held`. -/
def backOf (a held : Nat) : Nat :=
  if a ≤ held then a else held

/-- `give_back_charges`: for each charge `(g, a)`, in order, the session
holds `back = min a (spent g)` less of `g`'s budget, and so does the pool
for a tenant budget. -/
def giveBackCharges (p : Policy) (bs : List Budget) :
    (Nat → Nat) → AmountPool → Charges → (Nat → Nat) × AmountPool
  | spent, amounts, [] => (spent, amounts)
  | spent, amounts, (g, a) :: cs =>
    giveBackCharges p bs (subAt spent g (backOf a (spent g)))
      (if isTenantBudget bs g then amounts.remove (grantName p g) (backOf a (spent g))
       else amounts) cs

/-! ## Selection and admission with budgets -/

/-- What admission carries from one agent of the chain to the next: the
unit ledger and pool (`admit_in`'s `next`, `next_pool`) and the amounts
(`next_spent`, the amount part of `next_pool`). -/
structure Purse where
  ledger : Ledger
  pool : SharedCounts
  spent : Nat → Nat
  amounts : AmountPool

/-- The search of `select_budgeted`, from grant index `i`: the first grant
that matches, has quota (`hasQuotaIn`, as `select_in`) and whose budget, if
any, can pay (`budgetCheck`); with what it spends. A grant whose budget
cannot pay is passed over, as one without quota is. -/
def selectFromBudgeted (p : Policy) (bs : List Budget) (pu : Purse) (agent : Nat)
    (req : Request) (sets : List (List String)) : Nat → List Grant → Option (Nat × Option Nat)
  | _, [] => none
  | i, gr :: rest =>
    if (grantMatches p gr agent req sets && hasQuotaIn p pu.ledger pu.pool i) then
      optElim (budgetCheck p bs pu.spent pu.amounts i req)
        (selectFromBudgeted p bs pu agent req sets (i + 1) rest)
        (fun a => some (i, a))
    else selectFromBudgeted p bs pu agent req sets (i + 1) rest

/-- `select_budgeted`. -/
def selectBudgeted (p : Policy) (bs : List Budget) (pu : Purse) (agent : Nat) (req : Request)
    (sets : List (List String)) : Option (Nat × Option Nat) :=
  selectFromBudgeted p bs pu agent req sets 0 p.grants

/-- `spend` when the serving grant has a budget (`if let Some(amount)`). -/
def spendOpt (p : Policy) (bs : List Budget) (spent : Nat → Nat) (amounts : AmountPool)
    (g : Nat) : Option Nat → (Nat → Nat) × AmountPool
  | some a => spendAmount p bs spent amounts g a
  | none => (spent, amounts)

/-- One agent's turn in `admit_budgeted`: `take` one unit of `g` (ledger and
unit pool, `takeUnit`), then `spend` its amount, if any. -/
def takeBudgeted (p : Policy) (bs : List Budget) (pu : Purse) (g : Nat) (oa : Option Nat) :
    Purse :=
  { ledger := (takeUnit p pu.ledger pu.pool g).1,
    pool := (takeUnit p pu.ledger pu.pool g).2,
    spent := (spendOpt p bs pu.spent pu.amounts g oa).1,
    amounts := (spendOpt p bs pu.spent pu.amounts g oa).2 }

/-- `charges.push((g, amount))` when there is an amount. -/
def chargeCons (g : Nat) : Option Nat → Charges → Charges
  | some a, cs => (g, a) :: cs
  | none, cs => cs

/-- The rest of admission after the first agent's grant `g` (spending `oa`):
a failure stays a failure; otherwise `g` and its charge are prefixed. -/
def consAdmit (g : Nat) (oa : Option Nat) :
    Except Nat (List Nat × Charges × Purse) → Except Nat (List Nat × Charges × Purse)
  | .error a => .error a
  | .ok r => .ok (g :: r.1, chargeCons g oa r.2.1, r.2.2)

/-- The loop of `admit_budgeted` along an explicit chain: one unit (and the
amount, for a grant with a budget) from the serving grant of each agent,
all or nothing. -/
def admitChainBudgeted (p : Policy) (bs : List Budget) (req : Request)
    (sets : List (List String)) : Purse → List Nat → Except Nat (List Nat × Charges × Purse)
  | pu, [] => .ok ([], [], pu)
  | pu, agent :: rest =>
    optElim (selectBudgeted p bs pu agent req sets) (Except.error agent)
      (fun ga => consAdmit ga.1 ga.2
        (admitChainBudgeted p bs req sets (takeBudgeted p bs pu ga.1 ga.2) rest))

/-- `admit_budgeted`: along `agent_chain(req.agent)`, the caller first. -/
def admitBudgeted (p : Policy) (bs : List Budget) (pu : Purse) (req : Request)
    (sets : List (List String)) : Except Nat (List Nat × Charges × Purse) :=
  admitChainBudgeted p bs req sets pu (p.agentChain req.agent)

/-! ## One step with books (`step_books`) -/

/-- What `step_books` answers: the outcome, the state, the books and the
tenant's pool after the step (units and amounts). -/
structure BooksStep where
  outcome : Outcome
  state : State
  books : Books
  pool : SharedCounts
  amounts : AmountPool

/-- A `stepIn` answer with the books and amounts after the step. -/
def withBooks (r : Outcome × State × SharedCounts) (ba : Books × AmountPool) : BooksStep :=
  { outcome := r.1, state := r.2.1, books := ba.1, pool := r.2.2, amounts := ba.2 }

/-- `step_books`, `Event::Call`, on the result of `admit_budgeted`: a failed
admission denies and changes nothing; otherwise the units as in `step_in`
(`stepAdmitted`), the amounts spent, and the call's charges recorded. -/
def afterAdmitBooks (p : Policy) (s : State) (b : Books) (pool : SharedCounts)
    (amounts : AmountPool) (id : String) (needsPause : Bool) :
    Except Nat (List Nat × Charges × Purse) → BooksStep
  | .error _ => { outcome := .deny, state := s, books := b, pool := pool, amounts := amounts }
  | .ok r =>
    { outcome := (stepAdmitted p s id r.1 r.2.2.ledger needsPause).1,
      state := (stepAdmitted p s id r.1 r.2.2.ledger needsPause).2,
      books := { spent := r.2.2.spent, charges := recordCharges b.charges id r.2.1 },
      pool := r.2.2.pool,
      amounts := r.2.2.amounts }

/-- The purse admission starts from. -/
def purseOf (s : State) (b : Books) (pool : SharedCounts) (amounts : AmountPool) : Purse :=
  { ledger := s.ledger, pool := pool, spent := b.spent, amounts := amounts }

/-- `step_books`, `Event::Call`, after the freshness guard. -/
def stepCallBooks (p : Policy) (bs : List Budget) (s : State) (b : Books)
    (pool : SharedCounts) (amounts : AmountPool) (id : String) (req : Request)
    (checks : Checks) : BooksStep :=
  match checks with
  | .deny => { outcome := .deny, state := s, books := b, pool := pool, amounts := amounts }
  | .pass => afterAdmitBooks p s b pool amounts id false
      (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)
  | .pause => afterAdmitBooks p s b pool amounts id true
      (admitBudgeted p bs (purseOf s b pool amounts) req s.sets)

/-- The freshness guard of `step_books`: a call whose id is held is
`invalid` and changes nothing. -/
def guardFreshBooks (s : State) (b : Books) (pool : SharedCounts) (amounts : AmountPool)
    (id : String) (r : BooksStep) : BooksStep :=
  match isHeld s id with
  | true => { outcome := .invalid, state := s, books := b, pool := pool, amounts := amounts }
  | false => r

/-- The books after a call that held `id`'s charges ends with a refund
(failure, rejection, an approval the re-check denies):
`give_back_charges` of `charges.remove(id).unwrap_or_default()`. -/
def refundBooks (p : Policy) (bs : List Budget) (b : Books) (amounts : AmountPool)
    (id : String) : Books × AmountPool :=
  ({ spent := (giveBackCharges p bs b.spent amounts (chOr (chFind b.charges id))).1,
     charges := chErase b.charges id },
   (giveBackCharges p bs b.spent amounts (chOr (chFind b.charges id))).2)

/-- The books after a call ends keeping its amounts (success, unknown
outcome): `charges.remove(id)`, nothing given back. -/
def keepBooks (b : Books) (id : String) : Books :=
  { spent := b.spent, charges := chErase b.charges id }

/-- The books part of `Event::Approve`, on the entry `paused.remove(id)`
finds: a re-check that denies refunds, anything else keeps the books. -/
def approveBooks (p : Policy) (bs : List Budget) (b : Books) (amounts : AmountPool)
    (id : String) (checks : Checks) : Option (List Nat) → Books × AmountPool
  | some _ =>
    match checks with
    | .deny => refundBooks p bs b amounts id
    | _ => (b, amounts)
  | none => (b, amounts)

/-- The books part of `Event::Reject` and `Event::Failed`, on the entry
found: a refund. -/
def refundIfFound (p : Policy) (bs : List Budget) (b : Books) (amounts : AmountPool)
    (id : String) : Option (List Nat) → Books × AmountPool
  | some _ => refundBooks p bs b amounts id
  | none => (b, amounts)

/-- The books part of `Event::Succeeded` and `Event::Unknown`, on the entry
`running.remove(id)` finds: the amounts stay spent. -/
def keepIfFound (b : Books) (amounts : AmountPool) (id : String) :
    Option (List Nat) → Books × AmountPool
  | some _ => (keepBooks b id, amounts)
  | none => (b, amounts)

/-- `step_books`: one step of the ledger semantics with amount budgets
`bs`. Calls are admitted by `admit_budgeted` (a grant whose budget cannot
pay the call's amount does not serve it); every other event is `stepIn`
for the units, with the books part of its arm. -/
def stepBooks (p : Policy) (bs : List Budget) (s : State) (b : Books) (pool : SharedCounts)
    (amounts : AmountPool) (e : Event) (checks : Checks) : BooksStep :=
  match e with
  | .call id req =>
    guardFreshBooks s b pool amounts id (stepCallBooks p bs s b pool amounts id req checks)
  | .approve id =>
    withBooks (stepIn p s pool (.approve id) checks)
      (approveBooks p bs b amounts id checks (mapFind s.paused id))
  | .reject id =>
    withBooks (stepIn p s pool (.reject id) checks)
      (refundIfFound p bs b amounts id (mapFind s.paused id))
  | .succeeded id ds =>
    withBooks (stepIn p s pool (.succeeded id ds) checks)
      (keepIfFound b amounts id (mapFind s.running id))
  | .failed id =>
    withBooks (stepIn p s pool (.failed id) checks)
      (refundIfFound p bs b amounts id (mapFind s.running id))
  | .unknown id =>
    withBooks (stepIn p s pool (.unknown id) checks)
      (keepIfFound b amounts id (mapFind s.running id))
  | .seed k vs =>
    withBooks (stepIn p s pool (.seed k vs) checks) (b, amounts)

end Agenra
