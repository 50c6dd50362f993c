/-
Agenra.Ffi: the model's types on the wire (`docs/lean-ffi.md`, "Encoding of
the model's types") and the `@[export]`ed entry points that the Rust crate
`agenra-lean` (`ffi/`, feature `lean`) calls.

Every export is `ByteArray → ByteArray` (one argument, so none is a nullary
global): the input is one CBOR array, the answer `[0, result]`, or
`[1, message]` when the input cannot be decoded. Parameters and results are
owned (the Lean default for `@[export]`).

The decoders are the Lean twins of `impl Wire for ...` in
`ffi/src/wire.rs`; `ffi/src/loopback.rs` answers every entry point with the
Rust spec behind the same bytes, and the differential suite
(`tests/reference_*.rs`) compares the two with `cargo test --features lean`.
Recursive decoders (values, conditions) take a depth fuel.

Wire version 2 adds `agenra_ffi_check_simulation`: the ledger abstraction of
`agenra certify` (`Agenra.Ctx`) and a relation (`List Agenra.PState`) in,
`checkSimulation ctx R` out (`Agenra.Certify`).

Wire version 3 carries quota scope: a grant's name (the key of a shared
grant in the tenant's pool), the policy's shared grants (`Policy.shared`,
Rust `shared_grants`), and `agenra_ffi_step_in` (`stepIn`, with the tenant's
pool in and out). `agenra_ffi_step` and `agenra_ffi_select` are Rust's
`step`/`select`, that is `stepIn`/`selectIn` with the session's private
pool (`privatePool`): on a policy without shared grants they are `step` and
`select` (`stepIn_unshared`); with shared grants, a shared grant's ledger
entry counts the units the session holds, as in Rust.

Executable code for the FFI only: no theorem mentions it.
Core Lean 4 only. NOT CHECKED BY A LEAN TOOLCHAIN.
-/
import Agenra.Cbor
import Agenra.Ledger
import Agenra.Certify

namespace Agenra

namespace Wire

/-- The wire version (`VERSION` in `ffi/src/wire.rs`). -/
def version : String := "agenra-ffi/3"

/-- Values and conditions nest at most this deep. -/
def depth : Nat := 128

abbrev R : Type → Type := Except String

def asNat (c : Cbor) (path : String) : R Nat :=
  match c with
  | .int i => if 0 ≤ i then pure i.toNat else throw s!"{path}: expected an unsigned integer"
  | _ => throw s!"{path}: expected an unsigned integer"

def asInt (c : Cbor) (path : String) : R Int :=
  match c with
  | .int i => pure i
  | _ => throw s!"{path}: expected an integer"

def asText (c : Cbor) (path : String) : R String :=
  match c with
  | .text s => pure s
  | _ => throw s!"{path}: expected a text string"

def asBool (c : Cbor) (path : String) : R Bool :=
  match c with
  | .bool b => pure b
  | _ => throw s!"{path}: expected a boolean"

def asArr (c : Cbor) (path : String) : R (List Cbor) :=
  match c with
  | .arr items => pure items
  | _ => throw s!"{path}: expected an array"

/-- Each element of an array, read by `f` with its path. -/
def asList {α : Type} (f : Cbor → String → R α) (c : Cbor) (path : String) : R (List α) := do
  let items ← asArr c path
  ((List.range items.length).zip items).mapM (fun (k, x) => f x s!"{path}[{k}]")

/-- `null`, or a value read by `f`. -/
def asOpt {α : Type} (f : Cbor → String → R α) (c : Cbor) (path : String) : R (Option α) :=
  match c with
  | .null => pure none
  | _ => do pure (some (← f c path))

/-- A tagged array `[tag, fields...]`. -/
def asTagged (c : Cbor) (path : String) : R (Nat × List Cbor) :=
  match c with
  | .arr (.int t :: fields) =>
    if 0 ≤ t then pure (t.toNat, fields) else throw s!"{path}: expected a tagged array"
  | _ => throw s!"{path}: expected a tagged array [tag, fields...]"

def badShape {α : Type} (path : String) : R α :=
  throw s!"{path}: expected a known constructor tag with its fields"

def decodePattern (c : Cbor) (path : String) : R Pattern := do
  match ← asTagged c path with
  | (0, [s]) => pure (.exact (← asText s s!"{path}[1]"))
  | (1, [s]) => pure (.startsWith (← asText s s!"{path}[1]"))
  | (2, [s]) => pure (.glob (← asText s s!"{path}[1]"))
  | _ => badShape path

def decodeDecimal (c : Cbor) (path : String) : R Decimal := do
  match ← asArr c path with
  | [m, s] => pure { mantissa := (← asInt m s!"{path}[0]"), scale := (← asNat s s!"{path}[1]") }
  | _ => throw s!"{path}: expected [mantissa, scale]"

/-- A value; lists nest at most `fuel` deep. -/
def decodeValue : Nat → Cbor → String → R Value
  | 0, _, path => throw s!"{path}: nested too deeply"
  | fuel + 1, c, path => do
    match ← asTagged c path with
    | (0, [s]) => pure (.str (← asText s s!"{path}[1]"))
    | (1, [i]) => pure (.int (← asInt i s!"{path}[1]"))
    | (2, [b]) => pure (.bool (← asBool b s!"{path}[1]"))
    | (3, [d]) => pure (.decimal (← decodeDecimal d s!"{path}[1]"))
    | (4, [vs]) => pure (.list (← asList (decodeValue fuel) vs s!"{path}[1]"))
    | (5, []) => pure .null
    | _ => badShape path

def decodeQuant (c : Cbor) (path : String) : R Quant := do
  match ← asNat c path with
  | 0 => pure .all
  | 1 => pure .any
  | _ => throw s!"{path}: expected 0 (all) or 1 (any)"

def decodeArgOp (c : Cbor) (path : String) : R ArgOp := do
  let (t, fields) ← asTagged c path
  let p := s!"{path}[1]"
  let value := decodeValue depth
  match t, fields with
  | 0, [x] => pure (.eq (← value x p))
  | 1, [x] => pure (.ne (← value x p))
  | 2, [x] => pure (.oneOf (← asList value x p))
  | 3, [x] => pure (.notIn (← asList value x p))
  | 4, [x] => pure (.startsWith (← asText x p))
  | 5, [x] => pure (.endsWith (← asText x p))
  | 6, [x] => pure (.matchesPattern (← decodePattern x p))
  | 7, [x] => pure (.contains (← value x p))
  | 8, [x] => pure (.lt (← decodeDecimal x p))
  | 9, [x] => pure (.le (← decodeDecimal x p))
  | 10, [x] => pure (.gt (← decodeDecimal x p))
  | 11, [x] => pure (.ge (← decodeDecimal x p))
  | 12, [x] => pure (.inSet (← asNat x p))
  | 13, [x] => pure (.notInSet (← asNat x p))
  | _, _ => badShape path

/-- A condition in Rust's form (`And`/`Or` of lists), built with
`ArgCond.allOf`/`ArgCond.anyOf`; nesting at most `fuel` deep. -/
def decodeArgCond : Nat → Cbor → String → R ArgCond
  | 0, _, path => throw s!"{path}: nested too deeply"
  | fuel + 1, c, path => do
    match ← asTagged c path with
    | (0, [param, quant, op]) =>
      pure (.test (← asNat param s!"{path}[1]") (← decodeQuant quant s!"{path}[2]")
        (← decodeArgOp op s!"{path}[3]"))
    | (1, [agents]) => pure (.agent (← asList asNat agents s!"{path}[1]"))
    | (2, [d]) => pure (.not (← decodeArgCond fuel d s!"{path}[1]"))
    | (3, [cs]) => pure (ArgCond.allOf (← asList (decodeArgCond fuel) cs s!"{path}[1]"))
    | (4, [cs]) => pure (ArgCond.anyOf (← asList (decodeArgCond fuel) cs s!"{path}[1]"))
    | _ => badShape path

def decodeQuota (c : Cbor) (path : String) : R Quota := do
  match ← asTagged c path with
  | (0, [n]) => pure (.limited (← asNat n s!"{path}[1]"))
  | (1, []) => pure .unlimited
  | _ => badShape path

def decodeGrant (c : Cbor) (path : String) : R Grant := do
  match ← asArr c path with
  | [agent, tool, resource, args, quota, approval, expiresAt, discovers, name] =>
    pure {
      name := (← asText name s!"{path}.name")
      agent := (← asNat agent s!"{path}.agent")
      tool := (← asNat tool s!"{path}.tool")
      resource := (← asOpt decodePattern resource s!"{path}.resource")
      args := (← asList (decodeArgCond depth) args s!"{path}.args")
      quota := (← decodeQuota quota s!"{path}.quota")
      approval := (← asBool approval s!"{path}.approval")
      expiresAt := (← asOpt asNat expiresAt s!"{path}.expires_at")
      discovers := (← asOpt asNat discovers s!"{path}.discovers") }
  | _ => throw s!"{path}: expected an array of 9 elements"

def decodeTool (c : Cbor) (path : String) : R Tool := do
  match ← asArr c path with
  | [r] => pure { resource := (← asOpt asNat r s!"{path}.resource") }
  | _ => throw s!"{path}: expected an array of 1 element"

def decodeAgent (c : Cbor) (path : String) : R Agent := do
  match ← asArr c path with
  | [p] => pure { parent := (← asOpt asNat p s!"{path}.parent") }
  | _ => throw s!"{path}: expected an array of 1 element"

/-- The shared grants after `prev` go up strictly and are below `n` (the
number of grants), as `validate.rs` requires and the Rust decoder checks. -/
def sharedOkFrom (n : Nat) : Option Nat → List Nat → Bool
  | _, [] => true
  | prev, g :: rest =>
    decide (g < n) && optElim prev true (fun q => decide (q < g)) && sharedOkFrom n (some g) rest

def decodePolicy (c : Cbor) (path : String) : R Policy := do
  match ← asArr c path with
  | [tools, agents, grants, sets, shared] =>
    let tools ← asList decodeTool tools s!"{path}.tools"
    let agents ← asList decodeAgent agents s!"{path}.agents"
    let grants ← asList decodeGrant grants s!"{path}.grants"
    let sets ← asList asText sets s!"{path}.sets"
    let shared ← asList asNat shared s!"{path}.shared"
    if sharedOkFrom grants.length none shared then
      pure { tools := tools, agents := agents, grants := grants, sets := sets, shared := shared }
    else
      throw s!"{path}.shared: expected strictly ascending grant indexes in range of the policy's grants"
  | _ => throw s!"{path}: expected an array of 5 elements"

def decodeSets (c : Cbor) (path : String) : R (List (List String)) :=
  asList (asList asText) c path

def decodeRequest (c : Cbor) (path : String) : R Request := do
  match ← asArr c path with
  | [agent, tool, args, time] =>
    pure {
      agent := (← asNat agent s!"{path}.agent")
      tool := (← asNat tool s!"{path}.tool")
      args := (← asList (decodeValue depth) args s!"{path}.args")
      time := (← asNat time s!"{path}.time") }
  | _ => throw s!"{path}: expected an array of 4 elements"

def decodeEvent (c : Cbor) (path : String) : R Event := do
  let (p1, p2) := (s!"{path}[1]", s!"{path}[2]")
  match ← asTagged c path with
  | (0, [id, req]) => pure (.call (← asText id p1) (← decodeRequest req p2))
  | (1, [id]) => pure (.approve (← asText id p1))
  | (2, [id]) => pure (.reject (← asText id p1))
  | (3, [id, vs]) => pure (.succeeded (← asText id p1) (← asList asText vs p2))
  | (4, [id]) => pure (.failed (← asText id p1))
  | (5, [id]) => pure (.unknown (← asText id p1))
  | (6, [k, vs]) => pure (.seed (← asNat k p1) (← asList asText vs p2))
  | _ => badShape path

def decodeChecks (c : Cbor) (path : String) : R Checks := do
  match ← asNat c path with
  | 0 => pure .pass
  | 1 => pure .pause
  | 2 => pure .deny
  | _ => throw s!"{path}: expected 0 (pass), 1 (pause) or 2 (deny)"

/-- `[id, [grant]]` entries. -/
def decodeHeld (c : Cbor) (path : String) : R (List (String × List Nat)) :=
  asList (fun e p => do
    match ← asArr e p with
    | [id, used] => pure ((← asText id s!"{p}[0]"), (← asList asNat used s!"{p}[1]"))
    | _ => throw s!"{p}: expected [id, [grant]]") c path

def decodeState (c : Cbor) (path : String) : R State := do
  match ← asArr c path with
  | [ledger, paused, running, sets] =>
    pure {
      ledger := (← asList decodeQuota ledger s!"{path}.ledger")
      paused := (← decodeHeld paused s!"{path}.paused")
      running := (← decodeHeld running s!"{path}.running")
      sets := (← decodeSets sets s!"{path}.sets") }
  | _ => throw s!"{path}: expected an array of 4 elements"

/-- No name twice. -/
def distinctNames : List String → Bool
  | [] => true
  | x :: xs => !(xs.contains x) && distinctNames xs

/-- The tenant's pool: `[[name, taken]]` (wire version 3), a name at most
once; the counts of all other names are 0. Also returns the names read, so
that the answer can list them again. -/
def decodePool (c : Cbor) (path : String) : R (SharedCounts × List String) := do
  let entries : List (String × Nat) ← asList (fun e p => do
    match ← asArr e p with
    | [name, taken] => pure ((← asText name s!"{p}[0]"), (← asNat taken s!"{p}[1]"))
    | _ => throw s!"{p}: expected [name, taken]") c path
  if distinctNames (entries.map Prod.fst) then
    pure (entries.foldl (fun (pool : SharedCounts) (kn : String × Nat) => pool.setTaken kn.1 kn.2)
        SharedCounts.empty,
      entries.map Prod.fst)
  else
    throw s!"{path}: expected a grant name at most once"

/-- The names of the policy's shared grants (those in range). -/
def sharedNames (p : Policy) : List String :=
  p.shared.filterMap (fun g => (getAt p.grants g).map Grant.name)

/-- The pool on the wire: every name among `names` (each once) with a
count above 0. `stepIn` changes only the counts of shared grants, so the
names of the input pool and of the policy's shared grants list them all. -/
def encodePool (names : List String) (pool : SharedCounts) : Cbor :=
  Cbor.arr ((addAll [] names).filterMap (fun (k : String) =>
    if pool.taken k = 0 then (none : Option Cbor)
    else some (Cbor.arr [Cbor.text k, Cbor.nat (pool.taken k)])))

def natList (ns : List Nat) : Cbor := .arr (ns.map Cbor.nat)

def encodeQuota : Quota → Cbor
  | .limited n => .arr [Cbor.nat 0, Cbor.nat n]
  | .unlimited => .arr [Cbor.nat 1]

def encodeOutcome : Outcome → Cbor
  | .allow used => .arr [Cbor.nat 0, natList used]
  | .pause used => .arr [Cbor.nat 1, natList used]
  | .deny => .arr [Cbor.nat 2]
  | .applied => .arr [Cbor.nat 3]
  | .invalid => .arr [Cbor.nat 4]

def encodeHeld (m : List (String × List Nat)) : Cbor :=
  .arr (m.map fun (id, used) => .arr [.text id, natList used])

def encodeState (s : State) : Cbor :=
  .arr [
    .arr (s.ledger.map encodeQuota),
    encodeHeld s.paused,
    encodeHeld s.running,
    .arr (s.sets.map fun xs => .arr (xs.map Cbor.text))]

/-! ### Wire version 2: the certify abstraction (`SimCtx`, `PState` in `ffi/src/wire.rs`) -/

/-- `[agent, Quota, approval, discovers: null | uint]`. -/
def decodeLGrant (c : Cbor) (path : String) : R LGrant := do
  match ← asArr c path with
  | [agentC, quotaC, approvalC, discoversC] =>
    let agent ← asNat agentC s!"{path}.agent"
    let quota ← decodeQuota quotaC s!"{path}.quota"
    let approval ← asBool approvalC s!"{path}.approval"
    let discovers ← asOpt asNat discoversC s!"{path}.discovers"
    pure { agent := agent, quota := quota, approval := approval, discovers := discovers }
  | _ => throw s!"{path}: expected an array of 4 elements"

/-- `[rule_pauses, approval_denials, history_rules, rules_read_sets]`. -/
def decodeFlags (c : Cbor) (path : String) : R Flags := do
  match ← asArr c path with
  | [rpC, adC, hrC, rsC] =>
    let rp ← asBool rpC s!"{path}.rule_pauses"
    let ad ← asBool adC s!"{path}.approval_denials"
    let hr ← asBool hrC s!"{path}.history_rules"
    let rs ← asBool rsC s!"{path}.rules_read_sets"
    pure { rulePauses := rp, approvalDenials := ad, historyRules := hr, rulesReadSets := rs }
  | _ => throw s!"{path}: expected an array of 4 elements"

/-- `[chain: [uint], region, old: [uint], new: [uint], types]`. -/
def decodeClass (c : Cbor) (path : String) : R Class := do
  match ← asArr c path with
  | [chainC, regionC, oldC, newC, typesC] =>
    let chain ← asList asNat chainC s!"{path}.chain"
    let region ← asNat regionC s!"{path}.region"
    let oldG ← asList asNat oldC s!"{path}.old"
    let newG ← asList asNat newC s!"{path}.new"
    let types ← asNat typesC s!"{path}.types"
    pure { chain := chain, region := region, old := oldG, new := newG, types := types }
  | _ => throw s!"{path}: expected an array of 5 elements"

/-- `[old: [LGrant], new: [LGrant], tested: [uint], seeds: [uint], Flags, classes: [Class]]`. -/
def decodeCtx (c : Cbor) (path : String) : R Ctx := do
  match ← asArr c path with
  | [oldC, newC, testedC, seedsC, flagsC, classesC] =>
    let oldG ← asList decodeLGrant oldC s!"{path}.old"
    let newG ← asList decodeLGrant newC s!"{path}.new"
    let tested ← asList asNat testedC s!"{path}.tested"
    let seeds ← asList asNat seedsC s!"{path}.seeds"
    let flags ← decodeFlags flagsC s!"{path}.flags"
    let classes ← asList decodeClass classesC s!"{path}.classes"
    pure { old := oldG, new := newG, tested := tested, seeds := seeds, flags := flags,
           classes := classes }
  | _ => throw s!"{path}: expected an array of 6 elements"

/-- A held call: `[old_paused, new_paused, old: [uint], new: [uint]]`. -/
def decodeHeldCall (c : Cbor) (path : String) : R Held := do
  match ← asArr c path with
  | [opC, npC, oldC, newC] =>
    let op ← asBool opC s!"{path}.old_paused"
    let np ← asBool npC s!"{path}.new_paused"
    let oldG ← asList asNat oldC s!"{path}.old"
    let newG ← asList asNat newC s!"{path}.new"
    pure { oldPaused := op, newPaused := np, old := oldG, new := newG }
  | _ => throw s!"{path}: expected an array of 4 elements"

/-- An entry of `calls`: `[Held, count]`. -/
def decodeCall (c : Cbor) (path : String) : R (Held × Nat) := do
  match ← asArr c path with
  | [hC, nC] =>
    let h ← decodeHeldCall hC s!"{path}[0]"
    let n ← asNat nC s!"{path}[1]"
    pure (h, n)
  | _ => throw s!"{path}: expected [Held, count]"

/-- The held calls after `prev` go up strictly in `heldCmp` order. -/
def ascendingFrom : Held → List (Held × Nat) → Bool
  | _, [] => true
  | prev, (h, _) :: rest =>
    match heldCmp prev h with
    | Ordering.lt => ascendingFrom h rest
    | _ => false

/-- The held calls go up strictly in `heldCmp` order (Rust's key order,
the order `upsert` keeps). -/
def ascending : List (Held × Nat) → Bool
  | [] => true
  | (h, _) :: rest => ascendingFrom h rest

/-- A pair state: `[region, old: [Quota], new: [Quota], calls: [[Held, count]], types]`. -/
def decodePState (c : Cbor) (path : String) : R PState := do
  match ← asArr c path with
  | [regionC, oldC, newC, callsC, typesC] =>
    let region ← asNat regionC s!"{path}.region"
    let oldL ← asList decodeQuota oldC s!"{path}.old"
    let newL ← asList decodeQuota newC s!"{path}.new"
    let calls ← asList decodeCall callsC s!"{path}.calls"
    let types ← asNat typesC s!"{path}.types"
    if ascending calls then
      pure { region := region, old := oldL, new := newL, calls := calls, types := types }
    else
      throw s!"{path}.calls: expected held calls in strictly ascending order"
  | _ => throw s!"{path}: expected an array of 5 elements"

/-- `[0, result]`, or `[1, message]`. -/
def respond (r : R Cbor) : ByteArray :=
  Cbor.encode <|
    match r with
    | Except.ok v => .arr [Cbor.nat 0, v]
    | Except.error e => .arr [Cbor.nat 1, .text e]

/-- Decodes the input array of entry point `name`. -/
def input (bytes : ByteArray) (name : String) : R (List Cbor) := do
  let c ← Cbor.decode bytes
  asArr c s!"the input of {name}"

def inputPath (name : String) (k : Nat) : String := s!"the input of {name}[{k}]"

end Wire

open Wire

/-- `[]` (ignored) → the wire version. -/
@[export agenra_ffi_version]
def ffiVersion (_bytes : ByteArray) : ByteArray :=
  respond (pure (.text Wire.version))

/-- `[Pattern, text]` → bool: `Pattern.accepts`. -/
@[export agenra_ffi_pattern_matches]
def ffiPatternMatches (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_pattern_matches"
  respond do
    match ← input bytes name with
    | [p, t] =>
      let pat ← decodePattern p (inputPath name 0)
      let text ← asText t (inputPath name 1)
      pure (.bool (pat.accepts text))
    | _ => throw s!"the input of {name}: expected an array of 2 elements"

/-- `[glob, text]` → bool: `globChars`. -/
@[export agenra_ffi_glob_matches]
def ffiGlobMatches (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_glob_matches"
  respond do
    match ← input bytes name with
    | [g, t] =>
      let glob ← asText g (inputPath name 0)
      let text ← asText t (inputPath name 1)
      pure (.bool (globChars glob.toList text.toList))
    | _ => throw s!"the input of {name}: expected an array of 2 elements"

/-- `[ArgOp, Quant, Value, Sets]` → bool: `ArgOp.eval`. -/
@[export agenra_ffi_arg_op_eval]
def ffiArgOpEval (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_arg_op_eval"
  respond do
    match ← input bytes name with
    | [op, q, v, sets] =>
      let op ← decodeArgOp op (inputPath name 0)
      let q ← decodeQuant q (inputPath name 1)
      let v ← decodeValue depth v (inputPath name 2)
      let sets ← decodeSets sets (inputPath name 3)
      pure (.bool (op.eval q v sets))
    | _ => throw s!"the input of {name}: expected an array of 4 elements"

/-- `[ArgCond, [Value], agent, Sets]` → bool: `ArgCond.eval`. -/
@[export agenra_ffi_arg_cond_eval]
def ffiArgCondEval (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_arg_cond_eval"
  respond do
    match ← input bytes name with
    | [c, args, agent, sets] =>
      let c ← decodeArgCond depth c (inputPath name 0)
      let args ← asList (decodeValue depth) args (inputPath name 1)
      let agent ← asNat agent (inputPath name 2)
      let sets ← decodeSets sets (inputPath name 3)
      pure (.bool (c.eval args agent sets))
    | _ => throw s!"the input of {name}: expected an array of 4 elements"

/-- `[Policy, Grant, owner, Request, Sets]` → bool: `grantMatches`. -/
@[export agenra_ffi_grant_matches]
def ffiGrantMatches (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_grant_matches"
  respond do
    match ← input bytes name with
    | [p, g, owner, req, sets] =>
      let p ← decodePolicy p (inputPath name 0)
      let g ← decodeGrant g (inputPath name 1)
      let owner ← asNat owner (inputPath name 2)
      let req ← decodeRequest req (inputPath name 3)
      let sets ← decodeSets sets (inputPath name 4)
      pure (.bool (grantMatches p g owner req sets))
    | _ => throw s!"the input of {name}: expected an array of 5 elements"

/-- `[Policy, Ledger, agent, Request, Sets]` → `null` or uint: `select`. -/
@[export agenra_ffi_select]
def ffiSelect (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_select"
  respond do
    match ← input bytes name with
    | [p, l, agent, req, sets] =>
      let p ← decodePolicy p (inputPath name 0)
      let l ← asList decodeQuota l (inputPath name 1)
      let agent ← asNat agent (inputPath name 2)
      let req ← decodeRequest req (inputPath name 3)
      let sets ← decodeSets sets (inputPath name 4)
      -- Rust's `select`: `select_in` with the session's private pool.
      pure (match selectIn p l (privatePool p l) agent req sets with
        | some g => Cbor.nat g
        | none => .null)
    | _ => throw s!"the input of {name}: expected an array of 5 elements"

/-- `[Policy, State, Event, Checks]` → `[Outcome, State]`: Rust's `step`,
that is `stepIn` with the session's private pool (`privatePool`); `step`
itself on a policy without shared grants (`stepIn_unshared`). -/
@[export agenra_ffi_step]
def ffiStep (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_step"
  respond do
    match ← input bytes name with
    | [p, s, e, checks] =>
      let p ← decodePolicy p (inputPath name 0)
      let s ← decodeState s (inputPath name 1)
      let e ← decodeEvent e (inputPath name 2)
      let checks ← decodeChecks checks (inputPath name 3)
      let (o, s', _) := stepIn p s (privatePool p s.ledger) e checks
      pure (.arr [encodeOutcome o, encodeState s'])
    | _ => throw s!"the input of {name}: expected an array of 4 elements"

/-- `[Policy, State, Pool, Event, Checks]` → `[Outcome, State, Pool]`:
`stepIn`, one step of a session against the tenant's pool (wire version 3). -/
@[export agenra_ffi_step_in]
def ffiStepIn (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_step_in"
  respond do
    match ← input bytes name with
    | [p, s, pool, e, checks] =>
      let p ← decodePolicy p (inputPath name 0)
      let s ← decodeState s (inputPath name 1)
      let (pool, names) ← decodePool pool (inputPath name 2)
      let e ← decodeEvent e (inputPath name 3)
      let checks ← decodeChecks checks (inputPath name 4)
      let (o, s', pool') := stepIn p s pool e checks
      pure (.arr [encodeOutcome o, encodeState s', encodePool (names ++ sharedNames p) pool'])
    | _ => throw s!"the input of {name}: expected an array of 5 elements"

/-- `[Ctx, [PState]]` → bool: `checkSimulation` (wire version 2). -/
@[export agenra_ffi_check_simulation]
def ffiCheckSimulation (bytes : ByteArray) : ByteArray :=
  let name := "agenra_ffi_check_simulation"
  respond do
    match ← input bytes name with
    | [ctxC, relC] =>
      let ctx ← decodeCtx ctxC (inputPath name 0)
      let rel ← asList decodePState relC (inputPath name 1)
      pure (.bool (checkSimulation ctx rel))
    | _ => throw s!"the input of {name}: expected an array of 2 elements"

end Agenra
