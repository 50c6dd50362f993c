//! A global allocator that counts live heap bytes, for the memory figures
//! of `bench monitor` and `bench embed`. Only the `agenra-bench` binary
//! installs it (two atomic operations per allocation have no place in a
//! production binary).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// An allocator (the one the `agenra` binary installs), counting the bytes
/// it has handed out and not got back. Install it with
/// `#[global_allocator]`.
pub struct Counting<A>(pub A);

// SAFETY: every call is forwarded unchanged to the inner allocator; the
// counter is only bookkeeping.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        self.0.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        self.0.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        self.0.realloc(ptr, layout, new_size)
    }
}

/// Live heap bytes so far (0 for ever unless [`Counting`] is the global
/// allocator).
pub fn live_bytes() -> usize {
    LIVE_BYTES.load(Ordering::Relaxed)
}
