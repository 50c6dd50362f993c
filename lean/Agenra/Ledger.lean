/-
Agenra.Ledger: the reference semantics of consumable authority (grants,
matching, the ledger and the life of a call), mirrored definition by
definition from `rust/core/src/spec.rs` and the parts of `policy.rs`,
`ledger.rs`, `value.rs` and `pattern.rs` it uses.

Core Lean 4 only (no Mathlib, no Batteries). Every definition is total and
executable: structural recursion (or a fuel argument), no `partial`.
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

/-! ## Values and argument tests (`value.rs`) -/

/-- `ParamType`. -/
inductive ParamType where
  | str
  | int
  | bool
  deriving DecidableEq, Repr

/-- `Value`: a scalar argument. Rust's `i64` is an unbounded `Int` here. -/
inductive Value where
  | str (s : String)
  | int (i : Int)
  | bool (b : Bool)
  deriving DecidableEq, Repr

/-- `Value::ty`. -/
def Value.ty : Value → ParamType
  | .str _ => .str
  | .int _ => .int
  | .bool _ => .bool

/-- `ArgOp`: a test on one argument value. Constructor names differ from Rust
where the Rust name is a Lean keyword: `In` is `oneOf`, `Prefix` is
`startsWith`, `Suffix` is `endsWith`, `Matches` is `matchesPattern`. -/
inductive ArgOp where
  | eq (v : Value)
  | ne (v : Value)
  | oneOf (vs : List Value)
  | startsWith (p : String)
  | endsWith (p : String)
  | matchesPattern (p : Pattern)
  | lt (n : Int)
  | le (n : Int)
  | gt (n : Int)
  | ge (n : Int)
  /-- Membership in discovered-resource set number `k`. -/
  | inSet (k : Nat)
  deriving Repr

/-- `sets.get(k).is_some_and(|m| m.contains(s))`. A discovered set is a list
of strings here (Rust: `BTreeSet<String>`); only membership is observed. -/
def setContains (sets : List (List String)) (k : Nat) (s : String) : Bool :=
  match getAt sets k with
  | some m => m.contains s
  | none => false

/-- `ArgOp::eval`: a test applied to a value of the wrong type is false. -/
def ArgOp.eval (op : ArgOp) (v : Value) (sets : List (List String)) : Bool :=
  match op, v with
  | .eq w, _ => w == v
  | .ne w, _ => w.ty == v.ty && w != v
  | .oneOf ws, _ => ws.contains v
  | .startsWith pre, .str s => strStartsWith s pre
  | .endsWith suf, .str s => strEndsWith s suf
  | .matchesPattern pat, .str s => pat.accepts s
  | .lt n, .int i => decide (i < n)
  | .le n, .int i => decide (i ≤ n)
  | .gt n, .int i => decide (n < i)
  | .ge n, .int i => decide (n ≤ i)
  | .inSet k, .str s => setContains sets k s
  | _, _ => false

/-- `ArgPredicate`: a test on the argument at position `param`. -/
structure ArgPredicate where
  param : Nat
  op : ArgOp
  deriving Repr

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

/-- `Grant` (without its `name`, which no decision reads). -/
structure Grant where
  agent : Nat
  tool : Nat
  /-- Pattern on the tool's resource argument (`none`: any resource). -/
  resource : Option Pattern := none
  /-- All must hold. -/
  args : List ArgPredicate := []
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

/-- `Ledger::initial`: every grant at its full quota. -/
def Ledger.initial (p : Policy) : Ledger :=
  p.grants.map Grant.quota

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

/-! ## Requests, matching, selection and admission (`spec.rs`) -/

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

/-- `args.get(t.param).is_some_and(|v| t.op.eval(v, sets))`. -/
def argTestOk (args : List Value) (sets : List (List String)) (t : ArgPredicate) : Bool :=
  match getAt args t.param with
  | some v => t.op.eval v sets
  | none => false

/-- `grant_matches`: for the call's agent and tool, not expired, resource
pattern matching, every argument test holding. -/
def grantMatches (p : Policy) (gr : Grant) (agent tool : Nat) (args : List Value)
    (time : Nat) (sets : List (List String)) : Bool :=
  gr.agent == agent && gr.tool == tool && expiryOk gr.expiresAt time &&
    resourceOk p gr.resource tool args && gr.args.all (argTestOk args sets)

/-- The search of `select`, from grant index `i` over the grants `gs` left. -/
def selectFrom (p : Policy) (l : Ledger) (agent : Nat) (req : Request)
    (sets : List (List String)) : Nat → List Grant → Option Nat
  | _, [] => none
  | i, gr :: rest =>
    if (grantMatches p gr agent req.tool req.args req.time sets && hasQuota l i) then some i
    else selectFrom p l agent req sets (i + 1) rest

/-- `select`: the first grant of `agent`, in policy order, that matches the
request and still has quota. -/
def select (p : Policy) (l : Ledger) (agent : Nat) (req : Request)
    (sets : List (List String)) : Option Nat :=
  selectFrom p l agent req sets 0 p.grants

/-- Admission along an explicit chain of agents: one unit from the serving
grant of each, in order, all or nothing. `.error a` names the first agent
with no serving grant; `.ok (used, ledger)` lists the grants taken, in
chain order. -/
def admitChain (p : Policy) (req : Request) (sets : List (List String)) :
    List Quota → List Nat → Except Nat (List Nat × List Quota)
  | l, [] => .ok ([], l)
  | l, agent :: rest =>
    match select p l agent req sets with
    | none => .error agent
    | some g =>
      match admitChain p req sets (consume l g).2 rest with
      | .error a => .error a
      | .ok r => .ok (g :: r.1, r.2)

/-- Admission of a request (spec.rs, the function after `select`): along
`agent_chain(req.agent)`, the caller first and the root last. -/
def admitCall (p : Policy) (l : Ledger) (req : Request) (sets : List (List String)) :
    Except Nat (List Nat × Ledger) :=
  admitChain p req sets l (p.agentChain req.agent)

/-- `refund` (spec.rs): gives back one unit of each grant in `used`, in order. -/
def refund (p : Policy) : List Quota → List Nat → List Quota
  | l, [] => l
  | l, g :: gs => refund p (refundOne p l g) gs

/-! ## The life of a call (`spec.rs`: `Event`, `Outcome`, `State`, `step`) -/

/-- `Event`. -/
inductive Event where
  | call (id : String) (req : Request)
  | approve (id : String)
  | reject (id : String)
  | succeeded (id : String) (discovered : List String)
  | failed (id : String)
  | unknown (id : String)
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

/-- `step`, `Event::Call`: run admission; deny (state unchanged) if it fails;
otherwise reserve the units and pause (a grant needs approval, or
`needsPause`) or run. -/
def stepCall (p : Policy) (s : State) (id : String) (req : Request) (needsPause : Bool) :
    Outcome × State :=
  match admitCall p s.ledger req s.sets with
  | .error _ => (.deny, s)
  | .ok (used, ledger) =>
    if (used.any (grantApproval p) || needsPause) then
      (.pause used, { s with ledger := ledger, paused := mapInsert s.paused id used })
    else
      (.allow used, { s with ledger := ledger, running := mapInsert s.running id used })

/-- `step`, `Event::Approve`: a paused call starts running. -/
def stepApprove (s : State) (id : String) : Outcome × State :=
  match mapFind s.paused id with
  | some used =>
    (.applied, { s with paused := mapErase s.paused id, running := mapInsert s.running id used })
  | none => (.invalid, s)

/-- `step`, `Event::Reject`: a paused call is dropped and its units refunded. -/
def stepReject (p : Policy) (s : State) (id : String) : Outcome × State :=
  match mapFind s.paused id with
  | some used =>
    (.applied, { s with paused := mapErase s.paused id, ledger := refund p s.ledger used })
  | none => (.invalid, s)

/-- `step`, `Event::Succeeded`: the call ends; its discovered values are added. -/
def stepSucceeded (p : Policy) (s : State) (id : String) (discovered : List String) :
    Outcome × State :=
  match mapFind s.running id with
  | some used =>
    (.applied, { s with running := mapErase s.running id,
                        sets := discoverInto p used discovered s.sets })
  | none => (.invalid, s)

/-- `step`, `Event::Failed`: the call ends and its units are refunded. -/
def stepFailed (p : Policy) (s : State) (id : String) : Outcome × State :=
  match mapFind s.running id with
  | some used =>
    (.applied, { s with running := mapErase s.running id, ledger := refund p s.ledger used })
  | none => (.invalid, s)

/-- `step`, `Event::Unknown`: the call ends; the effect may have happened, so
the units stay spent. -/
def stepUnknown (s : State) (id : String) : Outcome × State :=
  match mapFind s.running id with
  | some _ => (.applied, { s with running := mapErase s.running id })
  | none => (.invalid, s)

/-- `step`: one step of the ledger semantics. `needsPause` says whether a path
rule or obligation asks for a human on this call (the ledger still reserves). -/
def step (p : Policy) (s : State) (e : Event) (needsPause : Bool) : Outcome × State :=
  match e with
  | .call id req => stepCall p s id req needsPause
  | .approve id => stepApprove s id
  | .reject id => stepReject p s id
  | .succeeded id discovered => stepSucceeded p s id discovered
  | .failed id => stepFailed p s id
  | .unknown id => stepUnknown s id

end Agenra
