/-
Simulation ⇒ preservation for any two transition systems
(`lean/Agenra/Simulation.lean`).

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Simulation

namespace Agenra

theorem accepted_of_related {S T E O : Type} (acc : O → O → Prop) (A : Sys S E O)
    (B : Sys T E O) (R : S → T → Prop) (hs : IsSimulationSys acc A B R) :
    ∀ (w : List E) (s : S) (t : T), R s t → Accepted acc A B s t w := by
  intro w
  induction w with
  | nil =>
    intro s t _
    exact True.intro
  | cons e es ih =>
    intro s t hst o s' hA
    obtain ⟨o', t', hB, hacc, hR⟩ := hs.step s t e o s' hst hA
    exact ⟨o', t', hB, hacc, ih s' t' hR⟩

/-- **simulationSys_preserves.** Simulation ⇒ preservation, for any two
systems (DESIGN §4): if a relation holds between the initial states and
every step OLD admits is matched by NEW with an observation the client
accepts, back into the relation, then NEW preserves every workflow OLD
admits. -/
theorem simulationSys_preserves {S T E O : Type} (acc : O → O → Prop) (A : Sys S E O)
    (B : Sys T E O) (R : S → T → Prop) (hs : IsSimulationSys acc A B R) :
    PreservesSys acc A B := by
  intro w
  exact accepted_of_related acc A B R hs w A.init B.init hs.initial

/-- **identity_preserves.** Every system preserves itself when the client
accepts equal observations: equality is a simulation. -/
theorem identity_preserves {S E O : Type} (A : Sys S E O) : PreservesSys (@Eq O) A A :=
  simulationSys_preserves (@Eq O) A A (@Eq S)
    ⟨rfl, fun s t e o s' hst hA => ⟨o, s', by rw [← hst]; exact hA, rfl, rfl⟩⟩

end Agenra
