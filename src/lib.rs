//! The `agenra` command line's own modules: the commands that render,
//! certify, authorize and verify, and the benchmark harnesses. The library
//! facade is the crate `agenra` (`rust/agenra`); nothing here is part of
//! its API.

pub mod bench;
pub mod bench_authorizer;
pub mod bench_embed;
pub mod bench_scale;
pub mod bench_verify;
pub mod certify;
pub mod cmd_authorize;
pub mod cmd_verify;
pub mod engine_replay;
pub mod render;

pub use agenra::{compile_policy, Sessions};
// The facade's modules under their old paths, for the modules above.
pub use agenra::{engine, replay, sessions, stream, trace};
