//! Object types and field tests (`docs/policy-language.md`, "Objects"):
//! lowering `{FIELD: TYPE, ...}` parameter types, and resolving a test's
//! operand `PARAM.FIELD[.FIELD...]` to a parameter and a field path.
//!
//! A test's operand is a name; when no parameter has that exact name and a
//! prefix of it up to a `.` names an object parameter, the rest is a path
//! of fields (`cfg.mode`, `edits.newText`). The access is resolved against
//! the declared type of whatever the first name denotes, so the same rule
//! applies to any atom that has an object type.

use super::Compiler;
use crate::ast::{Ident, ParamDecl, Pred};
use crate::diagnostic::did_you_mean;
use agenra_core::policy::Param;
use agenra_core::{ArgOp, ParamType};

/// What a test's operand denotes in one tool.
pub(super) enum Operand {
    /// A parameter of the tool (no field access).
    Param,
    /// A field of an object parameter: the parameter, the path, and the
    /// field's type as a test sees it (a list when a list was crossed,
    /// optional when anything on the way is).
    Field(usize, Vec<String>, Param),
    /// No parameter of the tool (not reported here).
    Missing,
    /// An object parameter, but not a field of it (reported).
    Bad,
}

impl Compiler<'_> {
    /// The core parameter for a declared one, object types included.
    pub(super) fn lower_param(&mut self, p: &ParamDecl) -> Param {
        let (ty, fields) = match &p.fields {
            Some(decls) => {
                let mut names = crate::names::Names::new("field");
                let mut fields = Vec::new();
                for f in decls {
                    let lowered = self.lower_param(f);
                    if names.declare(&f.name, &mut self.d).is_some() {
                        fields.push(lowered);
                    }
                }
                (ParamType::Object, fields)
            }
            None => {
                let ty = match p.ty.name.as_str() {
                    "string" => ParamType::Str,
                    "int" => ParamType::Int,
                    "bool" => ParamType::Bool,
                    "decimal" => ParamType::Decimal,
                    "object" => {
                        self.d.error(
                            p.ty.span,
                            "an object type lists its fields: `{NAME: TYPE, ...}`".to_string(),
                        );
                        ParamType::Str
                    }
                    other => {
                        self.d.error(
                            p.ty.span,
                            format!(
                                "unknown type `{other}`{}",
                                did_you_mean(other, ["string", "int", "bool", "decimal", "list"])
                            ),
                        );
                        ParamType::Str
                    }
                };
                (ty, Vec::new())
            }
        };
        Param {
            name: p.name.name.clone(),
            ty,
            list: p.list,
            optional: p.optional,
            fields,
        }
    }

    /// What `name` denotes among `params` (reports a path that names no
    /// field of an object parameter).
    pub(super) fn operand(&mut self, params: &[Param], name: &Ident) -> Operand {
        if params.iter().any(|p| p.name == name.name) {
            return Operand::Param;
        }
        for (cut, _) in name.name.match_indices('.') {
            let head = &name.name[..cut];
            let Some(i) = params
                .iter()
                .position(|p| p.name == head && p.ty == ParamType::Object)
            else {
                continue;
            };
            let path: Vec<String> = name.name[cut + 1..]
                .split('.')
                .map(str::to_string)
                .collect();
            return match field_type(&params[i], &path) {
                Ok(field) => Operand::Field(i, path, field),
                Err(missing) => {
                    self.d.error(name.span, missing);
                    Operand::Bad
                }
            };
        }
        Operand::Missing
    }

    /// Type-checks a field test like a test on a parameter of the field's
    /// type, and wraps the test in the field access.
    pub(super) fn field_test(
        &mut self,
        pred: &Pred,
        op: &mut ArgOp,
        path: Vec<String>,
        field: &Param,
        owner: &str,
        restrictive: bool,
    ) {
        self.type_check(pred, op, field, owner, restrictive);
        *op = ArgOp::Field {
            path,
            op: Box::new(op.clone()),
        };
    }
}

/// The type a test on `path` of object parameter `p` sees, or why the path
/// names no field.
fn field_type(p: &Param, path: &[String]) -> Result<Param, String> {
    let mut cur = p;
    let mut list = p.list;
    let mut optional = p.optional;
    let mut written = p.name.clone();
    for name in path {
        if cur.ty != ParamType::Object {
            return Err(format!(
                "`{written}` is {}, which has no fields (no `{name}`)",
                cur.type_name()
            ));
        }
        let Some(f) = cur.fields.iter().find(|f| &f.name == name) else {
            return Err(format!(
                "`{written}` ({}) has no field `{name}`{}",
                cur.type_name(),
                did_you_mean(name, cur.fields.iter().map(|f| f.name.as_str()))
            ));
        };
        written = format!("{written}.{name}");
        list |= f.list;
        optional |= f.optional;
        cur = f;
    }
    Ok(Param {
        name: written,
        ty: cur.ty,
        list,
        optional,
        fields: cur.fields.clone(),
    })
}
