/-
Agenra.Certify: the ledger abstraction that `agenra certify` searches and
`agenra check-cert` re-checks (`rust/certify/src/product.rs`), and the
certificate checker `checkSimulation` (`rust/certify/src/check.rs`,
the function `closed`).

A *pair state* holds OLD's and NEW's remaining quotas, the calls held
(paused or running, with the grants each side took), the current time
region and the reachable membership types. `pstep` is one step of both
sides at once, for the events OLD admits; `Preserves ctx` says that no
sequence of events OLD admits from the initial pair ever makes NEW lose
the workflow (DESIGN §4). `checkSimulation ctx R` is a `Bool`: the list
`R` starts at the initial pair and every event from every pair of `R` is
not admitted by OLD or leads back into `R`. The theorem
`Agenra.checkSimulation_sound` (in `proofs/`) says
`checkSimulation ctx R = true → Preserves ctx`.

What is trusted, as in Rust: the call classes (`Class`, computed by
`rust/certify/src/classes.rs`) and the claim that this abstraction follows
the concrete monitor (docs/certify.md); see `docs/lean.md`.

Core Lean 4 only. NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger

namespace Agenra

/-! ## Bool list helpers (own definitions, so that proofs need no library lemmas) -/

/-- `slice.contains(&x)` for a type with decidable equality. -/
def memB {α : Type} [DecidableEq α] : List α → α → Bool
  | [], _ => false
  | a :: as, x => decide (a = x) || memB as x

/-- `iter().all(f)`. -/
def allB {α : Type} (f : α → Bool) : List α → Bool
  | [] => true
  | a :: as => f a && allB f as

/-- `(0..n).all(f)`. -/
def allBelow (f : Nat → Bool) : Nat → Bool
  | 0 => true
  | n + 1 => f n && allBelow f n

/-- `iter().any(f)`. -/
def anyB {α : Type} (f : α → Bool) : List α → Bool
  | [] => false
  | a :: as => f a || anyB f as

/-- `iter().position(|&y| y == x)`. -/
def indexOf : List Nat → Nat → Option Nat
  | [], _ => none
  | a :: as, x =>
    if a = x then some 0
    else
      match indexOf as x with
      | some i => some (i + 1)
      | none => none

/-! ## What the abstraction reads of a policy -/

/-- `product::Flags`: what steps 1–4 (flows, call rules, path rules,
counts, obligations, identical in OLD and NEW) may do to an admitted call. -/
structure Flags where
  /-- A rule may PAUSE a call its grants would ALLOW. -/
  rulePauses : Bool
  /-- A rule may DENY an approval at re-authorization time. -/
  approvalDenials : Bool
  /-- Decisions depend on the order of admission. -/
  historyRules : Bool
  /-- Rules read discovered-set membership. -/
  rulesReadSets : Bool
  deriving DecidableEq, Repr

/-- A grant as the ledger abstraction reads it (`policy::Grant`: `agent`,
`quota`, `approval`, `discovers`). Matching is already decided by the
call classes. -/
structure LGrant where
  agent : Nat
  quota : Quota
  approval : Bool
  discovers : Option Nat
  deriving DecidableEq, Repr

/-- `classes::Class`, reduced to what `product::step` reads: the calling
agent's delegation chain (`Policy::chain_iter(agent)`, the same in OLD and
NEW since only grants differ), the time region, the grants of OLD and of
NEW that match the class (ascending), and the membership types its strings
carry (bit `t` = type `t`). -/
structure Class where
  chain : List Nat
  region : Nat
  old : List Nat
  new : List Nat
  types : Nat
  deriving DecidableEq, Repr

/-- `product::Ctx`: both policies' grants, the discovered sets tested by
some grant (`Classes::tested_sets`), OLD's task seeds (`Policy::task_seeds`,
identical in NEW), the rule flags and the call classes (of one component). -/
structure Ctx where
  old : List LGrant
  new : List LGrant
  tested : List Nat
  seeds : List Nat
  flags : Flags
  classes : List Class
  deriving Repr

/-! ## Pair states (`product::State`) -/

/-- `product::Held`: a call OLD paused or admitted that has no result yet,
with the grants each side took (`Chain`, the caller's first). -/
structure Held where
  oldPaused : Bool
  newPaused : Bool
  old : List Nat
  new : List Nat
  deriving DecidableEq, Repr

/-- `product::State` (named `PState`: `State` is the monitor state of
`Agenra.Ledger`). `calls` is Rust's `BTreeMap<Held, u32>` as a list of
pairs in ascending key order (`heldCmp`). -/
structure PState where
  region : Nat
  old : List Quota
  new : List Quota
  calls : List (Held × Nat)
  types : Nat
  deriving DecidableEq, Repr

/-- `product::initial`. -/
def productInitial (ctx : Ctx) : PState :=
  { region := 0, old := ctx.old.map LGrant.quota, new := ctx.new.map LGrant.quota,
    calls := [], types := 1 }

/-! ## The order of held calls (Rust's derived `Ord` on `Held` and `Chain`) -/

/-- `Ord for bool`: `false < true`. -/
def boolCmp : Bool → Bool → Ordering
  | false, true => .lt
  | true, false => .gt
  | _, _ => .eq

/-- Lexicographic order on grant lists of equal length. -/
def natListCmp : List Nat → List Nat → Ordering
  | [], [] => .eq
  | [], _ :: _ => .lt
  | _ :: _, [] => .gt
  | a :: as, b :: bs => if a < b then .lt else if b < a then .gt else natListCmp as bs

/-- Derived `Ord for Chain`: the length first, then the ids (Rust pads
them with zeros to `MAX_CHAIN`, so equal lengths compare lexicographically). -/
def chainCmp (a b : List Nat) : Ordering :=
  if a.length < b.length then .lt
  else if b.length < a.length then .gt
  else natListCmp a b

/-- Derived `Ord for Held`: `old_paused`, `new_paused`, `old`, `new`. -/
def heldCmp (a b : Held) : Ordering :=
  match boolCmp a.oldPaused b.oldPaused with
  | .eq =>
    match boolCmp a.newPaused b.newPaused with
    | .eq =>
      match chainCmp a.old b.old with
      | .eq => chainCmp a.new b.new
      | o => o
    | o => o
  | o => o

/-- `BTreeMap::contains_key`. -/
def hasKey : List (Held × Nat) → Held → Bool
  | [], _ => false
  | (k, _) :: rest, h => decide (k = h) || hasKey rest h

/-- One comparison of `upsert` at the entry `(k, n)` followed by `rest`:
insert before it, update it, or go on (`later`, searched only on demand).
A named helper so that proofs can case on the comparison. -/
def upsertAt (f : Nat → Nat) (h k : Held) (n : Nat) (rest : List (Held × Nat))
    (later : Unit → List (Held × Nat)) : Ordering → List (Held × Nat)
  | .lt => (h, f 0) :: (k, n) :: rest
  | .eq => (k, f n) :: rest
  | .gt => (k, n) :: later ()

/-- `*map.entry(h).or_insert(0) = f(old)`, keeping the keys in order. -/
def upsert (f : Nat → Nat) (h : Held) : List (Held × Nat) → List (Held × Nat)
  | [] => [(h, f 0)]
  | (k, n) :: rest => upsertAt f h k n rest (fun _ => upsert f h rest) (heldCmp h k)

/-- `*n -= 1; if *n == 0 { map.remove(h) }` on the entry of `h`, if any. -/
def decCount (h : Held) : List (Held × Nat) → List (Held × Nat)
  | [] => []
  | (k, n) :: rest =>
    if k = h then (if n - 1 = 0 then rest else (k, n - 1) :: rest)
    else (k, n) :: decCount h rest

/-! ## One step of both sides (`product.rs`) -/

/-- `grants.get(g).map(|gr| gr.quota)`. -/
def capL (gs : List LGrant) (g : Nat) : Option Quota :=
  match getAt gs g with
  | some gr => some gr.quota
  | none => none

/-- `grants[g].agent == owner` (an index out of range reads `false`; Rust panics). -/
def ownerIs (gs : List LGrant) (g owner : Nat) : Bool :=
  match getAt gs g with
  | some gr => decide (gr.agent = owner)
  | none => false

/-- `grants[g].approval` (`false` out of range). -/
def approvalL (gs : List LGrant) (g : Nat) : Bool :=
  match getAt gs g with
  | some gr => gr.approval
  | none => false

/-- `grants[g].discovers` (`none` out of range). -/
def discoversL (gs : List LGrant) (g : Nat) : Option Nat :=
  match getAt gs g with
  | some gr => gr.discovers
  | none => none

/-- The `find` of admission in `product.rs`: the first matching grant owned by
`owner` that still has quota. -/
def firstServing (gs : List LGrant) (l : List Quota) (owner : Nat) : List Nat → Option Nat
  | [] => none
  | g :: rest => if (ownerIs gs g owner && hasQuota l g) then some g
    else firstServing gs l owner rest

/-- The rest of `admitGrants` after the first agent's grant `g`: a failure
stays a failure; otherwise `g` is prefixed to the grants taken. (A named
non-recursive helper, like `consUsed`, so that proofs can case on the
`Option` without unfolding a `match`.) -/
def consTaken (g : Nat) : Option (List Nat × List Quota) → Option (List Nat × List Quota)
  | none => none
  | some r => some (g :: r.1, r.2)

/-- Admission in `product.rs` (Rust's function is named after a Lean tactic,
hence the new name): one unit from
the serving grant of each agent of the chain, all or nothing; the grants
taken (chain order) and the ledger after. -/
def admitGrants (gs : List LGrant) (matching : List Nat) :
    List Quota → List Nat → Option (List Nat × List Quota)
  | l, [] => some ([], l)
  | l, owner :: rest =>
    optElim (firstServing gs l owner matching) none
      (fun g => consTaken g (admitGrants gs matching (consumeAt l g) rest))

/-- `product::refund`: `Ledger::refund` of each grant in `used`, in order. -/
def refundGrants (gs : List LGrant) : List Quota → List Nat → List Quota
  | l, [] => l
  | l, g :: rest => refundGrants gs (modifyAt (Quota.refundCapped (capL gs g)) l g) rest

/-- `quota == Quota::Unlimited` of a grant (`false` out of range). -/
def isUnlimited : Option Quota → Bool
  | some .unlimited => true
  | _ => false

/-- `product::unlimited_only`: every grant the call holds, on both sides,
is unlimited. -/
def unlimitedOnly (ctx : Ctx) (h : Held) : Bool :=
  allB (fun g => isUnlimited (capL ctx.old g)) h.old &&
    allB (fun g => isUnlimited (capL ctx.new g)) h.new

/-- `product::add`: one more call held this way (saturating at 1 for calls
held only by unlimited grants). -/
def addHeld (ctx : Ctx) (s : PState) (h : Held) : PState :=
  { s with calls := upsert (fun n => if unlimitedOnly ctx h then 1 else n + 1) h s.calls }

/-- `product::remove`: one call fewer (never for calls held only by
unlimited grants, which stay present). -/
def removeHeld (ctx : Ctx) (s : PState) (h : Held) : PState :=
  if unlimitedOnly ctx h then s else { s with calls := decCount h s.calls }

/-- `1 << t`. -/
def bitOf (t : Nat) : Nat := 1 <<< t

/-- `x & (1 << t) != 0`. -/
def hasBit (x t : Nat) : Bool := (x &&& bitOf t) != 0

/-- `classes::type_masks`: (OLD mask, NEW mask) of type `t`. -/
def typeMasks (t nSets : Nat) : Nat × Nat :=
  (t &&& (bitOf nSets - 1), (t >>> nSets) &&& (bitOf nSets - 1))

/-- `classes::make_type`. -/
def makeType (oldMask newMask nSets : Nat) : Nat := oldMask ||| (newMask <<< nSets)

/-- `classes::set_bit`: the bit of set `s` among the tested sets (0 if untested). -/
def setBit (tested : List Nat) (s : Option Nat) : Nat :=
  match s with
  | none => 0
  | some x =>
    match indexOf tested x with
    | some i => bitOf i
    | none => 0

/-- The caller's own grant's discovered set (`held.old.first()...discovers`). -/
def discoversFirst (gs : List LGrant) (used : List Nat) : Option Nat :=
  match used with
  | [] => none
  | g :: _ => discoversL gs g

/-- `product::discovered`: the type of a value of type `t` after a success of `h`. -/
def discovered (ctx : Ctx) (h : Held) (t : Nat) : Nat :=
  let n := ctx.tested.length
  makeType ((typeMasks t n).1 ||| setBit ctx.tested (discoversFirst ctx.old h.old))
    ((typeMasks t n).2 ||| setBit ctx.tested (discoversFirst ctx.new h.new)) n

/-- `product::diverges`: a success adds to different sets on the two sides
while rules read set membership. -/
def diverges (ctx : Ctx) (h : Held) : Bool :=
  ctx.flags.rulesReadSets && !(decide (discoversFirst ctx.old h.old = discoversFirst ctx.new h.new))

/-- `product::Admission`. -/
inductive Admission where
  /-- OLD does not accept the call. -/
  | old
  /-- NEW denies it, or pauses a call OLD allows. -/
  | lost
  /-- The abstraction cannot follow it. -/
  | unknown
  | both (held : Held) (old new : List Quota) (region : Nat)
  deriving Repr

/-- `c.types & !s.types == 0`: every type the class needs is reachable. -/
def typesWithin (need avail : Nat) : Bool := (need &&& avail) == need

/-- The end of `product::admit_call`, once OLD took the grants `ro.1`
(leaving `ro.2`) and NEW took `rn.1` (leaving `rn.2`): NEW loses if it
pauses a call OLD allows; the abstraction gives up if OLD pauses a call NEW
allows while rules read the history, or if a chain is longer than
`MAX_CHAIN` (4); otherwise both sides accept the call. -/
def admitBoth (ctx : Ctx) (c : Class) (rulePause : Bool) (ro rn : List Nat × List Quota) :
    Admission :=
  if ((rulePause || anyB (approvalL ctx.new) rn.1) &&
      !(rulePause || anyB (approvalL ctx.old) ro.1)) then .lost
  else if ((rulePause || anyB (approvalL ctx.old) ro.1) &&
      !(rulePause || anyB (approvalL ctx.new) rn.1) && ctx.flags.historyRules) then .unknown
  else if (decide (4 < ro.1.length) || decide (4 < rn.1.length)) then .unknown
  else .both
    { oldPaused := rulePause || anyB (approvalL ctx.old) ro.1,
      newPaused := rulePause || anyB (approvalL ctx.new) rn.1,
      old := ro.1, new := rn.1 } ro.2 rn.2 c.region

/-- `product::admit_call`, on the class `c` (found): OLD does not accept the
call (region, types, or no grant of OLD serves it), NEW has no grant for it
(`lost`), or `admitBoth`. -/
def admitCallP (ctx : Ctx) (s : PState) (c : Class) (rulePause : Bool) : Admission :=
  if (decide (c.region < s.region) || !(typesWithin c.types s.types)) then .old
  else
    optElim (admitGrants ctx.old c.old s.old c.chain) Admission.old (fun ro =>
      optElim (admitGrants ctx.new c.new s.new c.chain) Admission.lost (fun rn =>
        admitBoth ctx c rulePause ro rn))

/-- `product::Step` (Rust's `Lost(Loss)` without the kind, `Unknown(String)`
without the reason). -/
inductive PStep where
  | notAdmitted
  | next (s : PState)
  | lost
  | unknown
  deriving Repr

/-- The call arm of `product::step` after admission: the pair state with
the new ledgers, the class's region and one more held call. -/
def callAfter (ctx : Ctx) (s : PState) : Admission → PStep
  | .old => .notAdmitted
  | .lost => .lost
  | .unknown => .unknown
  | .both h o n region => .next (addHeld ctx { s with region := region, old := o, new := n } h)

/-- The call arm of `product::step`, on `classes.get(class)`. A call with
`rulePause` exists only when a rule may pause (`flags.rule_pauses`; Rust's
`events` enumerates it only then). -/
def callAt (ctx : Ctx) (s : PState) (rulePause : Bool) : Option Class → PStep
  | none => .notAdmitted
  | some c =>
    if (rulePause && !ctx.flags.rulePauses) then .notAdmitted
    else callAfter ctx s (admitCallP ctx s c rulePause)

/-- Events about a held call (`product::Event` minus `Call` and `Seed`). -/
inductive HeldEvent where
  | approve
  /-- The re-check at approval time denies: the units return. -/
  | approvalDenied
  | reject
  /-- `from`: the type of the value the result discovered, or nothing. -/
  | succeeded (ty : Option Nat)
  | failed
  | unknown
  deriving DecidableEq, Repr

/-- `product::Event`. -/
inductive PEvent where
  | call (cls : Nat) (rulePause : Bool)
  | held (h : Held) (what : HeldEvent)
  /-- A task seeds a value of type `ty` into discovered set `k` (Rust `set`). -/
  | seed (k : Nat) (ty : Nat)
  deriving DecidableEq, Repr

/-- Approval denied or rejection: the call leaves, OLD's units return, and
NEW's too if NEW had paused it (otherwise NEW's call ran: its units stay spent). -/
def refundBoth (ctx : Ctx) (s : PState) (h : Held) : PState :=
  let r := removeHeld ctx s h
  { r with old := refundGrants ctx.old s.old h.old,
           new := if h.newPaused then refundGrants ctx.new s.new h.new else s.new }

/-- `Succeeded { from: Some(t) }` with `t < 64`. -/
def succeededSome (ctx : Ctx) (s : PState) (h : Held) (t : Nat) : PStep :=
  if hasBit s.types t then
    if diverges ctx h then .unknown
    else
      let r := removeHeld ctx s h
      .next { r with types := s.types ||| bitOf (discovered ctx h t) }
  else .notAdmitted

/-- The held-call arms of `product::step`, once `contains_key(held)` holds. -/
def heldStep (ctx : Ctx) (s : PState) (h : Held) : HeldEvent → PStep
  | .approve =>
    if h.oldPaused then
      .next (addHeld ctx (removeHeld ctx s h) { h with oldPaused := false, newPaused := false })
    else .notAdmitted
  | .approvalDenied =>
    if (h.oldPaused && ctx.flags.approvalDenials) then .next (refundBoth ctx s h)
    else .notAdmitted
  | .reject => if h.oldPaused then .next (refundBoth ctx s h) else .notAdmitted
  | .succeeded none => if h.oldPaused then .notAdmitted else .next (removeHeld ctx s h)
  | .succeeded (some t) =>
    if t < 64 then (if h.oldPaused then .notAdmitted else succeededSome ctx s h t)
    else .notAdmitted
  | .failed =>
    if h.oldPaused then .notAdmitted
    else
      let r := removeHeld ctx s h
      .next { r with old := refundGrants ctx.old s.old h.old,
                     new := refundGrants ctx.new s.new h.new }
  | .unknown => if h.oldPaused then .notAdmitted else .next (removeHeld ctx s h)

/-- A held-call event: not admitted unless the call is held (`contains_key`). -/
def heldAt (ctx : Ctx) (s : PState) (h : Held) (w : HeldEvent) : Bool → PStep
  | true => heldStep ctx s h w
  | false => .notAdmitted

/-- `Seed { set, from }` once the set `k` is one of OLD's task seeds and `from < 64`. -/
def seedAdd (ctx : Ctx) (s : PState) (k t : Nat) : PStep :=
  if hasBit s.types t then
    let n := ctx.tested.length
    let b := setBit ctx.tested (some k)
    .next { s with types :=
      s.types ||| bitOf (makeType ((typeMasks t n).1 ||| b) ((typeMasks t n).2 ||| b) n) }
  else .notAdmitted

/-- A seed event: not admitted unless `k` is a task seed and `from < 64`. -/
def seedAt (ctx : Ctx) (s : PState) (k t : Nat) : Bool → PStep
  | true => seedAdd ctx s k t
  | false => .notAdmitted

/-- `product::step`: one step of both sides. -/
def pstep (ctx : Ctx) (s : PState) : PEvent → PStep
  | .call i rp => callAt ctx s rp (getAt ctx.classes i)
  | .held h w => heldAt ctx s h w (hasKey s.calls h)
  | .seed k t => seedAt ctx s k t (memB ctx.seeds k && decide (t < 64))

/-! ## Workflows and preservation -/

/-- One event of a workflow: from a pair state, step; once OLD stopped
admitting (or NEW lost, or the abstraction gave up) nothing changes. -/
def afterEvent (ctx : Ctx) (e : PEvent) : PStep → PStep
  | .next s => pstep ctx s e
  | r => r

/-- A sequence of events from a result (`run ctx w (.next s)`: from `s`). -/
def run (ctx : Ctx) : List PEvent → PStep → PStep
  | [], r => r
  | e :: es, r => run ctx es (afterEvent ctx e r)

/-- **Preserves.** NEW preserves every workflow OLD admits: along every
sequence of events from the initial pair, NEW never loses (denies a call
OLD admits, or pauses one OLD allows) and the abstraction never gives up.
Events after the first one OLD does not accept are no longer part of a
workflow and are ignored. -/
def Preserves (ctx : Ctx) : Prop :=
  ∀ (w : List PEvent),
    run ctx w (.next (productInitial ctx)) ≠ .lost ∧
    run ctx w (.next (productInitial ctx)) ≠ .unknown

/-- What a relation `R` (a set of pair states) needs of one step result:
OLD does not accept the event, or the successor is in `R`. -/
def StepOk (R : PState → Prop) : PStep → Prop
  | .notAdmitted => True
  | .next t => R t
  | .lost => False
  | .unknown => False

/-- A simulation over the abstraction (DESIGN §4): `R` holds the initial
pair, and from every pair in `R` every event OLD admits is admitted by NEW
(as the client observes it) and leads back into `R`. -/
structure IsSimulation (ctx : Ctx) (R : PState → Prop) : Prop where
  initial : R (productInitial ctx)
  closed : ∀ (s : PState) (e : PEvent), R s → StepOk R (pstep ctx s e)

/-! ## The checker (`check.rs`, `closed` and `fits`)

The closure test is written once, for any membership test `mem` of the
relation: a list (`checkSimulation`, `memB`) or a search tree
(`checkSimulationTree`, `treeMem`, what `--emit-lean` uses). -/

/-- `StepOk` for the relation given by a membership test, as a `Bool`. -/
def stepOk (mem : PState → Bool) : PStep → Bool
  | .notAdmitted => true
  | .next t => mem t
  | .lost => false
  | .unknown => false

/-- Every event about the held call `h` from `s` is fine (every type `t < 64`
for `succeeded`; Rust tries only the types that change something). -/
def heldOk (ctx : Ctx) (mem : PState → Bool) (s : PState) (h : Held) : Bool :=
  stepOk mem (heldStep ctx s h .approve) &&
  (stepOk mem (heldStep ctx s h .approvalDenied) &&
  (stepOk mem (heldStep ctx s h .reject) &&
  (stepOk mem (heldStep ctx s h (.succeeded none)) &&
  (allBelow (fun t => stepOk mem (heldStep ctx s h (.succeeded (some t)))) 64 &&
  (stepOk mem (heldStep ctx s h .failed) &&
   stepOk mem (heldStep ctx s h .unknown))))))

/-- The loop of `closed` for one pair: every call of every class (with and
without a rule pause), every event of every held call, every task seed. -/
def closedAt (ctx : Ctx) (mem : PState → Bool) (s : PState) : Bool :=
  allBelow (fun i => stepOk mem (pstep ctx s (.call i false)) &&
    stepOk mem (pstep ctx s (.call i true))) ctx.classes.length &&
  (allB (fun (kn : Held × Nat) => heldOk ctx mem s kn.1) s.calls &&
   allB (fun k => allBelow (fun t => stepOk mem (seedAdd ctx s k t)) 64) ctx.seeds)

/-- `relation.first() == Some(&initial)`. -/
def startsAt : List PState → PState → Bool
  | [], _ => false
  | r :: _, s => decide (r = s)

/-- `check::fits`, in part: the ledgers have one entry per grant. (Rust also
checks that the region and the held grants are in range; Lean's functions
are total, so soundness does not need any of this.) -/
def fits (ctx : Ctx) (s : PState) : Bool :=
  decide (s.old.length = ctx.old.length) && decide (s.new.length = ctx.new.length)

/-- **checkSimulation** (`check::closed`): the list `R` starts at the initial
pair, every pair fits the policies, and from every pair every event is
either not accepted by OLD or leads into `R` (membership: `memB`). -/
def checkSimulation (ctx : Ctx) (R : List PState) : Bool :=
  startsAt R (productInitial ctx) && (allB (fits ctx) R && allB (closedAt ctx (memB R)) R)

/-! ## The relation as a search tree (for large certificates)

List membership makes `checkSimulation` quadratic in the size of `R`. A
search tree ordered by `stateCmp` makes each lookup logarithmic. Soundness
does not depend on the order: `treeMem` answers `true` only when it found a
node equal to the state, so a wrong order can only make the check fail. -/

/-- `a < b`, `a = b` or `a > b` on numbers. -/
def natCmp (a b : Nat) : Ordering :=
  if a < b then .lt else if b < a then .gt else .eq

/-- Limited quotas by count, all below `unlimited`. -/
def quotaCmp : Quota → Quota → Ordering
  | .limited a, .limited b => natCmp a b
  | .limited _, .unlimited => .lt
  | .unlimited, .limited _ => .gt
  | .unlimited, .unlimited => .eq

/-- Lexicographic order on lists (a proper prefix first). -/
def listCmp {α : Type} (cmp : α → α → Ordering) : List α → List α → Ordering
  | [], [] => .eq
  | [], _ :: _ => .lt
  | _ :: _, [] => .gt
  | a :: as, b :: bs =>
    match cmp a b with
    | .eq => listCmp cmp as bs
    | o => o

/-- Held calls by `heldCmp`, then by count. -/
def pairCmp (a b : Held × Nat) : Ordering :=
  match heldCmp a.1 b.1 with
  | .eq => natCmp a.2 b.2
  | o => o

/-- The order of the tree: region, types, OLD's ledger, NEW's ledger, held calls. -/
def stateCmp (a b : PState) : Ordering :=
  match natCmp a.region b.region with
  | .eq =>
    match natCmp a.types b.types with
    | .eq =>
      match listCmp quotaCmp a.old b.old with
      | .eq =>
        match listCmp quotaCmp a.new b.new with
        | .eq => listCmp pairCmp a.calls b.calls
        | o => o
      | o => o
    | o => o
  | o => o

/-- A binary search tree of pair states. -/
inductive RelTree where
  | leaf
  | node (l : RelTree) (v : PState) (r : RelTree)
  deriving Repr

/-- One comparison of the search: left, right, or this node (equal to `s`?).
The subtrees are searched only on demand. -/
def treeMemAt (s v : PState) (inL inR : Unit → Bool) : Ordering → Bool
  | .lt => inL ()
  | .gt => inR ()
  | .eq => decide (v = s)

/-- Whether the tree holds `s` (searching by `stateCmp`). -/
def treeMem (s : PState) : RelTree → Bool
  | .leaf => false
  | .node l v r => treeMemAt s v (fun _ => treeMem s l) (fun _ => treeMem s r) (stateCmp s v)

/-- `f` holds at every node. -/
def treeAll (f : PState → Bool) : RelTree → Bool
  | .leaf => true
  | .node l v r => f v && (treeAll f l && treeAll f r)

/-- A balanced tree from a list sorted by `stateCmp` (`fuel` bounds the depth). -/
def buildTree : Nat → List PState → RelTree
  | 0, _ => .leaf
  | _ + 1, [] => .leaf
  | fuel + 1, x :: xs =>
    match (x :: xs).drop ((xs.length + 1) / 2) with
    | [] => .leaf
    | v :: rest => .node (buildTree fuel ((x :: xs).take ((xs.length + 1) / 2))) v (buildTree fuel rest)

/-- The concatenation of a list of lists (how an emitted certificate joins
its chunks of pairs without a deep `++` term). -/
def concatAll : List (List PState) → List PState
  | [] => []
  | x :: xs => x ++ concatAll xs

/-- The tree of a sorted list. -/
def RelTree.ofSorted (xs : List PState) : RelTree :=
  buildTree (xs.length + 1) xs

/-- **checkSimulationTree**: `checkSimulation` on a search tree: the initial
pair is in the tree, every node fits the policies, and from every node
every event is either not accepted by OLD or leads into the tree. -/
def checkSimulationTree (ctx : Ctx) (T : RelTree) : Bool :=
  treeMem (productInitial ctx) T &&
    (treeAll (fits ctx) T && treeAll (closedAt ctx (fun s => treeMem s T)) T)

end Agenra
