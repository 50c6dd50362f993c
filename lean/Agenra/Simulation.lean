/-
Agenra.Simulation: simulation and preservation for any two labelled
transition systems (DESIGN §4), independent of the ledger abstraction.

A system has an initial state and a partial step: `step s e = none` when it
does not accept event `e` in state `s`, otherwise the observation the client
sees and the next state. NEW *preserves* OLD when, along every sequence of
events OLD admits, NEW admits each event too with an observation the
client accepts (`acc`: for Agenra, where OLD allowed NEW allows; where OLD
paused NEW pauses or allows). A *simulation* is a relation between OLD's
and NEW's states that holds initially and that every step OLD takes is
matched by a step of NEW with an accepted observation, back into the
relation.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/

namespace Agenra

/-- A transition system with states `S`, events `E` and observations `O`. -/
structure Sys (S E O : Type) where
  init : S
  step : S → E → Option (O × S)

/-- From states `s` (OLD) and `t` (NEW), every prefix of `w` that OLD admits
is admitted by NEW with accepted observations. -/
def Accepted {S T E O : Type} (acc : O → O → Prop) (A : Sys S E O) (B : Sys T E O) :
    S → T → List E → Prop
  | _, _, [] => True
  | s, t, e :: es =>
    ∀ (o : O) (s' : S), A.step s e = some (o, s') →
      ∃ (o' : O) (t' : T), B.step t e = some (o', t') ∧ acc o o' ∧ Accepted acc A B s' t' es

/-- NEW (`B`) preserves every workflow OLD (`A`) admits. -/
def PreservesSys {S T E O : Type} (acc : O → O → Prop) (A : Sys S E O) (B : Sys T E O) : Prop :=
  ∀ (w : List E), Accepted acc A B A.init B.init w

/-- A simulation of `A` by `B` with accepted observations. -/
structure IsSimulationSys {S T E O : Type} (acc : O → O → Prop) (A : Sys S E O) (B : Sys T E O)
    (R : S → T → Prop) : Prop where
  initial : R A.init B.init
  step : ∀ (s : S) (t : T) (e : E) (o : O) (s' : S), R s t → A.step s e = some (o, s') →
    ∃ (o' : O) (t' : T), B.step t e = some (o', t') ∧ acc o o' ∧ R s' t'

end Agenra
