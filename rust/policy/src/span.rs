//! Source positions.

/// A region of the source: byte offsets `start..end`, and the 1-based line
/// and column (in characters) of `start`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset just past the last byte.
    pub end: usize,
    /// Line of `start`, from 1.
    pub line: u32,
    /// Column of `start`, from 1, in characters.
    pub col: u32,
}

impl Span {
    /// The span from the start of `self` to the end of `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            end: other.end.max(self.start),
            ..self
        }
    }
}
