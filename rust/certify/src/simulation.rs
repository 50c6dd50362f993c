//! The checked simulation: every pair of abstract states reachable by
//! events OLD admits. NEW's step is a function of the event, so the
//! reachable pairs form a simulation exactly when no step from them loses
//! the workflow; they are then the relation R of the certificate. When a
//! step loses, breadth-first order makes the lost workflow a shortest one.

use crate::product::{events, initial, step, Ctx, Event, Loss, State, Step};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for state pairs (FxHash): states come from the two
/// policies, and the search is bounded by `MAX_STATES` anyway.
#[derive(Default)]
pub struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
}

pub type FxBuild = BuildHasherDefault<Fx>;

/// At most this many state pairs are explored.
pub const MAX_STATES: usize = 200_000;

#[derive(Debug)]
pub enum Outcome {
    /// No reachable pair loses: `states` is the relation (the initial pair
    /// first). `unknown` lists steps the abstraction could not follow; the
    /// relation is a certificate only when it is empty.
    Closed {
        states: Vec<State>,
        unknown: Vec<String>,
    },
    /// A shortest workflow OLD admits and NEW does not: its last event loses.
    Lost { events: Vec<Event>, how: Loss },
    /// Too many states.
    TooLarge,
}

pub fn explore(ctx: &Ctx) -> Outcome {
    explore_bounded(ctx, MAX_STATES)
}

/// `explore` with its own bound on the number of pairs.
pub fn explore_bounded(ctx: &Ctx, max_states: usize) -> Outcome {
    let start = initial(ctx.old, ctx.new);
    let mut states = vec![start.clone()];
    let mut index: HashMap<State, usize, FxBuild> = HashMap::default();
    index.insert(start, 0);
    let mut parent: Vec<Option<(usize, Event)>> = vec![None];
    let mut unknown: Vec<String> = Vec::new();
    let mut at = 0;
    while at < states.len() {
        let s = states[at].clone();
        for e in events(ctx, &s) {
            match step(ctx, &s, &e) {
                Step::NotAdmitted => {}
                Step::Unknown(why) => {
                    if !unknown.contains(&why) {
                        unknown.push(why);
                    }
                }
                Step::Lost(how) => {
                    let mut path = vec![e];
                    let mut i = at;
                    while let Some((p, ev)) = &parent[i] {
                        path.push(ev.clone());
                        i = *p;
                    }
                    path.reverse();
                    return Outcome::Lost { events: path, how };
                }
                Step::Next(t) => {
                    if let Entry::Vacant(v) = index.entry(t) {
                        if states.len() >= max_states {
                            return Outcome::TooLarge;
                        }
                        states.push(v.key().clone());
                        v.insert(states.len() - 1);
                        parent.push(Some((at, e)));
                    }
                }
            }
        }
        at += 1;
    }
    Outcome::Closed { states, unknown }
}
