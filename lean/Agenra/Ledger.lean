/-
Agenra.Ledger: the reference semantics of consumable authority (grants,
matching, the ledger and the life of a call), mirrored definition by
definition from `rust/core/src/spec/mod.rs` and the parts of `policy.rs`,
`ledger.rs`, `value.rs`, `decimal.rs` and `pattern.rs` it uses.

Core Lean 4 only (no Mathlib, no Batteries). Every definition is total and
executable: structural recursion (or a fuel argument), no `partial` (the only
`partial` function of this file is the printer that `deriving Repr` generates
for the nested inductive `Value`; no definition here or theorem uses it; the
FFI encoder `Cbor.encodeList` in `Cbor.lean` is the model's other `partial`
function, see `docs/lean.md`).
Where this model is simpler than the Rust code, the doc comment says so;
`docs/lean.md` lists every such place.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/

namespace Agenra

/-! ## List helpers

Own definitions, so that the proofs need no library lemmas about them. -/

/-- `slice.get(i)`: the element at index `i`, if any. -/
def getAt {α : Type} : List α → Nat → Option α
  | [], _ => none
  | a :: _, 0 => some a
  | _ :: as, i + 1 => getAt as i

/-- `if let Some(x) = slice.get_mut(i) { *x = f(*x) }`: applies `f` to the
element at index `i`; an index out of range changes nothing. -/
def modifyAt {α : Type} (f : α → α) : List α → Nat → List α
  | [], _ => []
  | a :: as, 0 => f a :: as
  | a :: as, i + 1 => a :: modifyAt f as i

/-- `text.starts_with(prefix)` on characters: is the first list a prefix of the second? -/
def charsPrefix : List Char → List Char → Bool
  | [], _ => true
  | _ :: _, [] => false
  | a :: as, b :: bs => a == b && charsPrefix as bs

/-- `s.starts_with(pre)`. -/
def strStartsWith (s pre : String) : Bool :=
  charsPrefix pre.toList s.toList

/-- `s.ends_with(suf)`. -/
def strEndsWith (s suf : String) : Bool :=
  charsPrefix suf.toList.reverse s.toList.reverse

/-- Is the first list a contiguous part of the second? (`[]` is part of everything.) -/
def charsInfix (pat : List Char) : List Char → Bool
  | [] => charsPrefix pat []
  | c :: cs => charsPrefix pat (c :: cs) || charsInfix pat cs

/-- `s.contains(sub)` for a string `sub` (a substring test; Lean's own
`String.contains` takes a character). -/
def strContains (s sub : String) : Bool :=
  charsInfix sub.toList s.toList

/-! ## Patterns (`pattern.rs`) -/

/-- All suffixes of a list, longest first, ending with `[]`. -/
def suffixes : List Char → List (List Char)
  | [] => [[]]
  | c :: cs => (c :: cs) :: suffixes cs

/-- Glob matching: `*` matches any run of characters (none included), `?`
exactly one character, every other character itself.

Simpler than Rust: this is the obviously correct exponential matcher that
`pattern.rs` uses as its test oracle (`naive`), not the two-pointer
`match_units` algorithm that `glob_matches` runs. The Rust property test
`glob_agrees_with_naive` checks that the two agree. -/
def globChars : List Char → List Char → Bool
  | [], t => t.isEmpty
  | c :: g, t =>
    if c == '*' then (suffixes t).any (fun u => globChars g u)
    else
      match t with
      | [] => false
      | x :: xs => (c == '?' || c == x) && globChars g xs

/-- `Pattern`: exact names, prefixes and globs. (The Rust constructor
`Prefix` is `startsWith` here: `prefix` is a Lean keyword.) -/
inductive Pattern where
  | exact (s : String)
  | startsWith (p : String)
  | glob (g : String)
  deriving Repr

/-- `Pattern::matches` (named `accepts`: `matches` is a Lean keyword). -/
def Pattern.accepts : Pattern → String → Bool
  | .exact s, text => s == text
  | .startsWith pre, text => strStartsWith text pre
  | .glob g, text => globChars g.toList text.toList

/-! ## Exact decimals (`decimal.rs`) -/

/-- `Decimal`: the number `mantissa / 10^scale`.

Simpler than Rust: Rust keeps every decimal normalized (no trailing zero
digits after the point) and bounded (an `i128` mantissa, at most 20
significant digits and 18 after the point); here any `mantissa` and `scale`
are allowed, so `⟨9870, 2⟩` and `⟨987, 1⟩` are two values of this type for
the one number 98.7. No `DecidableEq`/`BEq` is derived on purpose:
equality of decimals is always the numeric test `Decimal.eqv`, never `=`
on the structure. -/
structure Decimal where
  mantissa : Int
  scale : Nat
  deriving Repr

/-- `impl From<i64> for Decimal`: an integer is the decimal of scale 0. -/
def Decimal.ofInt (i : Int) : Decimal :=
  { mantissa := i, scale := 0 }

/-- `Decimal::scaled`: the mantissa scaled to `scale` digits after the point
(callers pass `scale ≥ d.scale`). -/
def Decimal.scaled (d : Decimal) (scale : Nat) : Int :=
  d.mantissa * Int.ofNat (10 ^ (scale - d.scale))

/-- `Decimal::cmp` (`impl Ord`): both scaled to the larger scale, then the
integers compared (cross-multiplication by powers of 10). -/
def Decimal.cmp (a b : Decimal) : Ordering :=
  let scale := max a.scale b.scale
  let x := a.scaled scale
  let y := b.scaled scale
  if x < y then .lt else if y < x then .gt else .eq

/-- `Ordering::is_lt`, `is_le`, `is_gt`, `is_ge`, `is_eq` (own definitions). -/
def ordLt : Ordering → Bool
  | .lt => true
  | _ => false

def ordLe : Ordering → Bool
  | .gt => false
  | _ => true

def ordGt : Ordering → Bool
  | .gt => true
  | _ => false

def ordGe : Ordering → Bool
  | .lt => false
  | _ => true

def ordEq : Ordering → Bool
  | .eq => true
  | _ => false

/-- Numeric equality of decimals: Rust's derived `==` on normalized decimals,
which is `cmp(..) == Equal`. -/
def Decimal.eqv (a b : Decimal) : Bool :=
  ordEq (a.cmp b)

/-! ## Values and argument tests (`value.rs`) -/

/-- `ParamType`: the scalar type of a parameter. -/
inductive ParamType where
  | str
  | int
  | bool
  | decimal
  deriving DecidableEq, Repr

/-- `ParamType::is_numeric`. -/
def ParamType.isNumeric : ParamType → Bool
  | .int => true
  | .decimal => true
  | _ => false

/-- `ParamType::accepts`: a test written for `operand` applies to this type
(integers and decimals compare with each other). -/
def ParamType.accepts (t operand : ParamType) : Bool :=
  t == operand || (t.isNumeric && operand.isNumeric)

/-- `Value`: an argument. Rust's `i64` is an unbounded `Int` here. A nested
inductive (`list` holds values); functions that recurse into lists do so
through a helper on `List Value` in a `mutual` block (`Value.beq`). No
`DecidableEq` is derived (the derive handler does not support nested
inductives, and decimals compare numerically anyway). -/
inductive Value where
  | str (s : String)
  | int (i : Int)
  | bool (b : Bool)
  | decimal (d : Decimal)
  /-- A list of scalars of one type. -/
  | list (vs : List Value)
  /-- An absent optional argument (or an explicit JSON `null` for one). -/
  | null
  deriving Repr

/-- `Value::ty`: the scalar type of a scalar value (`none` for lists and null). -/
def Value.ty : Value → Option ParamType
  | .str _ => some ParamType.str
  | .int _ => some ParamType.int
  | .bool _ => some ParamType.bool
  | .decimal _ => some ParamType.decimal
  | .list _ => none
  | .null => none

/-- `Value::as_decimal`: the numeric value of an integer or a decimal. -/
def Value.asDecimal : Value → Option Decimal
  | .int i => some (Decimal.ofInt i)
  | .decimal d => some d
  | _ => none

mutual
/-- Rust's derived `==` on `Value`: same constructor and equal contents,
elementwise on lists. Decimals compare with `Decimal.eqv`, which is what
Rust's derived equality computes on its normalized decimals. An integer
and a decimal are different here, as in Rust (`values_equal` is the
numeric test). -/
def Value.beq : Value → Value → Bool
  | .str a, .str b => a == b
  | .int a, .int b => a == b
  | .bool a, .bool b => a == b
  | .decimal a, .decimal b => a.eqv b
  | .list xs, .list ys => Value.beqList xs ys
  | .null, .null => true
  | _, _ => false

/-- `Value.beq` on two lists, element by element. -/
def Value.beqList : List Value → List Value → Bool
  | [], [] => true
  | x :: xs, y :: ys => Value.beq x y && Value.beqList xs ys
  | _, _ => false
end

/-- `values_equal`: equality as tests see it; integers and decimals compare
by value. -/
def valuesEqual (a b : Value) : Bool :=
  match a.asDecimal, b.asDecimal with
  | some x, some y => x.eqv y
  | _, _ => a.beq b

/-- `ArgOp`: a test on one argument value. Constructor names differ from Rust
where the Rust name is a Lean keyword: `In` is `oneOf`, `Prefix` is
`startsWith`, `Suffix` is `endsWith`, `Matches` is `matchesPattern`. -/
inductive ArgOp where
  /-- `== V`; `== null` tests that an optional argument is absent. -/
  | eq (v : Value)
  /-- `!= V`: the value has V's type and differs; `!= null`: present. -/
  | ne (v : Value)
  | oneOf (vs : List Value)
  | notIn (vs : List Value)
  | startsWith (p : String)
  | endsWith (p : String)
  | matchesPattern (p : Pattern)
  /-- A string contains the substring; a list contains the element. -/
  | contains (v : Value)
  | lt (n : Decimal)
  | le (n : Decimal)
  | gt (n : Decimal)
  | ge (n : Decimal)
  /-- Membership in discovered-resource set number `k`. -/
  | inSet (k : Nat)
  | notInSet (k : Nat)
  deriving Repr

/-- `Quant`: how a test applies to a list argument. -/
inductive Quant where
  /-- Every element (vacuously true on an empty list). -/
  | all
  /-- Some element (false on an empty list). -/
  | any
  deriving DecidableEq, Repr

/-- `matches!(op, ArgOp::Eq(Value::Null))`. -/
def ArgOp.isEqNull : ArgOp → Bool
  | .eq .null => true
  | _ => false

/-- `ArgOp::is_whole_value`: `contains` and the `null` tests look at the whole
value rather than at each scalar of a list. -/
def ArgOp.isWholeValue : ArgOp → Bool
  | .contains _ => true
  | .eq .null => true
  | .ne .null => true
  | _ => false

/-- `sets.get(k).is_some_and(|m| m.contains(s))`. A discovered set is a list
of strings here (Rust: `BTreeSet<String>`); only membership is observed. -/
def setContains (sets : List (List String)) (k : Nat) (s : String) : Bool :=
  match getAt sets k with
  | some m => m.contains s
  | none => false

/-- `sets.get(k).is_none_or(|m| !m.contains(s))`. -/
def setLacks (sets : List (List String)) (k : Nat) (s : String) : Bool :=
  match getAt sets k with
  | some m => !(m.contains s)
  | none => true

/-- The `same_type` test of `ArgOp::Ne`: both scalars, of types that compare. -/
def sameType (w v : Value) : Bool :=
  match w.ty, v.ty with
  | some a, some b => a.accepts b
  | _, _ => false

/-- The `cmp` closure of `eval_scalar`: the value is numeric and its
comparison with `bound` is one that `want` accepts. -/
def compareWith (v : Value) (bound : Decimal) (want : Ordering → Bool) : Bool :=
  match v.asDecimal with
  | some d => want (d.cmp bound)
  | none => false

/-- The `Ne` arms of `eval_scalar` on a present (non-null) value `x`:
`!= null` holds; `!= w` holds when `x` has a type that compares with `w`'s
and differs from `w`. -/
def neScalar (w x : Value) : Bool :=
  match w with
  | .null => true
  | _ => sameType w x && !(valuesEqual w x)

/-- The `Contains` arms of `eval_scalar` on a present value `x`: a string
contains the substring `w` (when `w` is a string), a list contains an element
equal to `w`; anything else is false. -/
def containsScalar (w x : Value) : Bool :=
  match x with
  | .str s =>
    match w with
    | .str sub => strContains s sub
    | _ => false
  | .list items => items.any (fun i => valuesEqual w i)
  | _ => false

/-- A string test on a present value: `f s` on a string `s`, false on
anything else (the arms `(Prefix(p), Str(s))`, … of `eval_scalar`). -/
def onString (x : Value) (f : String → Bool) : Bool :=
  match x with
  | .str s => f s
  | _ => false

/-- `ArgOp::eval_scalar`: the test on a scalar (or, for `contains` and the null
tests, on a whole value). A test applied to a value of the wrong type is
false, as in Rust.

Rust matches on `(self, value)` with 19 overlapping arms, first match
wins. Here the same function is written without overlapping alternatives:
first Rust's arm `(_, Null)`, then one alternative per `ArgOp` constructor.
This is the same function because every Rust arm after the first names one
`ArgOp` constructor, so for a given constructor only its own arms (in Rust's
order) and the final `_ => false` can fire: `neScalar` is the two `Ne` arms,
`containsScalar` the two `Contains` arms, `onString` a string arm followed
by `_ => false`, and `compareWith` the `cmp` closure. -/
def ArgOp.evalScalar (op : ArgOp) (v : Value) (sets : List (List String)) : Bool :=
  match v with
  | .null => op.isEqNull
  | x =>
    match op with
    | .eq w => valuesEqual w x
    | .ne w => neScalar w x
    | .oneOf ws => ws.any (fun w => valuesEqual w x)
    | .notIn ws => x.ty.isSome && !(ws.any (fun w => valuesEqual w x))
    | .startsWith pre => onString x (fun s => strStartsWith s pre)
    | .endsWith suf => onString x (fun s => strEndsWith s suf)
    | .matchesPattern pat => onString x (fun s => pat.accepts s)
    | .contains w => containsScalar w x
    | .lt n => compareWith x n ordLt
    | .le n => compareWith x n ordLe
    | .gt n => compareWith x n ordGt
    | .ge n => compareWith x n ordGe
    | .inSet k => onString x (fun s => setContains sets k s)
    | .notInSet k => onString x (fun s => setLacks sets k s)

/-- `ArgOp::eval`: on a list (unless the test looks at the whole value), the
test on every element (`all`, true on `[]`) or on some element (`any`,
false on `[]`); on anything else, the scalar test. -/
def ArgOp.eval (op : ArgOp) (quant : Quant) (v : Value) (sets : List (List String)) : Bool :=
  match v with
  | .list items =>
    if op.isWholeValue then op.evalScalar (.list items) sets
    else
      match quant with
      | .all => items.all (fun x => op.evalScalar x sets)
      | .any => items.any (fun x => op.evalScalar x sets)
  | x => op.evalScalar x sets

/-- `ArgCond = Cond<usize>`: a condition on a call's arguments (by parameter
index) and calling agent.

Simpler than Rust: Rust's `And(Vec<Cond>)` and `Or(Vec<Cond>)` take lists;
here `and`/`or` are binary, with `tru` (Rust `Cond::TRUE = And([])`) and
`fls` (`Cond::FALSE = Or([])`) as units. `ArgCond.allOf`/`ArgCond.anyOf`
build the binary form from a list (a right fold), and the theorems
`ArgCond.eval_allOf`/`eval_anyOf` show that it evaluates like Rust's
`iter().all`/`iter().any`. The binary form keeps the recursion plainly
structural. Only the index form is modelled (`NamedCond` is resolved to
it before the ledger runs). -/
inductive ArgCond where
  /-- The argument at position `param` passes `op` (on lists: per `quant`). -/
  | test (param : Nat) (quant : Quant) (op : ArgOp)
  /-- The calling agent is one of these. -/
  | agent (agents : List Nat)
  | not (c : ArgCond)
  | and (a b : ArgCond)
  | or (a b : ArgCond)
  /-- `Cond::TRUE` (`And([])`). -/
  | tru
  /-- `Cond::FALSE` (`Or([])`). -/
  | fls
  deriving Repr

/-- Rust `Cond::And(cs)`: all hold (`tru` when empty). -/
def ArgCond.allOf : List ArgCond → ArgCond
  | [] => .tru
  | c :: cs => .and c (ArgCond.allOf cs)

/-- Rust `Cond::Or(cs)`: some holds (`fls` when empty). -/
def ArgCond.anyOf : List ArgCond → ArgCond
  | [] => .fls
  | c :: cs => .or c (ArgCond.anyOf cs)

/-- `ArgCond::eval`: the condition on a call's arguments (in parameter
order) and calling agent; discovered-set tests read `sets`. A test on a
parameter the call lacks is false. -/
def ArgCond.eval (c : ArgCond) (args : List Value) (agent : Nat) (sets : List (List String)) :
    Bool :=
  match c with
  | .test param quant op =>
    match getAt args param with
    | some v => op.eval quant v sets
    | none => false
  | .agent agents => agents.contains agent
  | .not d => !(ArgCond.eval d args agent sets)
  | .and a b => ArgCond.eval a args agent sets && ArgCond.eval b args agent sets
  | .or a b => ArgCond.eval a args agent sets || ArgCond.eval b args agent sets
  | .tru => true
  | .fls => false

/-! ## Policies (`policy.rs`, the part the ledger reads) -/

/-- `Quota`. Rust's `u64` count is an unbounded `Nat` here. -/
inductive Quota where
  | limited (n : Nat)
  | unlimited
  deriving DecidableEq, Repr

/-- `Quota::is_available`: anything but `limited 0`. -/
def Quota.isAvailable : Quota → Bool
  | .limited 0 => false
  | .limited (_ + 1) => true
  | .unlimited => true

/-- The effect of `Ledger::consume` on one entry: `limited (n+1)` loses a
unit; `limited 0` and `unlimited` are unchanged. -/
def Quota.dec : Quota → Quota
  | .limited 0 => .limited 0
  | .limited (n + 1) => .limited n
  | .unlimited => .unlimited

/-- The effect of `Ledger::refund` on one entry, given the grant's quota in
the policy (`cap`): a limited entry below a limited cap gains a unit;
everything else is unchanged. -/
def Quota.refundCapped : Option Quota → Quota → Quota
  | some (.limited c), .limited n => if n < c then .limited (n + 1) else .limited n
  | some (.limited _), .unlimited => .unlimited
  | some .unlimited, q => q
  | none, q => q

/-- `Grant`. Its `name` matters only for a shared grant (`quota N per
tenant`): the tenant's pool counts units by grant name (`SharedCounts`). -/
structure Grant where
  /-- The grant's name (the key of a shared grant in the tenant's pool). -/
  name : String := ""
  agent : Nat
  tool : Nat
  /-- Pattern on the tool's resource argument (`none`: any resource). -/
  resource : Option Pattern := none
  /-- Conditions on the arguments (and calling agent); all must hold. -/
  args : List ArgCond := []
  quota : Quota
  /-- Admission needs a human approval: the unit is reserved, the call pauses. -/
  approval : Bool := false
  /-- The grant matches no call at or after this time (seconds). -/
  expiresAt : Option Nat := none
  /-- Discovered set that a succeeded result of a call admitted by this grant adds to. -/
  discovers : Option Nat := none
  deriving Repr

/-- `Tool`, reduced to what the ledger reads: the index of its resource parameter. -/
structure Tool where
  resource : Option Nat := none
  deriving Repr

/-- `Agent`, reduced to its delegator (`none` only for the root agent 0). -/
structure Agent where
  parent : Option Nat := none
  deriving Repr

/-- `Policy`, reduced to what the ledger semantics reads. Indexes are
positions in these lists, as in Rust. -/
structure Policy where
  tools : List Tool
  agents : List Agent
  grants : List Grant
  /-- Names of the discovered-resource sets. -/
  sets : List String
  /-- `shared_grants`: the grants whose quota all sessions of a tenant share
  (`quota N per tenant`), strictly ascending; each is limited and has a name
  no other grant has (`validate.rs`). -/
  shared : List Nat := []
  deriving Repr

/-- The delegator of agent `a`: `agents.get(a).and_then(|a| a.parent)`. -/
def parentOf (p : Policy) (a : Nat) : Option Nat :=
  match getAt p.agents a with
  | some ag => ag.parent
  | none => none

/-- The loop of `Policy::agent_chain`, with `fuel` bounding the iterations. -/
def chainFrom (p : Policy) : Nat → List Nat → Nat → List Nat
  | 0, chain, _ => chain
  | fuel + 1, chain, cur =>
    match parentOf p cur with
    | none => chain
    | some q => if chain.contains q then chain else chainFrom p fuel (chain ++ [q]) q

/-- `Policy::agent_chain`: the agent and its delegators, nearest first, ending
at the root; cycles are cut off. Every pushed agent is the delegator of a
distinct agent in range, so the Rust loop runs at most `agents.length + 1`
times and this fuel never runs out first. -/
def Policy.agentChain (p : Policy) (agent : Nat) : List Nat :=
  chainFrom p (p.agents.length + 1) [agent] agent

/-! ## The ledger (`ledger.rs`) -/

/-- `Ledger`: remaining quota per grant, indexed like `Policy.grants`. -/
abbrev Ledger := List Quota

/-- `Policy::is_shared`. -/
def Policy.isShared (p : Policy) (g : Nat) : Bool :=
  p.shared.any (fun x => decide (x = g))

/-- The entries of `Ledger::initial` from grant index `i` on: a shared grant
(`quota N per tenant`) starts at `limited 0` (its entry counts the units this
session holds, none yet), any other grant at its full quota. -/
def initialFrom (p : Policy) : Nat → List Grant → Ledger
  | _, [] => []
  | i, gr :: rest =>
    (if p.isShared i then Quota.limited 0 else gr.quota) :: initialFrom p (i + 1) rest

/-- `Ledger::initial`: every grant at its full quota, except a shared grant,
which starts at `limited 0` (the units this session holds). Lean's `step`
never serves a shared grant from this start (no unit is left in its entry,
and only selected grants are refunded), as Rust's `Ledger::has_quota` is
false for it; shared grants are served by `stepIn` from the tenant's pool. -/
def Ledger.initial (p : Policy) : Ledger :=
  initialFrom p 0 p.grants

/-- `remaining.get(g).is_some_and(|q| q.is_available())` on an optional entry. -/
def quotaAvailable : Option Quota → Bool
  | some q => q.isAvailable
  | none => false

/-- `Ledger::has_quota`. -/
def hasQuota (l : Ledger) (g : Nat) : Bool :=
  quotaAvailable (getAt l g)

/-- The ledger after `Ledger::consume(g)`. -/
def consumeAt : List Quota → Nat → List Quota
  | [], _ => []
  | q :: qs, 0 => q.dec :: qs
  | q :: qs, i + 1 => q :: consumeAt qs i

/-- `Ledger::consume`: takes one unit of `g`; `false` (and no change) when
none is left. Rust returns `true` exactly when the entry exists and is
available, which is `hasQuota`. -/
def consume (l : Ledger) (g : Nat) : Bool × Ledger :=
  (hasQuota l g, consumeAt l g)

/-- The quota of grant `g` in the policy: `policy.grants.get(g).map(|gr| gr.quota)`. -/
def capOf (p : Policy) (g : Nat) : Option Quota :=
  match getAt p.grants g with
  | some gr => some gr.quota
  | none => none

/-- `Ledger::refund`: returns one unit of `g`, never beyond the grant's quota. -/
def refundOne (p : Policy) (l : Ledger) (g : Nat) : Ledger :=
  modifyAt (Quota.refundCapped (capOf p g)) l g

/-! ## Requests, matching, selection and admission (`spec/mod.rs`) -/

/-- `Request`: a well-formed call (`u64` time is a `Nat`). -/
structure Request where
  agent : Nat
  tool : Nat
  args : List Value
  time : Nat
  deriving Repr

/-- `resource_of`: the value of the tool's resource parameter, if it is a string. -/
def resourceOf (p : Policy) (tool : Nat) (args : List Value) : Option String :=
  match getAt p.tools tool with
  | none => none
  | some t =>
    match t.resource with
    | none => none
    | some i =>
      match getAt args i with
      | some (.str s) => some s
      | _ => none

/-- `expires_at.is_none_or(|end| time < end)`. -/
def expiryOk (expiresAt : Option Nat) (time : Nat) : Bool :=
  match expiresAt with
  | none => true
  | some e => decide (time < e)

/-- `resource.is_none_or(|p| resource_of(..).is_some_and(|r| p.matches(r)))`. -/
def resourceOk (p : Policy) (resource : Option Pattern) (tool : Nat) (args : List Value) : Bool :=
  match resource with
  | none => true
  | some pat =>
    match resourceOf p tool args with
    | some r => pat.accepts r
    | none => false

/-- `grant_matches`: a grant of `owner` (the caller or one of its delegators)
matches a call when it is `owner`'s grant for the call's tool, has not
expired, its resource pattern matches the call's resource, and every
condition holds on the call's arguments and the CALLING agent `req.agent`
(not `owner`). -/
def grantMatches (p : Policy) (gr : Grant) (owner : Nat) (req : Request)
    (sets : List (List String)) : Bool :=
  gr.agent == owner && gr.tool == req.tool && expiryOk gr.expiresAt req.time &&
    resourceOk p gr.resource req.tool req.args &&
    gr.args.all (fun c => c.eval req.args req.agent sets)

/-- The search of `select`, from grant index `i` over the grants `gs` left. -/
def selectFrom (p : Policy) (l : Ledger) (agent : Nat) (req : Request)
    (sets : List (List String)) : Nat → List Grant → Option Nat
  | _, [] => none
  | i, gr :: rest =>
    if (grantMatches p gr agent req sets && hasQuota l i) then some i
    else selectFrom p l agent req sets (i + 1) rest

/-- `select`: the first grant of `agent`, in policy order, that matches the
request and still has quota. -/
def select (p : Policy) (l : Ledger) (agent : Nat) (req : Request)
    (sets : List (List String)) : Option Nat :=
  selectFrom p l agent req sets 0 p.grants

/-- `match o { Some(a) => f(a), None => n }`: a non-recursive helper, so
that proofs can case on the `Option` without unfolding a `match`. -/
def optElim {α β : Type} (o : Option α) (n : β) (f : α → β) : β :=
  match o with
  | some a => f a
  | none => n

/-- The rest of admission after the first agent's grant `g`: a failure
stays a failure; otherwise `g` is prefixed to the grants taken. -/
def consUsed (g : Nat) : Except Nat (List Nat × List Quota) → Except Nat (List Nat × List Quota)
  | .error a => .error a
  | .ok r => .ok (g :: r.1, r.2)

/-- Admission along an explicit chain of agents: one unit from the serving
grant of each, in order, all or nothing. `.error a` names the first agent
with no serving grant; `.ok (used, ledger)` lists the grants taken, in
chain order. -/
def admitChain (p : Policy) (req : Request) (sets : List (List String)) :
    List Quota → List Nat → Except Nat (List Nat × List Quota)
  | l, [] => .ok ([], l)
  | l, agent :: rest =>
    optElim (select p l agent req sets) (Except.error agent)
      (fun g => consUsed g (admitChain p req sets (consume l g).2 rest))

/-- Admission of a request (`spec/mod.rs`, the function after `select`): along
`agent_chain(req.agent)`, the caller first and the root last. -/
def admitCall (p : Policy) (l : Ledger) (req : Request) (sets : List (List String)) :
    Except Nat (List Nat × Ledger) :=
  admitChain p req sets l (p.agentChain req.agent)

/-- `spec::refund`: gives back one unit of each grant in `used`, in order. -/
def refund (p : Policy) : List Quota → List Nat → List Quota
  | l, [] => l
  | l, g :: gs => refund p (refundOne p l g) gs

/-! ## The life of a call (`spec/mod.rs`: `Event`, `Outcome`, `State`, `step`) -/

/-- `Event`. -/
inductive Event where
  | call (id : String) (req : Request)
  | approve (id : String)
  | reject (id : String)
  | succeeded (id : String) (discovered : List String)
  | failed (id : String)
  | unknown (id : String)
  /-- A task seeds values into discovered set number `set`. -/
  | seed (set : Nat) (values : List String)
  deriving Repr

/-- `Outcome`. -/
inductive Outcome where
  | allow (used : List Nat)
  | pause (used : List Nat)
  | deny
  /-- Approve/reject/result events: accepted and applied. -/
  | applied
  /-- An event about a call that is not in the state it needs. -/
  | invalid
  deriving DecidableEq, Repr

/-- Association-list lookup (`BTreeMap::get`). -/
def mapFind : List (String × List Nat) → String → Option (List Nat)
  | [], _ => none
  | (k, v) :: rest, key => if k == key then some v else mapFind rest key

/-- Association-list removal of every entry for `key`. -/
def mapErase : List (String × List Nat) → String → List (String × List Nat)
  | [], _ => []
  | (k, v) :: rest, key => if k == key then mapErase rest key else (k, v) :: mapErase rest key

/-- `BTreeMap::insert`: replaces any entry for `key`. -/
def mapInsert (m : List (String × List Nat)) (key : String) (v : List Nat) :
    List (String × List Nat) :=
  (key, v) :: mapErase m key

/-- `State`. The maps are association lists with at most one entry per key
(Rust: `BTreeMap`), so two states that Rust considers equal may list their
entries in a different order here; the discovered sets are lists (Rust:
`BTreeSet`). -/
structure State where
  ledger : Ledger
  /-- Calls waiting for an approval, with the units reserved for them. -/
  paused : List (String × List Nat)
  /-- Admitted calls whose result has not been reported. -/
  running : List (String × List Nat)
  /-- Discovered-resource sets, indexed like `Policy.sets`. -/
  sets : List (List String)
  deriving Repr

/-- `State::initial`. -/
def State.initial (p : Policy) : State :=
  { ledger := Ledger.initial p, paused := [], running := [], sets := p.sets.map (fun _ => []) }

/-- `policy.grants[g].approval` (an index out of range reads `false`; Rust panics). -/
def grantApproval (p : Policy) (g : Nat) : Bool :=
  match getAt p.grants g with
  | some gr => gr.approval
  | none => false

/-- `set.extend(discovered)`, keeping one copy of each value. -/
def addAll : List String → List String → List String
  | acc, [] => acc
  | acc, x :: xs => addAll (if acc.contains x then acc else acc ++ [x]) xs

/-- The set a succeeded call's discovered values go to: the caller's own
(first) grant's `discovers` (an index out of range reads `none`; Rust panics). -/
def discoverTarget (p : Policy) (used : List Nat) : Option Nat :=
  match used with
  | [] => none
  | g :: _ =>
    match getAt p.grants g with
    | some gr => gr.discovers
    | none => none

/-- The sets after a succeeded call: `next.sets.get_mut(target)` extended. -/
def discoverInto (p : Policy) (used : List Nat) (discovered : List String)
    (sets : List (List String)) : List (List String) :=
  match discoverTarget p used with
  | some k => modifyAt (fun acc => addAll acc discovered) sets k
  | none => sets

/-- `Checks`: what the checks before the ledger (well-formedness, flows, call
rules, path rules, counts, obligations: steps 1–4) decided about a call, or
about a paused call at approval time. An input of `step`, as in `spec/mod.rs`. -/
inductive Checks where
  | pass
  /-- A rule asks a human (the ledger still reserves the units). -/
  | pause
  | deny
  deriving DecidableEq, Repr

/-- The rest of `step`, `Event::Call`, once admission took the units `used`
(leaving `ledger`): reserve them and pause (a grant needs approval, or
`needsPause`, which is `checks == Checks::Pause`) or run. -/
def stepAdmitted (p : Policy) (s : State) (id : String) (used : List Nat) (ledger : Ledger)
    (needsPause : Bool) : Outcome × State :=
  if (used.any (grantApproval p) || needsPause) then
    (.pause used, { s with ledger := ledger, paused := mapInsert s.paused id used })
  else
    (.allow used, { s with ledger := ledger, running := mapInsert s.running id used })

/-- `step`, `Event::Call`, on the result of admission: deny (state unchanged)
if it failed, `stepAdmitted` otherwise. -/
def afterAdmit (p : Policy) (s : State) (id : String) (needsPause : Bool) :
    Except Nat (List Nat × Ledger) → Outcome × State
  | .error _ => (.deny, s)
  | .ok r => stepAdmitted p s id r.1 r.2 needsPause

/-- `step`, `Event::Call`: denied by the checks (state unchanged, no
admission), or admission. The arms `pass`/`pause` pass Rust's
`checks == Checks::Pause` as a `Bool`. -/
def stepCall (p : Policy) (s : State) (id : String) (req : Request) (checks : Checks) :
    Outcome × State :=
  match checks with
  | .deny => (.deny, s)
  | .pass => afterAdmit p s id false (admitCall p s.ledger req s.sets)
  | .pause => afterAdmit p s id true (admitCall p s.ledger req s.sets)

/-- `step`, `Event::Approve`, on the entry that `paused.remove(id)` finds.
Approval is a just-in-time re-authorization: if the re-check denies, the
reserved units are refunded, the call leaves `paused` and the answer is
`deny`; otherwise the call moves to `running` and the answer is
`allow used`. No entry: `invalid`, state unchanged. -/
def approveWith (p : Policy) (s : State) (id : String) (checks : Checks) :
    Option (List Nat) → Outcome × State
  | some used =>
    match checks with
    | .deny =>
      (.deny, { s with paused := mapErase s.paused id, ledger := refund p s.ledger used })
    | _ =>
      (.allow used,
        { s with paused := mapErase s.paused id, running := mapInsert s.running id used })
  | none => (.invalid, s)

/-- `step`, `Event::Approve`. -/
def stepApprove (p : Policy) (s : State) (id : String) (checks : Checks) : Outcome × State :=
  approveWith p s id checks (mapFind s.paused id)

/-- `step`, `Event::Reject`, on the entry `paused.remove(id)` finds: a paused
call is dropped and its units refunded; no entry: `invalid`. -/
def rejectWith (p : Policy) (s : State) (id : String) : Option (List Nat) → Outcome × State
  | some used =>
    (.applied, { s with paused := mapErase s.paused id, ledger := refund p s.ledger used })
  | none => (.invalid, s)

/-- `step`, `Event::Reject`. -/
def stepReject (p : Policy) (s : State) (id : String) : Outcome × State :=
  rejectWith p s id (mapFind s.paused id)

/-- `step`, `Event::Succeeded`, on the entry `running.remove(id)` finds: the
call ends; its discovered values are added. -/
def succeedWith (p : Policy) (s : State) (id : String) (discovered : List String) :
    Option (List Nat) → Outcome × State
  | some used =>
    (.applied, { s with running := mapErase s.running id,
                        sets := discoverInto p used discovered s.sets })
  | none => (.invalid, s)

/-- `step`, `Event::Succeeded`. -/
def stepSucceeded (p : Policy) (s : State) (id : String) (discovered : List String) :
    Outcome × State :=
  succeedWith p s id discovered (mapFind s.running id)

/-- `step`, `Event::Failed`, on the entry `running.remove(id)` finds: the
call ends and its units are refunded. -/
def failWith (p : Policy) (s : State) (id : String) : Option (List Nat) → Outcome × State
  | some used =>
    (.applied, { s with running := mapErase s.running id, ledger := refund p s.ledger used })
  | none => (.invalid, s)

/-- `step`, `Event::Failed`. -/
def stepFailed (p : Policy) (s : State) (id : String) : Outcome × State :=
  failWith p s id (mapFind s.running id)

/-- `step`, `Event::Unknown`, on the entry `running.remove(id)` finds: the
call ends; the effect may have happened, so the units stay spent. -/
def unknownWith (s : State) (id : String) : Option (List Nat) → Outcome × State
  | some _ => (.applied, { s with running := mapErase s.running id })
  | none => (.invalid, s)

/-- `step`, `Event::Unknown`. -/
def stepUnknown (s : State) (id : String) : Outcome × State :=
  unknownWith s id (mapFind s.running id)

/-- `step`, `Event::Seed`, on the set that `next.sets.get_mut(set)` finds:
`some _` (the index is in range): the values are added to set `k` and the
answer is `applied`; `none` (the index is out of range): `invalid`, state
unchanged. `k` and `values` are the event's. -/
def seedWith (s : State) (k : Nat) (values : List String) :
    Option (List String) → Outcome × State
  | some _ => (.applied, { s with sets := modifyAt (fun acc => addAll acc values) s.sets k })
  | none => (.invalid, s)

/-- `step`, `Event::Seed { set, values }`: a task seeds `values` into
discovered set `k` (`set` in Rust). `getAt s.sets k` is `none` exactly when
`k` is out of range (`s.sets.length ≤ k`; the theorems
`getAt_none_of_length_le` and `getAt_some_of_lt` in the proofs), as
`get_mut` is. Only `sets` changes: the ledger and the calls stay as they are
(`seed_keeps_ledger`). -/
def stepSeed (s : State) (k : Nat) (values : List String) : Outcome × State :=
  seedWith s k values (getAt s.sets k)

/-- Whether a call id is held: paused or running. `spec/mod.rs`:
`state.paused.contains_key(id) || state.running.contains_key(id)`. -/
def isHeld (s : State) (id : String) : Bool :=
  (mapFind s.paused id).isSome || (mapFind s.running id).isSome

/-- `step`, `Event::Call`, first of all: a call whose id is held (paused or
running) is `invalid` and changes nothing (the monitor rejects it as a
duplicate call); otherwise `r`, the step proper. -/
def guardFresh (s : State) (id : String) (r : Outcome × State) : Outcome × State :=
  match isHeld s id with
  | true => (.invalid, s)
  | false => r

/-- `step`: one step of the ledger semantics. `checks` is what steps 1–4
decided about the event's call (for calls and approvals; the other events
ignore it). -/
def step (p : Policy) (s : State) (e : Event) (checks : Checks) : Outcome × State :=
  match e with
  | .call id req => guardFresh s id (stepCall p s id req checks)
  | .approve id => stepApprove p s id checks
  | .reject id => stepReject p s id
  | .succeeded id discovered => stepSucceeded p s id discovered
  | .failed id => stepFailed p s id
  | .unknown id => stepUnknown s id
  | .seed k values => stepSeed s k values

/-! ## Quota scope: grants shared by a tenant's sessions (`pool.rs`, the `_in` functions of `spec/mod.rs`)

A shared grant (`quota N per tenant`) draws on a pool that all sessions of a
tenant share (`SharedCounts`, keyed by grant name); the session's ledger
entry of a shared grant counts the units THIS session holds (taken and not
given back). `stepIn` is Rust's `step_in` definition by definition.

Rust's `step` is `step_in` with the session's private pool
(`privatePool`). Lean's `step` above is Rust's `step` for policies without
shared grants (`stepIn_unshared`); from `State.initial` it never serves a
shared grant (`Ledger.initial` starts its entry at `limited 0`, as Rust's
`Ledger::initial` does, and only selected grants are consumed or refunded),
so on a policy with shared grants Rust's `step` is `stepIn` with
`privatePool` (what the FFI answers with), not Lean's `step`. -/

/-- `SharedCounts`: the units taken from each shared grant by all the
tenant's sessions, by grant name (`taken(name)` is 0 when absent). Rust's
map is a function here; only `taken`, `take` and `give_back` are observed. -/
structure SharedCounts where
  taken : String → Nat

/-- `SharedCounts::default`: nothing taken. -/
def SharedCounts.empty : SharedCounts := ⟨fun _ => 0⟩

/-- `SharedCounts::set_taken`. -/
def SharedCounts.setTaken (c : SharedCounts) (name : String) (n : Nat) : SharedCounts :=
  ⟨fun x => if x = name then n else c.taken x⟩

/-- `SharedCounts::remaining`: `quota − taken`, never below zero. -/
def SharedCounts.remaining (c : SharedCounts) (name : String) (quota : Nat) : Nat :=
  quota - c.taken name

/-- `SharedCounts::take`: one more unit taken. -/
def SharedCounts.take (c : SharedCounts) (name : String) : SharedCounts :=
  c.setTaken name (c.taken name + 1)

/-- `SharedCounts::give_back`: one unit fewer taken, never below zero. -/
def SharedCounts.giveBack (c : SharedCounts) (name : String) : SharedCounts :=
  c.setTaken name (c.taken name - 1)

/-- `policy.grants[g].name` (`""` out of range; Rust panics). -/
def grantName (p : Policy) (g : Nat) : String :=
  match getAt p.grants g with
  | some gr => gr.name
  | none => ""

/-- The count of a shared grant's entry (`Some(Limited(n)) => n`, else 0). -/
def heldEntry : Option Quota → Nat
  | some (.limited n) => n
  | _ => 0

/-- `Ledger::held`: the units this session holds of shared grant `g` (0 for
any other grant). -/
def Ledger.held (p : Policy) (l : Ledger) (g : Nat) : Nat :=
  if p.isShared g then heldEntry (getAt l g) else 0

/-- A shared grant's entry after the session takes one more unit. -/
def Quota.inc : Quota → Quota
  | .limited n => .limited (n + 1)
  | .unlimited => .unlimited

/-- `Ledger::consume` with shared grants: a shared grant's entry (units
held) goes up; any other grant is `consumeAt`. -/
def consumeShared (p : Policy) (l : Ledger) (g : Nat) : Ledger :=
  if p.isShared g then modifyAt Quota.inc l g else consumeAt l g

/-- `Ledger::refund` with shared grants: a shared grant's entry goes down
(never below zero: `Quota.dec`); any other grant is `refundOne`. -/
def refundShared (p : Policy) (l : Ledger) (g : Nat) : Ledger :=
  if p.isShared g then modifyAt Quota.dec l g else refundOne p l g

/-- The match on the grant's quota in the shared arm of spec `has_quota`:
a limited quota with units left in the pool (`remaining(name, q) > 0`); an
unlimited one: no (a validated policy shares only limited grants). -/
def quotaLeft (pool : SharedCounts) (name : String) : Quota → Bool
  | .limited q => decide (0 < pool.remaining name q)
  | .unlimited => false

/-- The shared arm of spec `has_quota` (`false` for an unknown grant). -/
def sharedAvailable (pool : SharedCounts) : Option Grant → Bool
  | some gr => quotaLeft pool gr.name gr.quota
  | none => false

/-- spec `has_quota`: a shared grant asks the pool, any other the ledger. -/
def hasQuotaIn (p : Policy) (l : Ledger) (pool : SharedCounts) (g : Nat) : Bool :=
  if p.isShared g then sharedAvailable pool (getAt p.grants g) else hasQuota l g

/-- spec `take` (renamed: `take` reads like `List.take`): the ledger and the
pool after taking one unit of `g`. -/
def takeUnit (p : Policy) (l : Ledger) (pool : SharedCounts) (g : Nat) : Ledger × SharedCounts :=
  (consumeShared p l g, if p.isShared g then pool.take (grantName p g) else pool)

/-- spec `give_back`: a shared grant the session holds no unit of is left
alone; otherwise the pool (shared) and the ledger get one unit back. -/
def giveBack (p : Policy) (l : Ledger) (pool : SharedCounts) (g : Nat) : Ledger × SharedCounts :=
  if p.isShared g then
    (if Ledger.held p l g = 0 then (l, pool)
     else (refundShared p l g, pool.giveBack (grantName p g)))
  else (refundShared p l g, pool)

/-- The loop of spec `private_pool`. -/
def privatePoolFrom (p : Policy) (l : Ledger) : SharedCounts → List Nat → SharedCounts
  | pool, [] => pool
  | pool, g :: rest =>
    privatePoolFrom p l (optElim (getAt p.grants g) pool
      (fun gr => pool.setTaken gr.name (Ledger.held p l g))) rest

/-- spec `private_pool`: the pool of a session with no tenant pool, where
each shared grant's units taken are the units this session holds. -/
def privatePool (p : Policy) (l : Ledger) : SharedCounts :=
  privatePoolFrom p l SharedCounts.empty p.shared

/-- The search of spec `select_in`, from grant index `i`. -/
def selectFromIn (p : Policy) (l : Ledger) (pool : SharedCounts) (agent : Nat) (req : Request)
    (sets : List (List String)) : Nat → List Grant → Option Nat
  | _, [] => none
  | i, gr :: rest =>
    if (grantMatches p gr agent req sets && hasQuotaIn p l pool i) then some i
    else selectFromIn p l pool agent req sets (i + 1) rest

/-- spec `select_in`: the first grant of `agent` that matches and still has
quota (shared grants: in `pool`). -/
def selectIn (p : Policy) (l : Ledger) (pool : SharedCounts) (agent : Nat) (req : Request)
    (sets : List (List String)) : Option Nat :=
  selectFromIn p l pool agent req sets 0 p.grants

/-- `consUsed` with the pool. -/
def consUsedIn (g : Nat) :
    Except Nat (List Nat × Ledger × SharedCounts) → Except Nat (List Nat × Ledger × SharedCounts)
  | .error a => .error a
  | .ok r => .ok (g :: r.1, r.2)

/-- The loop of spec `admit_in` along an explicit chain. -/
def admitChainIn (p : Policy) (req : Request) (sets : List (List String)) :
    Ledger → SharedCounts → List Nat → Except Nat (List Nat × Ledger × SharedCounts)
  | l, pool, [] => .ok ([], l, pool)
  | l, pool, agent :: rest =>
    optElim (selectIn p l pool agent req sets) (Except.error agent)
      (fun g => consUsedIn g
        (admitChainIn p req sets (takeUnit p l pool g).1 (takeUnit p l pool g).2 rest))

/-- spec `admit_in`: one unit from the serving grant of each agent of the
chain, all or nothing; shared grants from the pool. -/
def admitIn (p : Policy) (l : Ledger) (pool : SharedCounts) (req : Request)
    (sets : List (List String)) : Except Nat (List Nat × Ledger × SharedCounts) :=
  admitChainIn p req sets l pool (p.agentChain req.agent)

/-- spec `refund_in`: `give_back` of each grant of `used`, in order. -/
def refundIn (p : Policy) : Ledger → SharedCounts → List Nat → Ledger × SharedCounts
  | l, pool, [] => (l, pool)
  | l, pool, g :: gs => refundIn p (giveBack p l pool g).1 (giveBack p l pool g).2 gs

/-- `step_in`, `Event::Call`, on the result of `admit_in`. -/
def afterAdmitIn (p : Policy) (s : State) (pool : SharedCounts) (id : String) (needsPause : Bool) :
    Except Nat (List Nat × Ledger × SharedCounts) → Outcome × State × SharedCounts
  | .error _ => (.deny, s, pool)
  | .ok r =>
    ((stepAdmitted p s id r.1 r.2.1 needsPause).1, (stepAdmitted p s id r.1 r.2.1 needsPause).2, r.2.2)

/-- `step_in`, `Event::Call`. -/
def stepCallIn (p : Policy) (s : State) (pool : SharedCounts) (id : String) (req : Request)
    (checks : Checks) : Outcome × State × SharedCounts :=
  match checks with
  | .deny => (.deny, s, pool)
  | .pass => afterAdmitIn p s pool id false (admitIn p s.ledger pool req s.sets)
  | .pause => afterAdmitIn p s pool id true (admitIn p s.ledger pool req s.sets)

/-- `step_in`, `Event::Approve`, on the entry `paused.remove(id)` finds. -/
def approveWithIn (p : Policy) (s : State) (pool : SharedCounts) (id : String) (checks : Checks) :
    Option (List Nat) → Outcome × State × SharedCounts
  | some used =>
    match checks with
    | .deny =>
      (.deny, { s with paused := mapErase s.paused id,
                       ledger := (refundIn p s.ledger pool used).1 },
        (refundIn p s.ledger pool used).2)
    | _ =>
      (.allow used,
        { s with paused := mapErase s.paused id, running := mapInsert s.running id used }, pool)
  | none => (.invalid, s, pool)

/-- `step_in`, `Event::Reject`. -/
def rejectWithIn (p : Policy) (s : State) (pool : SharedCounts) (id : String) :
    Option (List Nat) → Outcome × State × SharedCounts
  | some used =>
    (.applied, { s with paused := mapErase s.paused id,
                        ledger := (refundIn p s.ledger pool used).1 },
      (refundIn p s.ledger pool used).2)
  | none => (.invalid, s, pool)

/-- `step_in`, `Event::Failed`. -/
def failWithIn (p : Policy) (s : State) (pool : SharedCounts) (id : String) :
    Option (List Nat) → Outcome × State × SharedCounts
  | some used =>
    (.applied, { s with running := mapErase s.running id,
                        ledger := (refundIn p s.ledger pool used).1 },
      (refundIn p s.ledger pool used).2)
  | none => (.invalid, s, pool)

/-- `(outcome, state)` with the pool unchanged. -/
def withPool (r : Outcome × State) (pool : SharedCounts) : Outcome × State × SharedCounts :=
  (r.1, r.2, pool)

/-- `guardFresh` for `step_in`: a call whose id is held is `invalid`, and
neither the state nor the pool changes. -/
def guardFreshIn (s : State) (pool : SharedCounts) (id : String)
    (r : Outcome × State × SharedCounts) : Outcome × State × SharedCounts :=
  match isHeld s id with
  | true => (.invalid, s, pool)
  | false => r

/-- `step_in`: one step of the ledger semantics against the tenant's pool;
the answer carries the pool after the step (changed only by events that
take or give back units of a shared grant). -/
def stepIn (p : Policy) (s : State) (pool : SharedCounts) (e : Event) (checks : Checks) :
    Outcome × State × SharedCounts :=
  match e with
  | .call id req => guardFreshIn s pool id (stepCallIn p s pool id req checks)
  | .approve id => approveWithIn p s pool id checks (mapFind s.paused id)
  | .reject id => rejectWithIn p s pool id (mapFind s.paused id)
  | .succeeded id discovered => withPool (stepSucceeded p s id discovered) pool
  | .failed id => failWithIn p s pool id (mapFind s.running id)
  | .unknown id => withPool (stepUnknown s id) pool
  | .seed k values => withPool (stepSeed s k values) pool

end Agenra
