/-
The books of a limited grant balance, exactly, over whole sessions:
for every grant with quota `limited c`, after any sequence of events that
`step` is given from `State.initial p`,

  units left + units held by paused and running calls
    + units kept by calls that succeeded or ended with an unknown outcome = c

(`quota_books`). "Units kept" is not part of the state (Rust's `State` has
no such counter either): `keptUnits` computes it from the event list, by
running the events through `step` and adding up, for each `succeeded` or
`unknown` event that found its call running, the units of the grant that
call held (`keptBy`). And a call is served from a limited grant only out of
units that are left: the grant's entry drops by exactly the units the call
was served from it (`call_served_from_left`), so a served unit needs
`remaining > 0` before and leaves one less after
(`call_served_only_while_left`).

What these statements rule out (the argument is in `docs/lean.md`, "The
books of a grant"):
* "a success refunds": after a quota-1 grant's call succeeds, left would
  be 1 and kept 1, so left + held + kept = 2 ≠ 1.
* "admission ignores quota": a call served from an entry `limited 0`
  (which `Quota.dec` leaves at 0) would have `0 + 1 = 0` in
  `call_served_from_left`, and held would exceed `c − left − kept` in
  `quota_books`.
* "a denial consumes": a denied call is served from nothing
  (`servedBy .deny = []`), so `call_served_from_left` says its entry stays;
  in `quota_books` a unit that left the entry without being held or kept
  makes the sum fall below `c`.

The equality needs the maps to be well kept (`CallsWf`: one entry per call id in
`paused` and in `running`, and no id in both), which `step` maintains
(`step_wf`), and the one library fact `eq_of_beq` for `String`
(`str_eq_of_beq`).

Style as in `AgenraProofs.Accounting`: `show`, `rw` with the `rfl`
equations, structural induction, `cases`, `by_cases`, `omega`; no `simp`.

NOT YET CHECKED BY A LEAN TOOLCHAIN (see `docs/lean.md`).
-/
import Agenra.Ledger
import AgenraProofs.Ledger
import AgenraProofs.Quota
import AgenraProofs.Construction
import AgenraProofs.Accounting

namespace Agenra

/-! ## Keys of the call maps -/

/-- `==` on call ids is equality. `eq_of_beq` is the field of `LawfulBEq`
that `src/Init/Core.lean` exports (`export LawfulBEq (eq_of_beq)`), stated
`{a b : α} → a == b → a = b` in every copy read (2024 to 2026); `String`'s
`==` is the `DecidableEq` one, and Core states `instance : LawfulBEq String
:= inferInstance` next to `instance [DecidableEq α] : LawfulBEq α`. Not
`beq_iff_eq.mp`: `beq_iff_eq` takes `a b` explicitly in some copies and
implicitly in others, and `.mp` on the explicit form does not elaborate. -/
theorem str_eq_of_beq (a b : String) (h : (a == b) = true) : a = b :=
  eq_of_beq h

/-- Each call id at most once in a map (what `mapInsert` keeps). -/
def Uniq : List (String × List Nat) → Prop
  | [] => True
  | kv :: rest => mapFind rest kv.1 = none ∧ Uniq rest

/-- No call id in both maps. -/
def Apart (a b : List (String × List Nat)) : Prop :=
  ∀ (key : String), mapFind a key = none ∨ mapFind b key = none

/-- The call maps of a state are well kept: one entry per id in each, and
no id both paused and running. -/
def CallsWf (s : State) : Prop :=
  Uniq s.paused ∧ Uniq s.running ∧ Apart s.paused s.running

/-- No entry for `key`: erasing it changes nothing. -/
theorem mapErase_of_none (key : String) : ∀ (m : List (String × List Nat)),
    mapFind m key = none → mapErase m key = m := by
  intro m
  induction m with
  | nil =>
    intro _
    rfl
  | cons kv rest ih =>
    obtain ⟨k, v⟩ := kv
    intro h
    by_cases hk : (k == key) = true
    · rw [mapFind_cons, if_pos hk] at h
      cases h
    · rw [mapFind_cons, if_neg hk] at h
      rw [mapErase_cons, if_neg hk, ih h]

/-- Erasing any key keeps a missing key missing. -/
theorem mapFind_mapErase_none (k key : String) : ∀ (m : List (String × List Nat)),
    mapFind m k = none → mapFind (mapErase m key) k = none := by
  intro m
  induction m with
  | nil =>
    intro _
    rfl
  | cons kv rest ih =>
    obtain ⟨k', v'⟩ := kv
    intro h
    by_cases hk : (k' == k) = true
    · rw [mapFind_cons, if_pos hk] at h
      cases h
    · rw [mapFind_cons, if_neg hk] at h
      by_cases he : (k' == key) = true
      · rw [mapErase_cons, if_pos he]
        exact ih h
      · rw [mapErase_cons, if_neg he, mapFind_cons, if_neg hk]
        exact ih h

theorem uniq_mapErase (key : String) : ∀ (m : List (String × List Nat)),
    Uniq m → Uniq (mapErase m key) := by
  intro m
  induction m with
  | nil =>
    intro _
    exact True.intro
  | cons kv rest ih =>
    obtain ⟨k, v⟩ := kv
    intro hu
    have hu2 : mapFind rest k = none ∧ Uniq rest := hu
    by_cases he : (k == key) = true
    · rw [mapErase_cons, if_pos he]
      exact ih hu2.2
    · rw [mapErase_cons, if_neg he]
      show mapFind (mapErase rest key) k = none ∧ Uniq (mapErase rest key)
      exact ⟨mapFind_mapErase_none k key rest hu2.1, ih hu2.2⟩

theorem uniq_mapInsert (m : List (String × List Nat)) (key : String) (v : List Nat)
    (hu : Uniq m) : Uniq (mapInsert m key v) := by
  show mapFind (mapErase m key) key = none ∧ Uniq (mapErase m key)
  exact ⟨mapFind_mapErase_self m key, uniq_mapErase key m hu⟩

theorem apart_symm (a b : List (String × List Nat)) (h : Apart a b) : Apart b a := by
  intro key
  rcases h key with h1 | h1
  · exact Or.inr h1
  · exact Or.inl h1

theorem apart_erase_left (a b : List (String × List Nat)) (id : String) (h : Apart a b) :
    Apart (mapErase a id) b := by
  intro key
  rcases h key with h1 | h1
  · exact Or.inl (mapFind_mapErase_none key id a h1)
  · exact Or.inr h1

/-- Inserting `id` into `a` keeps `a` and `b` apart when `b` has no entry for `id`. -/
theorem apart_insert (a b : List (String × List Nat)) (id : String) (v : List Nat)
    (hab : Apart a b) (hb : mapFind b id = none) : Apart (mapInsert a id v) b := by
  intro key
  by_cases hk : (id == key) = true
  · have he : id = key := str_eq_of_beq id key hk
    rw [← he]
    exact Or.inr hb
  · rcases hab key with ha | hb2
    · refine Or.inl ?_
      show mapFind ((id, v) :: mapErase a id) key = none
      rw [mapFind_cons, if_neg hk]
      exact mapFind_mapErase_none key id a ha
    · exact Or.inr hb2

/-! ## Units held, exactly -/

/-- In a well-kept map, the entry `mapFind` finds and what `mapErase`
leaves hold exactly what the map held. -/
theorem heldIn_erase_found (g : Nat) (key : String) (used : List Nat) :
    ∀ (m : List (String × List Nat)), Uniq m → mapFind m key = some used →
      heldIn g m = countIn g used + heldIn g (mapErase m key) := by
  intro m
  induction m with
  | nil =>
    intro _ h
    have h2 : (none : Option (List Nat)) = some used := h
    cases h2
  | cons kv rest ih =>
    obtain ⟨k, v⟩ := kv
    intro hu h
    have hu2 : mapFind rest k = none ∧ Uniq rest := hu
    by_cases hk : (k == key) = true
    · rw [mapFind_cons, if_pos hk] at h
      have hv : v = used := Option.some.inj h
      have hkey : k = key := str_eq_of_beq k key hk
      have hr : mapErase rest key = rest := by
        rw [← hkey]
        exact mapErase_of_none k rest hu2.1
      rw [mapErase_cons, if_pos hk, hr, ← hv] <;> rfl
    · rw [mapFind_cons, if_neg hk] at h
      have h3 := ih hu2.2 h
      rw [mapErase_cons, if_neg hk]
      show countIn g v + heldIn g rest = countIn g used + (countIn g v + heldIn g (mapErase rest key))
      omega

/-- Inserting a call under an id the map does not have adds exactly its units. -/
theorem heldIn_insert_fresh (g : Nat) (m : List (String × List Nat)) (id : String)
    (v : List Nat) (h : mapFind m id = none) :
    heldIn g (mapInsert m id v) = countIn g v + heldIn g m := by
  have he : mapErase m id = m := mapErase_of_none id m h
  show countIn g v + heldIn g (mapErase m id) = countIn g v + heldIn g m
  rw [he]

/-! ## Refunds, exactly -/

/-- A refund of `g` below the quota adds exactly `ind g j` to grant `j`. -/
theorem refundOne_exact (p : Policy) (l : Ledger) (g j n c : Nat)
    (hcap : capOf p j = some (.limited c)) (h : getAt l j = some (.limited n))
    (hle : n + ind g j ≤ c) :
    getAt (refundOne p l g) j = some (.limited (n + ind g j)) := by
  by_cases hgj : g = j
  · rw [← hgj] at hcap h hle
    rw [← hgj]
    rw [ind_self] at hle
    show getAt (modifyAt (Quota.refundCapped (capOf p g)) l g) g =
      some (.limited (n + ind g g))
    rw [getAt_modifyAt_self, h, hcap, ind_self]
    show some (if n < c then Quota.limited (n + 1) else Quota.limited n) =
      some (.limited (n + 1))
    rw [if_pos (by omega : n < c)]
  · have hne : j ≠ g := fun e => hgj e.symm
    show getAt (modifyAt (Quota.refundCapped (capOf p g)) l g) j =
      some (.limited (n + ind g j))
    rw [getAt_modifyAt_ne (Quota.refundCapped (capOf p g)) l g j hne, h, ind_ne g j hgj] <;> rfl

/-- A refund of `used` that stays within the quota adds exactly
`countIn j used` units to grant `j` (no unit is lost to the cap). -/
theorem refund_exact (p : Policy) : ∀ (used : List Nat) (l : Ledger) (j n c : Nat),
    capOf p j = some (.limited c) → getAt l j = some (.limited n) →
    n + countIn j used ≤ c →
    getAt (refund p l used) j = some (.limited (n + countIn j used)) := by
  intro used
  induction used with
  | nil =>
    intro l j n c _ h _
    rw [refund_nil, h] <;> rfl
  | cons g gs ih =>
    intro l j n c hcap h hle
    have hle0 : n + (ind g j + countIn j gs) ≤ c := hle
    have h1 := refundOne_exact p l g j n c hcap h (by omega)
    have h2 := ih (refundOne p l g) j (n + ind g j) c hcap h1 (by omega)
    have e : n + ind g j + countIn j gs = n + countIn j (g :: gs) := by
      show n + ind g j + countIn j gs = n + (ind g j + countIn j gs)
      omega
    rw [refund_cons, h2, e]

/-! ## One step balances the books -/

/-- Step `s ⟶ s'`, keeping the units of the calls `kept` for good: for every
limited grant `j` (within its quota before), units left + units held after,
plus the units of `j` that `kept` holds, equal units left + units held before. -/
def Balanced (p : Policy) (s s' : State) (kept : List Nat) : Prop :=
  ∀ (j c n : Nat), capOf p j = some (.limited c) → getAt s.ledger j = some (.limited n) →
    n + heldUnits s j ≤ c →
    ∃ n', getAt s'.ledger j = some (.limited n') ∧
      n' + heldUnits s' j + countIn j kept = n + heldUnits s j

/-- The calls whose units an event keeps spent for good: the running call a
`succeeded` or `unknown` event ends (none if the id is not running). -/
def keptBy (s : State) : Event → List Nat
  | .succeeded id _ => optElim (mapFind s.running id) [] (fun used => used)
  | .unknown id => optElim (mapFind s.running id) [] (fun used => used)
  | _ => []

theorem balanced_refl (p : Policy) (s : State) : Balanced p s s [] := by
  intro j c n _ hn _
  refine ⟨n, hn, ?_⟩
  show n + heldUnits s j + 0 = n + heldUnits s j
  omega

theorem fresh_none (s : State) (id : String) (h : isHeld s id = false) :
    mapFind s.paused id = none ∧ mapFind s.running id = none := by
  revert h
  unfold isHeld
  cases mapFind s.paused id with
  | some u =>
    intro h
    have h2 : true = false := h
    cases h2
  | none =>
    cases mapFind s.running id with
    | some u =>
      intro h
      have h2 : true = false := h
      cases h2
    | none =>
      intro _
      exact ⟨rfl, rfl⟩

theorem stepAdmitted_balanced (p : Policy) (s : State) (id : String) (used : List Nat)
    (l : Ledger) (b : Bool)
    (hf : mapFind s.paused id = none ∧ mapFind s.running id = none)
    (hl : ∀ (j n : Nat), getAt s.ledger j = some (.limited n) →
      ∃ n', getAt l j = some (.limited n') ∧ n' + countIn j used = n) :
    Balanced p s (stepAdmitted p s id used l b).2 [] := by
  intro j c n _ hn _
  obtain ⟨n', hn', he⟩ := hl j n hn
  refine ⟨n', ?_, ?_⟩
  · rw [stepAdmitted_ledger]
    exact hn'
  · unfold stepAdmitted
    by_cases hc : (used.any (grantApproval p) || b) = true
    · rw [if_pos hc]
      have hi := heldIn_insert_fresh j s.paused id used hf.1
      show n' + (heldIn j (mapInsert s.paused id used) + heldIn j s.running) + 0 =
        n + (heldIn j s.paused + heldIn j s.running)
      omega
    · rw [if_neg hc]
      have hi := heldIn_insert_fresh j s.running id used hf.2
      show n' + (heldIn j s.paused + heldIn j (mapInsert s.running id used)) + 0 =
        n + (heldIn j s.paused + heldIn j s.running)
      omega

theorem stepCall_balanced (p : Policy) (s : State) (id : String) (req : Request) (ch : Checks)
    (hf : mapFind s.paused id = none ∧ mapFind s.running id = none) :
    Balanced p s (stepCall p s id req ch).2 [] := by
  have key : ∀ (b : Bool),
      Balanced p s (afterAdmit p s id b (admitCall p s.ledger req s.sets)).2 [] := by
    intro b
    cases ha : admitCall p s.ledger req s.sets with
    | error a => exact balanced_refl p s
    | ok r =>
      exact stepAdmitted_balanced p s id r.1 r.2 b hf
        (admitChain_acc p req s.sets (p.agentChain req.agent) s.ledger r ha)
  cases ch with
  | deny => exact balanced_refl p s
  | pass => exact key false
  | pause => exact key true

theorem approve_balanced (p : Policy) (s : State) (id : String) (ch : Checks) (hw : CallsWf s) :
    Balanced p s (approveWith p s id ch (mapFind s.paused id)).2 [] := by
  cases hf : mapFind s.paused id with
  | none => exact balanced_refl p s
  | some used =>
    intro j cj n hcap hn hle
    have hle2 : n + (heldIn j s.paused + heldIn j s.running) ≤ cj := hle
    have he := heldIn_erase_found j id used s.paused hw.1 hf
    have hrn : mapFind s.running id = none := by
      rcases hw.2.2 id with h1 | h1
      · rw [hf] at h1
        cases h1
      · exact h1
    have hi := heldIn_insert_fresh j s.running id used hrn
    cases ch with
    | deny =>
      have hr := refund_exact p used s.ledger j n cj hcap hn (by omega)
      refine ⟨n + countIn j used, hr, ?_⟩
      show n + countIn j used + (heldIn j (mapErase s.paused id) + heldIn j s.running) + 0 =
        n + (heldIn j s.paused + heldIn j s.running)
      omega
    | pass =>
      refine ⟨n, hn, ?_⟩
      show n + (heldIn j (mapErase s.paused id) + heldIn j (mapInsert s.running id used)) + 0 =
        n + (heldIn j s.paused + heldIn j s.running)
      omega
    | pause =>
      refine ⟨n, hn, ?_⟩
      show n + (heldIn j (mapErase s.paused id) + heldIn j (mapInsert s.running id used)) + 0 =
        n + (heldIn j s.paused + heldIn j s.running)
      omega

theorem reject_balanced (p : Policy) (s : State) (id : String) (hw : CallsWf s) :
    Balanced p s (rejectWith p s id (mapFind s.paused id)).2 [] := by
  cases hf : mapFind s.paused id with
  | none => exact balanced_refl p s
  | some used =>
    intro j cj n hcap hn hle
    have hle2 : n + (heldIn j s.paused + heldIn j s.running) ≤ cj := hle
    have he := heldIn_erase_found j id used s.paused hw.1 hf
    have hr := refund_exact p used s.ledger j n cj hcap hn (by omega)
    refine ⟨n + countIn j used, hr, ?_⟩
    show n + countIn j used + (heldIn j (mapErase s.paused id) + heldIn j s.running) + 0 =
      n + (heldIn j s.paused + heldIn j s.running)
    omega

theorem failed_balanced (p : Policy) (s : State) (id : String) (hw : CallsWf s) :
    Balanced p s (failWith p s id (mapFind s.running id)).2 [] := by
  cases hf : mapFind s.running id with
  | none => exact balanced_refl p s
  | some used =>
    intro j cj n hcap hn hle
    have hle2 : n + (heldIn j s.paused + heldIn j s.running) ≤ cj := hle
    have he := heldIn_erase_found j id used s.running hw.2.1 hf
    have hr := refund_exact p used s.ledger j n cj hcap hn (by omega)
    refine ⟨n + countIn j used, hr, ?_⟩
    show n + countIn j used + (heldIn j s.paused + heldIn j (mapErase s.running id)) + 0 =
      n + (heldIn j s.paused + heldIn j s.running)
    omega

theorem succeeded_balanced (p : Policy) (s : State) (id : String) (ds : List String)
    (hw : CallsWf s) :
    Balanced p s (succeedWith p s id ds (mapFind s.running id)).2
      (optElim (mapFind s.running id) [] (fun used => used)) := by
  cases hf : mapFind s.running id with
  | none => exact balanced_refl p s
  | some used =>
    intro j cj n _ hn _
    have he := heldIn_erase_found j id used s.running hw.2.1 hf
    refine ⟨n, hn, ?_⟩
    show n + (heldIn j s.paused + heldIn j (mapErase s.running id)) + countIn j used =
      n + (heldIn j s.paused + heldIn j s.running)
    omega

theorem unknown_balanced (p : Policy) (s : State) (id : String) (hw : CallsWf s) :
    Balanced p s (unknownWith s id (mapFind s.running id)).2
      (optElim (mapFind s.running id) [] (fun used => used)) := by
  cases hf : mapFind s.running id with
  | none => exact balanced_refl p s
  | some used =>
    intro j cj n _ hn _
    have he := heldIn_erase_found j id used s.running hw.2.1 hf
    refine ⟨n, hn, ?_⟩
    show n + (heldIn j s.paused + heldIn j (mapErase s.running id)) + countIn j used =
      n + (heldIn j s.paused + heldIn j s.running)
    omega

theorem seed_balanced (p : Policy) (s : State) (k : Nat) (vs : List String) :
    Balanced p s (seedWith s k vs (getAt s.sets k)).2 [] := by
  cases getAt s.sets k with
  | none => exact balanced_refl p s
  | some _ =>
    intro j cj n _ hn _
    refine ⟨n, hn, ?_⟩
    show n + (heldIn j s.paused + heldIn j s.running) + 0 =
      n + (heldIn j s.paused + heldIn j s.running)
    omega

/-- **step_balanced.** Every step balances the books of every limited grant:
units left + held after, plus the units kept by the call the step ended
with a success or an unknown outcome, equal units left + held before. -/
theorem step_balanced (p : Policy) (s : State) (e : Event) (ch : Checks) (hw : CallsWf s) :
    Balanced p s (step p s e ch).2 (keptBy s e) := by
  cases e with
  | call id req =>
    cases hh : isHeld s id with
    | true =>
      rw [call_held_invalid p s id req ch hh]
      exact balanced_refl p s
    | false =>
      show Balanced p s (guardFresh s id (stepCall p s id req ch)).2 []
      rw [guardFresh_fresh s id _ hh]
      exact stepCall_balanced p s id req ch (fresh_none s id hh)
  | approve id => exact approve_balanced p s id ch hw
  | reject id => exact reject_balanced p s id hw
  | succeeded id ds => exact succeeded_balanced p s id ds hw
  | failed id => exact failed_balanced p s id hw
  | unknown id => exact unknown_balanced p s id hw
  | seed k vs => exact seed_balanced p s k vs

/-! ## The maps stay well kept -/

theorem stepAdmitted_wf (p : Policy) (s : State) (id : String) (used : List Nat)
    (l : Ledger) (b : Bool)
    (hf : mapFind s.paused id = none ∧ mapFind s.running id = none) (hw : CallsWf s) :
    CallsWf (stepAdmitted p s id used l b).2 := by
  unfold stepAdmitted
  by_cases hc : (used.any (grantApproval p) || b) = true
  · rw [if_pos hc]
    exact ⟨uniq_mapInsert s.paused id used hw.1, hw.2.1,
      apart_insert s.paused s.running id used hw.2.2 hf.2⟩
  · rw [if_neg hc]
    exact ⟨hw.1, uniq_mapInsert s.running id used hw.2.1,
      apart_symm (mapInsert s.running id used) s.paused
        (apart_insert s.running s.paused id used (apart_symm s.paused s.running hw.2.2) hf.1)⟩

theorem stepCall_wf (p : Policy) (s : State) (id : String) (req : Request) (ch : Checks)
    (hf : mapFind s.paused id = none ∧ mapFind s.running id = none) (hw : CallsWf s) :
    CallsWf (stepCall p s id req ch).2 := by
  have key : ∀ (b : Bool), CallsWf (afterAdmit p s id b (admitCall p s.ledger req s.sets)).2 := by
    intro b
    cases admitCall p s.ledger req s.sets with
    | error a => exact hw
    | ok r => exact stepAdmitted_wf p s id r.1 r.2 b hf hw
  cases ch with
  | deny => exact hw
  | pass => exact key false
  | pause => exact key true

/-- Ending the running call `id` (success, failure, unknown outcome) keeps
the maps well kept. -/
theorem eraseRunning_wf (s : State) (id : String) (hw : CallsWf s) :
    Uniq s.paused ∧ Uniq (mapErase s.running id) ∧ Apart s.paused (mapErase s.running id) :=
  ⟨hw.1, uniq_mapErase id s.running hw.2.1,
    apart_symm (mapErase s.running id) s.paused
      (apart_erase_left s.running s.paused id (apart_symm s.paused s.running hw.2.2))⟩

/-- Dropping the paused call `id` (rejection, denied approval) keeps the maps
well kept. -/
theorem erasePaused_wf (s : State) (id : String) (hw : CallsWf s) :
    Uniq (mapErase s.paused id) ∧ Uniq s.running ∧ Apart (mapErase s.paused id) s.running :=
  ⟨uniq_mapErase id s.paused hw.1, hw.2.1, apart_erase_left s.paused s.running id hw.2.2⟩

theorem approve_wf (p : Policy) (s : State) (id : String) (ch : Checks) (hw : CallsWf s) :
    CallsWf (approveWith p s id ch (mapFind s.paused id)).2 := by
  cases mapFind s.paused id with
  | none => exact hw
  | some used =>
    have hm : Apart (mapErase s.paused id) (mapInsert s.running id used) :=
      apart_symm (mapInsert s.running id used) (mapErase s.paused id)
        (apart_insert s.running (mapErase s.paused id) id used
          (apart_symm (mapErase s.paused id) s.running
            (apart_erase_left s.paused s.running id hw.2.2))
          (mapFind_mapErase_self s.paused id))
    cases ch with
    | deny => exact erasePaused_wf s id hw
    | pass => exact ⟨uniq_mapErase id s.paused hw.1, uniq_mapInsert s.running id used hw.2.1, hm⟩
    | pause => exact ⟨uniq_mapErase id s.paused hw.1, uniq_mapInsert s.running id used hw.2.1, hm⟩

/-- **step_wf.** `step` keeps the call maps well kept. -/
theorem step_wf (p : Policy) (s : State) (e : Event) (ch : Checks) (hw : CallsWf s) :
    CallsWf (step p s e ch).2 := by
  cases e with
  | call id req =>
    cases hh : isHeld s id with
    | true =>
      rw [call_held_invalid p s id req ch hh]
      exact hw
    | false =>
      show CallsWf (guardFresh s id (stepCall p s id req ch)).2
      rw [guardFresh_fresh s id _ hh]
      exact stepCall_wf p s id req ch (fresh_none s id hh) hw
  | approve id => exact approve_wf p s id ch hw
  | reject id =>
    show CallsWf (rejectWith p s id (mapFind s.paused id)).2
    cases mapFind s.paused id with
    | none => exact hw
    | some _ => exact erasePaused_wf s id hw
  | succeeded id ds =>
    show CallsWf (succeedWith p s id ds (mapFind s.running id)).2
    cases mapFind s.running id with
    | none => exact hw
    | some _ => exact eraseRunning_wf s id hw
  | failed id =>
    show CallsWf (failWith p s id (mapFind s.running id)).2
    cases mapFind s.running id with
    | none => exact hw
    | some _ => exact eraseRunning_wf s id hw
  | unknown id =>
    show CallsWf (unknownWith s id (mapFind s.running id)).2
    cases mapFind s.running id with
    | none => exact hw
    | some _ => exact eraseRunning_wf s id hw
  | seed k vs =>
    show CallsWf (seedWith s k vs (getAt s.sets k)).2
    cases getAt s.sets k with
    | none => exact hw
    | some _ => exact hw

theorem initial_wf (p : Policy) : CallsWf (State.initial p) :=
  ⟨True.intro, True.intro, fun _ => Or.inl rfl⟩

/-! ## Whole sessions -/

/-- Units of grant `j` kept spent for good by the events `w` run from `s`:
for each `succeeded` or `unknown` event that ends a running call, the units
of `j` that call held. Computed by running the events through `step`, as
`runEvents` does. -/
def keptUnits (p : Policy) (j : Nat) : State → List (Event × Checks) → Nat
  | _, [] => 0
  | s, ec :: rest => countIn j (keptBy s ec.1) + keptUnits p j (step p s ec.1 ec.2).2 rest

theorem runEvents_books (p : Policy) (j c : Nat) (hcap : capOf p j = some (.limited c)) :
    ∀ (w : List (Event × Checks)) (s : State) (n : Nat), CallsWf s → Accounted p s →
      getAt s.ledger j = some (.limited n) →
      ∃ n', getAt (runEvents p s w).ledger j = some (.limited n') ∧
        n' + heldUnits (runEvents p s w) j + keptUnits p j s w = n + heldUnits s j := by
  intro w
  induction w with
  | nil =>
    intro s n _ _ hn
    refine ⟨n, hn, ?_⟩
    show n + heldUnits s j + 0 = n + heldUnits s j
    omega
  | cons ec rest ih =>
    intro s n hw ha hn
    have hle : n + heldUnits s j ≤ c := by
      obtain ⟨m, hm, hmc⟩ := ha j c hcap
      rw [hn] at hm
      have hmn : n = m := by
        have h3 : Quota.limited n = Quota.limited m := Option.some.inj hm
        cases h3
        rfl
      rw [hmn]
      exact hmc
    obtain ⟨n1, hn1, he1⟩ := step_balanced p s ec.1 ec.2 hw j c n hcap hn hle
    obtain ⟨n2, hn2, he2⟩ := ih (step p s ec.1 ec.2).2 n1 (step_wf p s ec.1 ec.2 hw)
      (step_accounted p s ec.1 ec.2 ha) hn1
    refine ⟨n2, hn2, ?_⟩
    show n2 + heldUnits (runEvents p (step p s ec.1 ec.2).2 rest) j +
        (countIn j (keptBy s ec.1) + keptUnits p j (step p s ec.1 ec.2).2 rest) =
      n + heldUnits s j
    omega

/-- The initial ledger holds the full quota `c` of an unshared grant limited
to `c` (a shared grant starts at `limited 0`, as in Rust's `Ledger::initial`). -/
theorem initial_entry (p : Policy) (j c : Nat) (hs : p.isShared j = false)
    (hcap : capOf p j = some (.limited c)) :
    getAt (State.initial p).ledger j = some (.limited c) := by
  cases hg : getAt p.grants j with
  | none =>
    have h2 : capOf p j = none := by
      unfold capOf
      rw [hg] <;> rfl
    rw [h2] at hcap
    cases hcap
  | some gr =>
    have h2 : capOf p j = some gr.quota := by
      unfold capOf
      rw [hg] <;> rfl
    rw [h2] at hcap
    have hq : gr.quota = Quota.limited c := Option.some.inj hcap
    have h3 := getAt_initial p j gr hg
    have hns : ¬ (p.isShared j = true) := by
      intro h
      rw [hs] at h
      cases h
    rw [if_neg hns, hq] at h3
    exact h3

/-- **quota_books.** In every session, after any sequence of events from the
initial state, every unshared grant with quota `limited c` has `limited n` left with

  `n + heldUnits s j + keptUnits p j (State.initial p) w = c`:

units left, plus units held by paused and running calls, plus units kept by
calls that succeeded or ended with an unknown outcome, are exactly the
quota. So units taken minus units refunded (`c − n`) are exactly the units
held or kept, and never exceed the quota. (A shared grant starts at
`limited 0` and `step` never serves it; its accounting is the pool's,
`pool_taken_eq_sum_held`.)

Rules out: "a success refunds" (left + kept would count the unit twice:
the sum exceeds `c`); "admission ignores quota" (a unit served from an
empty entry would be held without leaving the entry: the sum exceeds `c`);
"a denial consumes" (a unit would leave the entry without being held or
kept: the sum falls below `c`). -/
theorem quota_books (p : Policy) (w : List (Event × Checks)) (j c : Nat)
    (hs : p.isShared j = false) (hcap : capOf p j = some (.limited c)) :
    ∃ n, getAt (runEvents p (State.initial p) w).ledger j = some (.limited n) ∧
      n + heldUnits (runEvents p (State.initial p) w) j + keptUnits p j (State.initial p) w = c := by
  obtain ⟨n, hn, he⟩ := runEvents_books p j c hcap w (State.initial p) c (initial_wf p)
    (initial_accounted p) (initial_entry p j c hs hcap)
  refine ⟨n, hn, ?_⟩
  have h0 : heldUnits (State.initial p) j = 0 := rfl
  omega

/-- The initial entry of a shared grant is `limited 0` (Rust's
`Ledger::initial`). -/
theorem initial_entry_shared (p : Policy) (j c : Nat) (hs : p.isShared j = true)
    (hcap : capOf p j = some (.limited c)) :
    getAt (State.initial p).ledger j = some (.limited 0) := by
  cases hg : getAt p.grants j with
  | none =>
    have h2 : capOf p j = none := by
      unfold capOf
      rw [hg] <;> rfl
    rw [h2] at hcap
    cases hcap
  | some gr =>
    have h3 := getAt_initial p j gr hg
    rw [if_pos hs] at h3
    exact h3

/-- **shared_never_served.** Under Lean's `step`, from `State.initial p`, a
shared grant (limited, as `validate.rs` requires) is never served: its entry
stays `limited 0`, no paused or running call holds a unit of it, and no
finished call kept one. (Rust's `step` serves shared grants from the
session's private pool: that is `stepIn` with `privatePool`, not Lean's
`step`; see `docs/lean.md`, "Quota scope".) -/
theorem shared_never_served (p : Policy) (w : List (Event × Checks)) (j c : Nat)
    (hs : p.isShared j = true) (hcap : capOf p j = some (.limited c)) :
    getAt (runEvents p (State.initial p) w).ledger j = some (.limited 0) ∧
      heldUnits (runEvents p (State.initial p) w) j = 0 ∧
      keptUnits p j (State.initial p) w = 0 := by
  obtain ⟨n, hn, he⟩ := runEvents_books p j c hcap w (State.initial p) 0 (initial_wf p)
    (initial_accounted p) (initial_entry_shared p j c hs hcap)
  have h0 : heldUnits (State.initial p) j = 0 := rfl
  have hn0 : n = 0 := by omega
  rw [hn0] at hn
  exact ⟨hn, by omega, by omega⟩

/-- **shared_no_quota.** On every state `step` reaches from `State.initial p`,
`hasQuota` is false for a shared grant, as Rust's `Ledger::has_quota` is
(which tests `!is_shared(g)` where Lean's ledger, without the policy, reads
the entry). -/
theorem shared_no_quota (p : Policy) (w : List (Event × Checks)) (j c : Nat)
    (hs : p.isShared j = true) (hcap : capOf p j = some (.limited c)) :
    hasQuota (runEvents p (State.initial p) w).ledger j = false := by
  have h := (shared_never_served p w j c hs hcap).1
  show quotaAvailable (getAt (runEvents p (State.initial p) w).ledger j) = false
  rw [h] <;> rfl

/-! ## A call is served only out of units left -/

/-- The grants an outcome says the call was served from. -/
def servedBy : Outcome → List Nat
  | .allow used => used
  | .pause used => used
  | _ => []

theorem stepAdmitted_served (p : Policy) (s : State) (id : String) (used : List Nat)
    (l : Ledger) (b : Bool) : servedBy (stepAdmitted p s id used l b).1 = used := by
  unfold stepAdmitted
  cases (used.any (grantApproval p) || b) <;> rfl

theorem stepCall_served (p : Policy) (s : State) (id : String) (req : Request) (ch : Checks)
    (j n : Nat) (hn : getAt s.ledger j = some (.limited n)) :
    ∃ n', getAt (stepCall p s id req ch).2.ledger j = some (.limited n') ∧
      n' + countIn j (servedBy (stepCall p s id req ch).1) = n := by
  have key : ∀ (b : Bool),
      ∃ n', getAt (afterAdmit p s id b (admitCall p s.ledger req s.sets)).2.ledger j =
          some (.limited n') ∧
        n' + countIn j (servedBy (afterAdmit p s id b (admitCall p s.ledger req s.sets)).1) = n := by
    intro b
    cases ha : admitCall p s.ledger req s.sets with
    | error a =>
      refine ⟨n, hn, ?_⟩
      show n + 0 = n
      omega
    | ok r =>
      obtain ⟨n', hn', he⟩ :=
        admitChain_acc p req s.sets (p.agentChain req.agent) s.ledger r ha j n hn
      refine ⟨n', ?_, ?_⟩
      · show getAt (stepAdmitted p s id r.1 r.2 b).2.ledger j = some (.limited n')
        rw [stepAdmitted_ledger]
        exact hn'
      · show n' + countIn j (servedBy (stepAdmitted p s id r.1 r.2 b).1) = n
        rw [stepAdmitted_served]
        exact he
  cases ch with
  | deny =>
    refine ⟨n, hn, ?_⟩
    show n + 0 = n
    omega
  | pass => exact key false
  | pause => exact key true

/-- **call_served_from_left.** A call takes from each limited grant exactly
the units it is served from it, out of the units left: if grant `j` has
`limited n` left before the call, it has `limited n'` after with
`n' + (units of j the call was served from) = n`. A denied or invalid call
is served from nothing, so its entry stays `n`.

Rules out: "admission ignores quota" (a call served from an entry
`limited 0` would need `n' + 1 = 0`); "a denial consumes" (`servedBy .deny
= []`, so `n' = n`). -/
theorem call_served_from_left (p : Policy) (s : State) (id : String) (req : Request)
    (ch : Checks) (j n : Nat) (hn : getAt s.ledger j = some (.limited n)) :
    ∃ n', getAt (step p s (.call id req) ch).2.ledger j = some (.limited n') ∧
      n' + countIn j (servedBy (step p s (.call id req) ch).1) = n := by
  cases hh : isHeld s id with
  | true =>
    rw [call_held_invalid p s id req ch hh]
    refine ⟨n, hn, ?_⟩
    show n + 0 = n
    omega
  | false =>
    show ∃ n', getAt (guardFresh s id (stepCall p s id req ch)).2.ledger j = some (.limited n') ∧
      n' + countIn j (servedBy (guardFresh s id (stepCall p s id req ch)).1) = n
    rw [guardFresh_fresh s id _ hh]
    exact stepCall_served p s id req ch j n hn

/-- **call_served_only_while_left.** A call served from a limited grant `j`
(at least one of its units) was served only while units were left: the
entry was `limited n` with `n > 0` before and is smaller after (one less
per unit served). -/
theorem call_served_only_while_left (p : Policy) (s : State) (id : String) (req : Request)
    (ch : Checks) (j n : Nat) (hn : getAt s.ledger j = some (.limited n))
    (hj : 0 < countIn j (servedBy (step p s (.call id req) ch).1)) :
    0 < n ∧ ∃ n', getAt (step p s (.call id req) ch).2.ledger j = some (.limited n') ∧ n' < n := by
  obtain ⟨n', hn', he⟩ := call_served_from_left p s id req ch j n hn
  exact ⟨by omega, n', hn', by omega⟩

end Agenra
