//! Agenra's benchmark harnesses: each measures one part of the system and
//! returns its figures; the `agenra-bench` binary (crate `agenra-cli`)
//! prints them, and `agenra bench ...` runs that binary. How each figure is
//! measured, and the current figures, are in `docs/performance.md`.

pub mod alloc;
pub mod bench;
pub mod bench_authorizer;
pub mod bench_embed;
pub mod bench_mcp;
pub mod bench_memory;
pub mod bench_scale;
pub mod bench_serve;
pub mod bench_verify;
