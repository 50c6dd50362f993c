//! The Lean runtime and the `@[export]`ed functions of `lean/Agenra/Ffi.lean`
//! (feature `lean`). NOT run on the development machines (no Lean
//! toolchain); written for `leanprover/lean4:v4.23.0` and `lean-sys` 0.0.9.
//!
//! * [`initialize`]: once per process, the sequence of `docs/lean-ffi.md`
//!   (runtime module, `initialize_Agenra(1, world)`, end of initialization).
//! * Threads: a thread that Lean did not start registers itself
//!   (`lean_initialize_thread`) before its first call, and a thread-local
//!   guard calls `lean_finalize_thread` when it ends. The thread that ran the
//!   initialization is the runtime's own and registers nothing.
//! * [`Owned`] and [`Borrowed`]: one reference to a Lean object, released on
//!   drop, and a reference that lives no longer than its owner.

use crate::wire::{Entry, Transport, WireError};
use lean_sys::{
    lean_alloc_sarray, lean_dec, lean_dec_ref, lean_finalize_thread, lean_inc,
    lean_initialize_runtime_module, lean_initialize_thread, lean_io_mark_end_initialization,
    lean_io_mk_world, lean_io_result_is_ok, lean_io_result_show_error, lean_is_sarray,
    lean_is_scalar, lean_object, lean_sarray_cptr, lean_sarray_elem_size, lean_sarray_size,
    LEAN_INIT_MUTEX,
};
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::OnceLock;

extern "C" {
    /// The initializer of module `Agenra` and everything it imports.
    /// Signature of v4.23.0: `lean_object* initialize_Agenra(uint8_t builtin,
    /// lean_object* w)` (no package prefix; the world argument was removed
    /// only after 4.23).
    fn initialize_Agenra(builtin: u8, world: *mut lean_object) -> *mut lean_object;

    // `lean/Agenra/Ffi.lean`: `ByteArray → ByteArray`, argument and result
    // owned.
    fn agenra_ffi_version(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_pattern_matches(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_glob_matches(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_arg_op_eval(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_arg_cond_eval(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_grant_matches(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_select(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_step(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_check_simulation(input: *mut lean_object) -> *mut lean_object;
    fn agenra_ffi_step_in(input: *mut lean_object) -> *mut lean_object;
}

/// The outcome of the one-time initialization, shared by every caller.
static INIT: OnceLock<Result<(), String>> = OnceLock::new();

thread_local! {
    /// Whether this thread may run Lean code; its drop finalizes a thread
    /// that registered itself.
    static THREAD: ThreadGuard = const { ThreadGuard { registered: Cell::new(false), by_us: Cell::new(false) } };
}

struct ThreadGuard {
    registered: Cell<bool>,
    by_us: Cell<bool>,
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        if self.by_us.get() {
            // SAFETY: this thread called `lean_initialize_thread` and runs no
            // more Lean code (its thread-locals are being destroyed).
            unsafe { lean_finalize_thread() };
        }
    }
}

/// Initializes the Lean runtime and module `Agenra`, once per process; later
/// calls return the first call's result. After a failed initializer no Lean
/// code ever runs.
pub fn initialize() -> Result<(), WireError> {
    let first = INIT.get_or_init(|| {
        let _guard = LEAN_INIT_MUTEX.lock();
        // SAFETY: the documented sequence of the v4.23.0 runtime, run once
        // (OnceLock) and under lean-sys's initialization mutex;
        // `lean_initialize` is not called (it would initialize the runtime
        // module a second time).
        let ok = unsafe {
            lean_initialize_runtime_module();
            let res = initialize_Agenra(1, lean_io_mk_world());
            let ok = lean_io_result_is_ok(res);
            if !ok {
                lean_io_result_show_error(res);
            }
            lean_dec_ref(res);
            if ok {
                lean_io_mark_end_initialization();
            }
            ok
        };
        if ok {
            // The runtime initialized this thread itself.
            THREAD.with(|t| t.registered.set(true));
            Ok(())
        } else {
            Err("the initializer of Lean module `Agenra` failed (its error is on stderr)".into())
        }
    });
    first.clone().map_err(WireError::Transport)
}

/// Registers the calling thread with the Lean runtime if it is not yet.
fn enter_thread() {
    THREAD.with(|t| {
        if !t.registered.get() {
            // SAFETY: the runtime is initialized (callers run `initialize`
            // first); each thread registers once and finalizes in
            // `ThreadGuard::drop`.
            unsafe { lean_initialize_thread() };
            t.registered.set(true);
            t.by_us.set(true);
        }
    });
}

/// One owned reference to a (non-scalar) Lean object; dropping it releases
/// the reference. Not `Send`: the object may be thread-local to the runtime.
pub struct Owned {
    ptr: NonNull<lean_object>,
}

impl Owned {
    /// Takes ownership of one reference (`lean_obj_res`).
    ///
    /// # Safety
    /// `ptr` must be null or an object the caller owns one reference to.
    pub unsafe fn from_raw(ptr: *mut lean_object) -> Option<Owned> {
        NonNull::new(ptr)
            .filter(|p| !lean_is_scalar(p.as_ptr()))
            .map(|ptr| Owned { ptr })
    }

    /// Gives the reference away (to an `@[export]` parameter, which consumes it).
    pub fn into_raw(self) -> *mut lean_object {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        p
    }

    /// A borrowed view (`b_lean_obj_arg`).
    pub fn borrow(&self) -> Borrowed<'_> {
        Borrowed {
            ptr: self.ptr,
            _owner: PhantomData,
        }
    }

    /// A `ByteArray` holding a copy of `bytes`.
    pub fn byte_array(bytes: &[u8]) -> Owned {
        // SAFETY: a fresh scalar array of element size 1 with room for
        // `bytes.len()` bytes, filled before anyone reads it.
        unsafe {
            let o = lean_alloc_sarray(1, bytes.len(), bytes.len());
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), lean_sarray_cptr(o), bytes.len());
            Owned {
                ptr: NonNull::new(o).expect("lean_alloc_sarray panics rather than return null"),
            }
        }
    }
}

impl Clone for Owned {
    fn clone(&self) -> Owned {
        // SAFETY: we own a reference, so the object is alive.
        unsafe { lean_inc(self.ptr.as_ptr()) };
        Owned { ptr: self.ptr }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: we own exactly this reference.
        unsafe { lean_dec(self.ptr.as_ptr()) };
    }
}

/// A borrowed reference, valid while its owner lives.
#[derive(Clone, Copy)]
pub struct Borrowed<'a> {
    ptr: NonNull<lean_object>,
    _owner: PhantomData<&'a Owned>,
}

impl Borrowed<'_> {
    /// A new owned reference to the same object.
    pub fn to_owned(self) -> Owned {
        // SAFETY: the object is alive while borrowed.
        unsafe { lean_inc(self.ptr.as_ptr()) };
        Owned { ptr: self.ptr }
    }

    /// The bytes of a `ByteArray`, or `None` if the object is not one.
    pub fn bytes(self) -> Option<Vec<u8>> {
        let p = self.ptr.as_ptr();
        // SAFETY: a live non-scalar object; its tag says whether it is a
        // scalar array, and of 1-byte elements.
        unsafe {
            if !lean_is_sarray(p) || lean_sarray_elem_size(p) != 1 {
                return None;
            }
            let n = lean_sarray_size(p);
            Some(std::slice::from_raw_parts(lean_sarray_cptr(p), n).to_vec())
        }
    }
}

/// The Lean library as a [`Transport`]. Creating one initializes the runtime.
#[derive(Debug)]
pub struct LeanTransport {
    _private: (),
}

impl LeanTransport {
    /// Initializes the runtime (once per process) and returns the transport.
    pub fn new() -> Result<LeanTransport, WireError> {
        initialize()?;
        Ok(LeanTransport { _private: () })
    }
}

fn export(entry: Entry) -> unsafe extern "C" fn(*mut lean_object) -> *mut lean_object {
    match entry {
        Entry::Version => agenra_ffi_version,
        Entry::PatternMatches => agenra_ffi_pattern_matches,
        Entry::GlobMatches => agenra_ffi_glob_matches,
        Entry::ArgOpEval => agenra_ffi_arg_op_eval,
        Entry::ArgCondEval => agenra_ffi_arg_cond_eval,
        Entry::GrantMatches => agenra_ffi_grant_matches,
        Entry::Select => agenra_ffi_select,
        Entry::Step => agenra_ffi_step,
        Entry::CheckSimulation => agenra_ffi_check_simulation,
        Entry::StepIn => agenra_ffi_step_in,
    }
}

impl Transport for LeanTransport {
    fn call(&self, entry: Entry, input: &[u8]) -> Result<Vec<u8>, WireError> {
        initialize()?;
        enter_thread();
        let arg = Owned::byte_array(input);
        let f = export(entry);
        // SAFETY: `f` is `ByteArray → ByteArray` with an owned argument (we
        // give our only reference) and an owned result (released by `Owned`).
        let out = unsafe { Owned::from_raw(f(arg.into_raw())) }.ok_or_else(|| {
            WireError::Transport(format!("{} returned no object", entry.symbol()))
        })?;
        out.borrow().bytes().ok_or_else(|| {
            WireError::Transport(format!("{} did not return a ByteArray", entry.symbol()))
        })
    }
}
