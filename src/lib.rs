//! The `agenra` command line's own modules: the commands that render,
//! certify, authorize and verify. The library facade is the crate `agenra`
//! (`rust/agenra`), the benchmark harnesses the crate `agenra-bench`;
//! nothing here is part of either's API.

pub mod certify;
pub mod cmd_authorize;
pub mod cmd_verify;
pub mod engine_replay;
pub mod render;

pub use agenra::{compile_policy, Sessions};
// The facade's modules under their old paths, for the modules above.
pub use agenra::{engine, replay, sessions, stream, trace};
