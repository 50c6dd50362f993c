//! `agenra-lean`: the Lean model of Agenra (`lean/Agenra/…`) called from
//! Rust, for differential testing against the Rust executable spec.
//!
//! * [`cbor`] and [`wire`]: the wire format of `docs/lean-ffi.md` (bytes in,
//!   bytes out), in both directions, and the typed calls ([`wire::Client`])
//!   over any [`wire::Transport`];
//! * [`loopback::Loopback`]: a transport that answers with the Rust spec
//!   behind the same bytes, so the codec is tested without Lean;
//! * with feature `lean`, `runtime`: the Lean runtime (linked through
//!   `lean-sys` and `libAgenra.a`), initialized once per process, and
//!   `runtime::LeanTransport`, which calls the `@[export]`ed Lean functions.
//!
//! Without feature `lean` nothing here links to Lean.

pub mod cbor;
pub mod loopback;
#[cfg(feature = "lean")]
pub mod runtime;
pub mod wire;

pub use cbor::Cbor;
pub use loopback::Loopback;
pub use wire::{Client, Entry, Transport, Wire, WireError, VERSION};

/// The Lean model over FFI, when this crate is built with feature `lean`
/// (initializes the Lean runtime on first use).
#[cfg(feature = "lean")]
pub fn lean() -> Result<Client<runtime::LeanTransport>, WireError> {
    runtime::LeanTransport::new().map(Client::new)
}
