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
--
-- The folder `certificates/Certificates/` is NOT in the repository (emitted
-- certificates are per revision, not source): create it first
-- (`mkdir -p certificates/Certificates`; `--emit-lean` does not create
-- folders). Lake lists the glob's folder only when this library itself is
-- built (`Glob.forEachModuleIn` → `Lean.forEachModuleInDir`, which calls
-- `readDir`, reached from the library's `modules` facet): a plain
-- `lake build` never reads it, and `lake build Certificates` without the
-- folder fails with a "no such file or directory" error, admitting nothing.
-- (Read in the lake sources, `src/lake/Lake/Config/Glob.lean`,
-- `src/lake/Lake/Build/Library.lean`, `src/Lean/Util/Path.lean`; not run.)
lean_lib Certificates where
  srcDir := "certificates"
  globs := #[.submodules `Certificates]
