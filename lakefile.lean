import Lake
open Lake DSL

package agenra

-- The executable reference semantics (`lean/Agenra/…`), mirroring `rust/core/src/spec.rs`.
@[default_target]
lean_lib Agenra where
  srcDir := "lean"

-- Theorems about `Agenra` (`proofs/AgenraProofs/…`).
@[default_target]
lean_lib AgenraProofs where
  srcDir := "proofs"

-- Certificates written by `agenra certify OLD NEW --emit-lean
-- certificates/Certificates/<Name>.lean` (docs/lean.md). Not a default
-- target: `lake build Certificates`.
lean_lib Certificates where
  srcDir := "certificates"
  globs := #[.submodules `Certificates]
