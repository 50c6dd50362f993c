//! `agenra monitor`: the streaming sidecar. Events come in as JSON lines
//! (the trace format of `docs/events.md`); for each event one JSON line
//! goes out as soon as it is decided, flushed, so that an agent can write
//! an event, read its answer and only then write the next one.
//!
//! The step per line is [`Stepper::step_line`], the same as `replay`'s. An
//! event that cannot be parsed or applied gives an error object instead of
//! a record and leaves the sessions unchanged; the stream goes on.

use crate::replay::Stepper;
use serde::Serialize;
use std::io::{BufRead, Write};

/// The answer to an event line that gave no record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorLine {
    /// The position the event would have had (the next event gets it).
    pub seq: u64,
    /// 1-based line number in the input.
    pub line: usize,
    pub error: String,
}

/// What ended a stream early.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("cannot read the input: {0}")]
    Input(#[source] std::io::Error),
    #[error("cannot write the answers: {0}")]
    Output(#[source] std::io::Error),
    #[error("cannot append to the trace file: {0}")]
    TraceOut(#[source] std::io::Error),
}

/// Counts of a finished stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamSummary {
    /// Input lines read (blank and comment lines included).
    pub lines: usize,
    /// Events applied (answered with a record).
    pub records: u64,
    /// Event lines answered with an error object.
    pub errors: u64,
}

/// What [`run`] steps: [`Stepper`] (the native monitor), or
/// `engine_replay::EngineStepper` (`--engine smt|both`).
pub trait LineStep {
    /// What an applied event gives (one JSON line).
    type Record: Serialize;
    /// Why an event line gave no record (the sessions are unchanged).
    type Error: std::fmt::Display;
    /// The `seq` the next applied event gets.
    fn next_seq(&self) -> u64;
    /// Parses one line and applies it; `None` for a blank or `//` line.
    fn step_line(&mut self, line: &str) -> Option<Result<Self::Record, Self::Error>>;
}

impl LineStep for Stepper {
    type Record = crate::replay::Record;
    type Error = crate::replay::LineError;
    fn next_seq(&self) -> u64 {
        Stepper::next_seq(self)
    }
    fn step_line(&mut self, line: &str) -> Option<Result<Self::Record, Self::Error>> {
        Stepper::step_line(self, line)
    }
}

/// Reads event lines from `input` until its end, writing one JSON line per
/// event to `output` and flushing it before reading on. Each applied
/// event's line is appended (and flushed) to `trace_out` before its answer
/// is written, so that the file replays to the same records.
pub fn run<S: LineStep>(
    stepper: &mut S,
    mut input: impl BufRead,
    mut output: impl Write,
    mut trace_out: Option<&mut dyn Write>,
) -> Result<StreamSummary, StreamError> {
    let mut summary = StreamSummary::default();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(StreamError::Input)?;
        if n == 0 {
            return Ok(summary);
        }
        summary.lines += 1;
        let line_no = summary.lines;
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        let seq = stepper.next_seq();
        let outcome = match std::str::from_utf8(&buf) {
            Ok(text) => match stepper.step_line(text) {
                None => continue,
                Some(Ok(record)) => {
                    if let Some(file) = trace_out.as_deref_mut() {
                        // One write per line, so that appenders do not interleave.
                        file.write_all(format!("{}\n", text.trim()).as_bytes())
                            .and_then(|()| file.flush())
                            .map_err(StreamError::TraceOut)?;
                    }
                    summary.records += 1;
                    serde_json::to_string(&record)
                }
                Some(Err(e)) => {
                    summary.errors += 1;
                    serde_json::to_string(&ErrorLine {
                        seq,
                        line: line_no,
                        error: e.to_string(),
                    })
                }
            },
            Err(e) => {
                summary.errors += 1;
                serde_json::to_string(&ErrorLine {
                    seq,
                    line: line_no,
                    error: format!("the line is not valid UTF-8 (byte {})", e.valid_up_to() + 1),
                })
            }
        };
        let json = outcome.map_err(|e| StreamError::Output(e.into()))?;
        writeln!(output, "{json}")
            .and_then(|()| output.flush())
            .map_err(StreamError::Output)?;
    }
}
