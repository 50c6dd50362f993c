//! Per-field output labels (`docs/semantics.md`, "Per-field output
//! labels"): for provenance only, each leaf of a tool output takes the
//! label of the longest declared field path that leads to it, else the
//! label of the output as a whole.
//!
//! Shared by the monitor's indexes and the reference, which both walk an
//! output once when its result is reported.

use crate::label::Label;

/// A declared field path and the label its leaves take (already joined
/// with the call's sanitized inputs and resource labels).
pub type FieldLabel = (Vec<String>, Label);

/// The labels of one output's fields: the whole output's label and the
/// declared fields (none for most tools).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputLabels {
    /// The label of the output as a whole (the call's label).
    pub whole: Label,
    /// Declared paths, each with its leaves' label.
    pub fields: Vec<FieldLabel>,
}

impl OutputLabels {
    /// An output labelled as a whole (no declared fields).
    pub fn whole(label: Label) -> OutputLabels {
        OutputLabels {
            whole: label,
            fields: Vec::new(),
        }
    }

    /// The label of the leaves under declared field `field` (`None`: an
    /// undeclared field, the whole output's label).
    pub fn label(&self, field: Option<usize>) -> Label {
        field
            .and_then(|f| self.fields.get(f))
            .map_or(self.whole, |(_, l)| *l)
    }

    /// Calls `leaf` on every string and number leaf of `output`, in
    /// document order, with the declared field whose label it takes (the
    /// longest declared path leading to it; `None`: none does). Object
    /// keys are names, not data; arrays are descended into element-wise
    /// and add no key.
    pub fn walk<'a>(
        &self,
        output: &'a serde_json::Value,
        leaf: &mut impl FnMut(&'a serde_json::Value, Option<usize>),
    ) {
        let mut path = Vec::new();
        self.walk_at(output, None, &mut path, leaf);
    }

    fn walk_at<'a>(
        &self,
        v: &'a serde_json::Value,
        field: Option<usize>,
        path: &mut Vec<&'a str>,
        leaf: &mut impl FnMut(&'a serde_json::Value, Option<usize>),
    ) {
        match v {
            serde_json::Value::String(_) | serde_json::Value::Number(_) => leaf(v, field),
            serde_json::Value::Array(items) => items
                .iter()
                .for_each(|i| self.walk_at(i, field, path, leaf)),
            serde_json::Value::Object(m) => {
                for (k, child) in m {
                    path.push(k);
                    // Deeper paths are longer: an exact match here is the
                    // longest declared prefix of every leaf below.
                    let here = self
                        .fields
                        .iter()
                        .position(|(p, _)| p.len() == path.len() && p.iter().eq(path.iter()))
                        .or(field);
                    self.walk_at(child, here, path, leaf);
                    path.pop();
                }
            }
            serde_json::Value::Bool(_) | serde_json::Value::Null => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::CategorySet;
    use serde_json::json;

    #[test]
    fn leaves_take_the_longest_declared_prefix() {
        let t = Label::BOTTOM;
        let u = Label::new(0, CategorySet::EMPTY, false);
        let hi = Label::new(1, CategorySet::EMPTY, true);
        let labels = OutputLabels {
            whole: u,
            fields: vec![
                (vec!["tx".into()], t),
                (vec!["tx".into(), "subject".into()], u),
                (vec!["tx".into(), "meta".into(), "n".into()], hi),
            ],
        };
        let out = json!({
            "tx": [{"iban": "DE1", "subject": "hi", "meta": {"n": 3, "m": 4}}],
            "other": "x",
            "flag": true
        });
        let mut got = Vec::new();
        labels.walk(&out, &mut |v, f| got.push((v.to_string(), labels.label(f))));
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            vec![
                ("\"DE1\"".to_string(), t),
                ("\"hi\"".to_string(), u),
                ("\"x\"".to_string(), u),
                ("3".to_string(), hi),
                ("4".to_string(), t),
            ]
        );
        assert_eq!(OutputLabels::whole(u).label(Some(0)), u);
    }
}
