//! Declared token kinds (`token order_id = "ORD-" digit{6};`,
//! `docs/policy-language.md`, "Declared token shapes"): lowering a shape,
//! with errors at the part that is wrong, and the kind a token test names.

use super::Compiler;
use crate::ast::{Ident, ShapePartExpr};
use crate::diagnostic::did_you_mean;
use crate::span::Span;
use agenra_core::token_shapes::{CharClass, ShapeError, ShapePart, TokenShape, MAX_REPEAT};
use agenra_core::tokens::TokenKind;

/// The kinds a token test may name without declaring them.
pub(super) const BUILTIN_KINDS: [&str; 6] = ["url", "email", "iban", "phone", "quantity", "token"];

impl Compiler<'_> {
    /// First pass: declares the kind and builds its shape (a shape depends
    /// on nothing else, and token tests need the index).
    pub(super) fn declare_token_shape(
        &mut self,
        name: &Ident,
        parts: &[ShapePartExpr],
        span: Span,
    ) {
        if self.token_kinds.declare(name, &mut self.d).is_none() {
            return;
        }
        let shape = self.lower_shape(name, parts, span);
        self.token_shapes.push(shape);
    }

    fn lower_shape(
        &mut self,
        name: &Ident,
        parts: &[ShapePartExpr],
        span: Span,
    ) -> Option<TokenShape> {
        let mut lowered = Vec::new();
        for p in parts {
            match p {
                ShapePartExpr::Literal(l) => lowered.push(ShapePart::Literal(l.value.clone())),
                ShapePartExpr::Class { class, min, max } => {
                    let Some(c) = CharClass::from_keyword(&class.name) else {
                        let names = CharClass::ALL.map(CharClass::keyword);
                        self.d.error(
                            class.span,
                            format!(
                                "unknown character class `{}`: `digit`, `upper`, `lower`, `letter`, `alnum` or `hex`{}",
                                class.name,
                                did_you_mean(&class.name, names)
                            ),
                        );
                        return None;
                    };
                    let bound = |d: &mut crate::names::Diags, i: &crate::ast::IntLit| {
                        let ok = u32::try_from(i.value).ok().filter(|&v| v <= MAX_REPEAT);
                        if ok.is_none() {
                            d.error(
                                i.span,
                                format!(
                                    "a repetition count must be 0 to {MAX_REPEAT}, not {}",
                                    i.value
                                ),
                            );
                        }
                        ok
                    };
                    let lo = bound(&mut self.d, min)?;
                    let hi = match max {
                        Some(m) => bound(&mut self.d, m)?,
                        None => lo,
                    };
                    lowered.push(ShapePart::Class {
                        class: c,
                        min: lo,
                        max: hi,
                    });
                }
            }
        }
        match TokenShape::new(name.name.clone(), lowered) {
            Ok(shape) => Some(shape),
            Err(e) => {
                let at = match &e {
                    ShapeError::BadLiteral { part, .. } | ShapeError::BadRepeat { part, .. } => {
                        parts.get(*part).map_or(span, part_span)
                    }
                    ShapeError::MatchesEmpty | ShapeError::TooLong { .. } => span,
                };
                self.d
                    .error(at, format!("token shape `{}`: {e}", name.name));
                None
            }
        }
    }

    /// The kind a token test names: `token` (every kind, `None`), a
    /// built-in kind or a declared one; an unknown name is an error.
    pub(super) fn token_kind(&mut self, name: &Ident) -> Result<Option<TokenKind>, ()> {
        if name.name == "token" {
            return Ok(None);
        }
        if let Some(k) = TokenKind::from_keyword(&name.name) {
            return Ok(Some(k));
        }
        if let Some(i) = self.token_kinds.get(&name.name) {
            // Declared kinds follow the built-in ones in the table.
            let declared = i
                .checked_sub(BUILTIN_KINDS.len())
                .and_then(|i| u16::try_from(i).ok());
            if let Some(d) = declared {
                return Ok(Some(TokenKind::Declared(d)));
            }
        }
        let known: Vec<String> = self.token_kinds.to_vec();
        self.d.error(
            name.span,
            format!(
                "unknown token kind `{}`: `url`, `email`, `iban`, `phone`, `quantity`, `token` or a kind declared with `token NAME = SHAPE;`{}",
                name.name,
                did_you_mean(&name.name, known.iter().map(String::as_str))
            ),
        );
        Err(())
    }
}

fn part_span(p: &ShapePartExpr) -> Span {
    match p {
        ShapePartExpr::Literal(l) => l.span,
        ShapePartExpr::Class { class, min, max } => {
            class.span.to(max.as_ref().map_or(min.span, |m| m.span))
        }
    }
}
