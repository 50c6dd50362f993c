/-
Theorems about the ledger abstraction and the certificate checker
(`lean/Agenra/Certify.lean`): a simulation gives preservation, and the
checker `checkSimulation` is sound.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Certify
import AgenraProofs.Ledger

namespace Agenra

/-! ## Bool helpers -/

theorem andL {a b : Bool} (h : (a && b) = true) : a = true := by
  rw [Bool.and_eq_true] at h
  exact h.1

theorem andR {a b : Bool} (h : (a && b) = true) : b = true := by
  rw [Bool.and_eq_true] at h
  exact h.2

/-- `allBelow f n` gives `f i` for every `i < n`. -/
theorem allBelow_spec (f : Nat → Bool) : ∀ (n : Nat), allBelow f n = true →
    ∀ (i : Nat), i < n → f i = true := by
  intro n
  induction n with
  | zero =>
    intro _ i hi
    exact absurd hi (by omega)
  | succ n ih =>
    intro h i hi
    have h' : (f n && allBelow f n) = true := h
    by_cases hin : i = n
    · rw [hin]
      exact andL h'
    · exact ih (andR h') i (by omega)

/-- `allB f l` gives `f x` for every `x` that `memB l x` finds. -/
theorem allB_of_memB {α : Type} [DecidableEq α] (f : α → Bool) (x : α) :
    ∀ (l : List α), allB f l = true → memB l x = true → f x = true := by
  intro l
  induction l with
  | nil =>
    intro _ h2
    have h3 : false = true := h2
    cases h3
  | cons a as ih =>
    intro h1 h2
    have h1' : (f a && allB f as) = true := h1
    have h2' : (decide (a = x) || memB as x) = true := h2
    rw [Bool.or_eq_true] at h2'
    cases h2' with
    | inl hx =>
      have hax : a = x := of_decide_eq_true hx
      rw [← hax]
      exact andL h1'
    | inr hm => exact ih (andR h1') hm

/-- A check over the entries of a held-call map covers every key it has. -/
theorem allB_of_hasKey (g : Held → Bool) (h : Held) :
    ∀ (m : List (Held × Nat)), allB (fun (kn : Held × Nat) => g kn.1) m = true →
      hasKey m h = true → g h = true := by
  intro m
  induction m with
  | nil =>
    intro _ h2
    have h3 : false = true := h2
    cases h3
  | cons kn rest ih =>
    cases kn with
    | mk k n =>
      intro h1 h2
      have h1' : (g k && allB (fun (kn : Held × Nat) => g kn.1) rest) = true := h1
      have h2' : (decide (k = h) || hasKey rest h) = true := h2
      rw [Bool.or_eq_true] at h2'
      cases h2' with
      | inl hx =>
        have hkh : k = h := of_decide_eq_true hx
        rw [← hkh]
        exact andL h1'
      | inr hm => exact ih (andR h1') hm

theorem memB_of_startsAt (R : List PState) (s : PState) :
    startsAt R s = true → memB R s = true := by
  cases R with
  | nil =>
    intro h
    have h2 : false = true := h
    cases h2
  | cons r rs =>
    intro h
    have h2 : decide (r = s) = true := h
    show (decide (r = s) || memB rs s) = true
    rw [h2] <;> rfl

/-! ## Simulation ⇒ preservation -/

/-- One event keeps a result that `StepOk R` accepts accepted. -/
theorem afterEvent_ok (ctx : Ctx) (R : PState → Prop)
    (hR : ∀ (s : PState) (e : PEvent), R s → StepOk R (pstep ctx s e))
    (e : PEvent) (r : PStep) (h : StepOk R r) : StepOk R (afterEvent ctx e r) := by
  cases r with
  | notAdmitted => exact h
  | next s => exact hR s e h
  | lost => exact False.elim h
  | unknown => exact False.elim h

theorem run_ok (ctx : Ctx) (R : PState → Prop)
    (hR : ∀ (s : PState) (e : PEvent), R s → StepOk R (pstep ctx s e)) :
    ∀ (w : List PEvent) (r : PStep), StepOk R r → StepOk R (run ctx w r) := by
  intro w
  induction w with
  | nil =>
    intro r h
    exact h
  | cons e es ih =>
    intro r h
    exact ih (afterEvent ctx e r) (afterEvent_ok ctx R hR e r h)

/-- **simulation_preserves.** Simulation ⇒ preservation (DESIGN §4): if some
relation `R` between OLD's and NEW's abstract states holds initially and is
closed under every event OLD admits, then no workflow OLD admits is lost by
NEW. For a user: a certificate that exhibits such an `R` guarantees that
the revised policy keeps serving, with the same decisions as the client
sees them, every sequence of calls, approvals and results the old policy
served (as far as the ledger abstraction sees them). -/
theorem simulation_preserves (ctx : Ctx) (R : PState → Prop) (hs : IsSimulation ctx R) :
    Preserves ctx := by
  intro w
  have h := run_ok ctx R hs.closed w (.next (productInitial ctx)) hs.initial
  constructor
  · intro hl
    rw [hl] at h
    exact h
  · intro hu
    rw [hu] at h
    exact h

/-! ## The checker is sound -/

theorem stepOk_sound (mem : PState → Bool) (r : PStep) (h : stepOk mem r = true) :
    StepOk (fun s => mem s = true) r := by
  cases r with
  | notAdmitted => exact True.intro
  | next t => exact h
  | lost =>
    have h2 : false = true := h
    cases h2
  | unknown =>
    have h2 : false = true := h
    cases h2

/-- `closedAt` covers every event: the ones it does not enumerate are not
accepted by OLD (class index out of range, call not held, type ≥ 64, set
not a task seed). -/
theorem closedAt_sound (ctx : Ctx) (mem : PState → Bool) (s : PState)
    (hc : closedAt ctx mem s = true) :
    ∀ (e : PEvent), stepOk mem (pstep ctx s e) = true := by
  -- `closedAt` restated as its body (checked by unfolding, no metavariables),
  -- so that `andL`/`andR` meet a syntactic `&&` and never have to unify
  -- `(?a && ?b)` through an unfolding.
  have hc' : (allBelow (fun i => stepOk mem (pstep ctx s (.call i false)) &&
        stepOk mem (pstep ctx s (.call i true))) ctx.classes.length &&
      (allB (fun (kn : Held × Nat) => heldOk ctx mem s kn.1) s.calls &&
       allB (fun k => allBelow (fun t => stepOk mem (seedAdd ctx s k t)) 64) ctx.seeds)) =
      true := hc
  have h1 := andL hc'
  have h2 := andL (andR hc')
  have h3 := andR (andR hc')
  intro e
  cases e with
  | call i rp =>
    by_cases hi : i < ctx.classes.length
    · have hb := allBelow_spec _ ctx.classes.length h1 i hi
      cases rp with
      | false => exact andL hb
      | true => exact andR hb
    · have hn : getAt ctx.classes i = none :=
        getAt_none_of_length_le ctx.classes i (by omega)
      show stepOk mem (callAt ctx s rp (getAt ctx.classes i)) = true
      rw [hn] <;> rfl
  | held h w =>
    show stepOk mem (heldAt ctx s h w (hasKey s.calls h)) = true
    cases hk : hasKey s.calls h with
    | false => rfl
    | true =>
      have hok : heldOk ctx mem s h = true :=
        allB_of_hasKey (heldOk ctx mem s) h s.calls h2 hk
      -- `heldOk` restated as its body, as `closedAt` above.
      have hok' : (stepOk mem (heldStep ctx s h .approve) &&
          (stepOk mem (heldStep ctx s h .approvalDenied) &&
          (stepOk mem (heldStep ctx s h .reject) &&
          (stepOk mem (heldStep ctx s h (.succeeded none)) &&
          (allBelow (fun t => stepOk mem (heldStep ctx s h (.succeeded (some t)))) 64 &&
          (stepOk mem (heldStep ctx s h .failed) &&
           stepOk mem (heldStep ctx s h .unknown))))))) = true := hok
      -- `heldAt … true` is `heldStep …` by its defining match.
      show stepOk mem (heldStep ctx s h w) = true
      cases w with
      | approve => exact andL hok'
      | approvalDenied => exact andL (andR hok')
      | reject => exact andL (andR (andR hok'))
      | succeeded ot =>
        cases ot with
        | none => exact andL (andR (andR (andR hok')))
        | some t =>
          by_cases ht : t < 64
          · exact allBelow_spec _ 64 (andL (andR (andR (andR (andR hok'))))) t ht
          · show stepOk mem (if t < 64 then (if h.oldPaused then PStep.notAdmitted
                else succeededSome ctx s h t) else PStep.notAdmitted) = true
            rw [if_neg ht] <;> rfl
      | failed => exact andL (andR (andR (andR (andR (andR hok')))))
      | unknown => exact andR (andR (andR (andR (andR (andR hok')))))
  | seed k t =>
    show stepOk mem (seedAt ctx s k t (memB ctx.seeds k && decide (t < 64))) = true
    cases hg : (memB ctx.seeds k && decide (t < 64)) with
    | false => rfl
    | true =>
      have hm : memB ctx.seeds k = true := andL hg
      have ht : t < 64 := of_decide_eq_true (andR hg)
      have ha := allB_of_memB _ k ctx.seeds h3 hm
      exact allBelow_spec _ 64 ha t ht

/-- A membership test that holds the initial pair, and from every state it
holds passes `closedAt`, describes a simulation. -/
theorem closed_isSimulation (ctx : Ctx) (mem : PState → Bool)
    (h0 : mem (productInitial ctx) = true)
    (hall : ∀ (s : PState), mem s = true → closedAt ctx mem s = true) :
    IsSimulation ctx (fun s => mem s = true) := by
  constructor
  · exact h0
  · intro s e hs
    exact stepOk_sound mem (pstep ctx s e) (closedAt_sound ctx mem s (hall s hs) e)

/-- A relation that passes the checker is a simulation. -/
theorem checkSimulation_isSimulation (ctx : Ctx) (R : List PState)
    (h : checkSimulation ctx R = true) : IsSimulation ctx (fun s => memB R s = true) := by
  -- `checkSimulation` restated as its body (see `closedAt_sound`).
  have h' : (startsAt R (productInitial ctx) &&
      (allB (fits ctx) R && allB (closedAt ctx (memB R)) R)) = true := h
  exact closed_isSimulation ctx (memB R) (memB_of_startsAt R (productInitial ctx) (andL h'))
    (fun s hs => allB_of_memB (closedAt ctx (memB R)) s R (andR (andR h')) hs)

/-- **checkSimulation_sound.** The certificate checker is sound: if
`checkSimulation ctx R` answers `true`, NEW preserves every workflow OLD
admits (over the ledger abstraction `ctx`). For a user: the relation `R` in
a certificate need not be trusted; the checker's `true` is enough. -/
theorem checkSimulation_sound (ctx : Ctx) (R : List PState)
    (h : checkSimulation ctx R = true) : Preserves ctx :=
  simulation_preserves ctx (fun s => memB R s = true) (checkSimulation_isSimulation ctx R h)

/-- Every node the search finds passes what `treeAll` checked. -/
theorem treeAll_of_treeMem (f : PState → Bool) (s : PState) :
    ∀ (T : RelTree), treeAll f T = true → treeMem s T = true → f s = true := by
  intro T
  induction T with
  | leaf =>
    intro _ h2
    have h3 : false = true := h2
    cases h3
  | node l v r ihl ihr =>
    intro h1 h2
    have h1' : (f v && (treeAll f l && treeAll f r)) = true := h1
    have h2' : treeMemAt s v (fun _ => treeMem s l) (fun _ => treeMem s r) (stateCmp s v) =
        true := h2
    cases hc : stateCmp s v with
    | lt =>
      rw [hc] at h2'
      have h3 : treeMem s l = true := h2'
      exact ihl (andL (andR h1')) h3
    | gt =>
      rw [hc] at h2'
      have h3 : treeMem s r = true := h2'
      exact ihr (andR (andR h1')) h3
    | eq =>
      rw [hc] at h2'
      have h3 : decide (v = s) = true := h2'
      have hvs : v = s := of_decide_eq_true h3
      rw [← hvs]
      exact andL h1'

/-- **checkSimulationTree_sound.** The checker on a search tree is sound: if
`checkSimulationTree ctx T` answers `true`, NEW preserves every workflow OLD
admits (over the ledger abstraction `ctx`). For a user: a certificate that
`agenra certify --emit-lean` writes and `lake build` accepts is a proof that
the revision loses no workflow of this abstraction; the relation in the file
need not be trusted, only Lean (its kernel and, through `native_decide`,
its compiler). -/
theorem checkSimulationTree_sound (ctx : Ctx) (T : RelTree)
    (h : checkSimulationTree ctx T = true) : Preserves ctx := by
  -- `checkSimulationTree` restated as its body (see `closedAt_sound`).
  have h' : (treeMem (productInitial ctx) T &&
      (treeAll (fits ctx) T && treeAll (closedAt ctx (fun s => treeMem s T)) T)) = true := h
  have h0 : treeMem (productInitial ctx) T = true := andL h'
  have hall : treeAll (closedAt ctx (fun s => treeMem s T)) T = true := andR (andR h')
  exact simulation_preserves ctx (fun s => treeMem s T = true)
    (closed_isSimulation ctx (fun s => treeMem s T) h0
      (fun s hs => treeAll_of_treeMem (closedAt ctx (fun s => treeMem s T)) s T hall hs))

end Agenra
