/-
Agenra.Cbor: the CBOR subset of the FFI wire format (`docs/lean-ffi.md`),
the Lean twin of `ffi/src/cbor.rs`: integers (a bignum, tag 2 or 3, only
when the magnitude is at least 2^64), UTF-8 text, arrays, `false`, `true`,
`null`; definite lengths; shortest heads (the encoder writes them, the
decoder rejects anything else).

Executable code for the FFI only: no theorem mentions it. The decoder is
structurally recursive on a depth fuel; the encoder is `partial` (it
recurses through the nested `List Cbor`).

Core Lean 4 only. NOT CHECKED BY A LEAN TOOLCHAIN (none on the
development machines; see `docs/lean-ffi.md`).
-/

namespace Agenra

/-- A value of the wire format's CBOR subset. -/
inductive Cbor where
  | int (i : Int)
  | text (s : String)
  | arr (items : List Cbor)
  | bool (b : Bool)
  | null

namespace Cbor

/-- Arrays may nest this deep (as `MAX_DEPTH` in `ffi/src/cbor.rs`). -/
def maxDepth : Nat := 256

/-- `n` bytes from position `i`, big-endian. -/
def readBE (b : ByteArray) (i n : Nat) : Nat :=
  (List.range n).foldl (fun acc k => acc * 256 + (b.get! (i + k)).toNat) 0

/-- The head at `i`: (major type, argument, position after the head). -/
def readHead (b : ByteArray) (i : Nat) : Except String (Nat × Nat × Nat) :=
  if i < b.size then
    let byte := (b.get! i).toNat
    let major := byte / 32
    let info := byte % 32
    if info < 24 then
      .ok (major, info, i + 1)
    else if info ≤ 27 then
      let len := 2 ^ (info - 24)
      if i + 1 + len ≤ b.size then
        let n := readBE b (i + 1) len
        let least := if len = 1 then 24 else 2 ^ (4 * len)
        if n < least then
          .error s!"byte {i}: a length or integer is not in its shortest form"
        else
          .ok (major, n, i + 1 + len)
      else
        .error s!"byte {i}: the input ends inside a value"
    else
      .error s!"byte {i}: initial byte {byte} is outside the subset"
  else
    .error s!"byte {i}: the input ends inside a value"

/-- One value at `i`, arrays nested at most `fuel - 1` deep; the value and
the position after it. -/
def decodeAt (b : ByteArray) : Nat → Nat → Except String (Cbor × Nat)
  | 0, i => .error s!"byte {i}: arrays nested deeper than {maxDepth}"
  | fuel + 1, i => do
    let (major, n, j) ← readHead b i
    match major with
    | 0 => pure (Cbor.int (Int.ofNat n), j)
    | 1 => pure (Cbor.int (-1 - Int.ofNat n), j)
    | 3 =>
      if j + n ≤ b.size then
        match String.fromUTF8? (b.extract j (j + n)) with
        | some s => pure (Cbor.text s, j + n)
        | none => throw s!"byte {i}: text is not valid UTF-8"
      else
        throw s!"byte {i}: the input ends inside a value"
    | 4 =>
      -- Every element takes at least one byte.
      if n ≤ b.size - j then
        let (items, k) ← (List.range n).foldlM
          (fun (acc : List Cbor × Nat) _ => do
            let (v, k) ← decodeAt b fuel acc.2
            pure (v :: acc.1, k))
          ([], j)
        pure (Cbor.arr items.reverse, k)
      else
        throw s!"byte {i}: the input ends inside a value"
    | 6 =>
      if n = 2 ∨ n = 3 then
        let (m, len, k) ← readHead b j
        if m = 2 ∧ 1 ≤ len ∧ k + len ≤ b.size ∧ (b.get! k).toNat ≠ 0 then
          let magnitude := readBE b k len
          if magnitude < 2 ^ 64 then
            throw s!"byte {i}: bignum out of range or not minimal"
          else if n = 2 then
            pure (Cbor.int (Int.ofNat magnitude), k + len)
          else
            pure (Cbor.int (-1 - Int.ofNat magnitude), k + len)
        else
          throw s!"byte {i}: bignum out of range or not minimal"
      else
        throw s!"byte {i}: a tag outside the subset"
    | 7 =>
      if n = 20 then pure (Cbor.bool false, j)
      else if n = 21 then pure (Cbor.bool true, j)
      else if n = 22 then pure (Cbor.null, j)
      else throw s!"byte {i}: a simple value outside the subset"
    | _ => throw s!"byte {i}: a major type outside the subset"

/-- Exactly one value filling the input. -/
def decode (b : ByteArray) : Except String Cbor := do
  let (v, j) ← decodeAt b (maxDepth + 1) 0
  if j = b.size then pure v
  else throw s!"byte {j}: {b.size - j} bytes after the value"

/-- The low `n` bytes of `v`, big-endian. -/
def beBytes : Nat → Nat → List UInt8
  | 0, _ => []
  | n + 1, v => beBytes n (v / 256) ++ [(v % 256).toUInt8]

/-- How many bytes `v` needs (`fuel` bounds the loop; `v + 1` is enough). -/
def byteLength : Nat → Nat → Nat
  | 0, _ => 0
  | fuel + 1, v => if v = 0 then 0 else 1 + byteLength fuel (v / 256)

/-- A head in its shortest form. -/
def head (major n : Nat) : List UInt8 :=
  let m := major * 32
  if n < 24 then [(m + n).toUInt8]
  else if n < 2 ^ 8 then (m + 24).toUInt8 :: beBytes 1 n
  else if n < 2 ^ 16 then (m + 25).toUInt8 :: beBytes 2 n
  else if n < 2 ^ 32 then (m + 26).toUInt8 :: beBytes 4 n
  else (m + 27).toUInt8 :: beBytes 8 n

/-- An integer: major type 0 or 1, or a bignum from 2^64 on. -/
def encodeInt (i : Int) : List UInt8 :=
  let (major, tag, n) :=
    if 0 ≤ i then ((0 : Nat), (0xc2 : UInt8), i.toNat) else (1, 0xc3, (-1 - i).toNat)
  if n < 2 ^ 64 then head major n
  else
    let len := byteLength (n + 1) n
    tag :: (head 2 len ++ beBytes len n)

/-- The encoding of a value (shortest heads). -/
partial def encodeList : Cbor → List UInt8
  | .int i => encodeInt i
  | .text s => head 3 s.toUTF8.size ++ s.toUTF8.data.toList
  | .arr items => head 4 items.length ++ (items.map encodeList).foldr (· ++ ·) []
  | .bool false => [0xf4]
  | .bool true => [0xf5]
  | .null => [0xf6]

/-- The encoding as a `ByteArray`. -/
def encode (c : Cbor) : ByteArray :=
  ⟨(encodeList c).toArray⟩

/-- A non-negative integer. -/
def nat (n : Nat) : Cbor := .int (Int.ofNat n)

end Cbor

end Agenra
