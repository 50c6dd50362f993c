//! `agenra._agenra`: the compiled part of the `agenra` Python package.
//!
//! A thin layer over the `agenra` library (`docs/embedding.md`): compile a
//! policy, open sessions from it, decide calls. Python values are converted
//! to JSON values while the GIL is held; the decision itself runs with the
//! GIL released (`Python::detach`). A session sits behind a mutex, so two
//! threads that share one are serialized (never interleaved inside a step);
//! the documented contract is still one thread at a time (`docs/python.md`).
//!
//! Nothing here panics on input: every bad value is a Python exception that
//! names the argument (and the position inside it).

// The methods mirror Python signatures with keyword arguments.
#![allow(clippy::too_many_arguments)]

use agenra::core::decision::{reason_text, Rule};
use agenra::core::event::{Outcome, Task, TaskScope};
use agenra::core::graph::NodeId;
use agenra::{Applied, Call, CompiledPolicy, Decision, Event, Report, Resolve, StepOutput, Stop};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

create_exception!(
    agenra,
    AgenraError,
    PyException,
    "Base class of the errors Agenra raises."
);
create_exception!(
    agenra,
    PolicyError,
    AgenraError,
    "Policy text that does not compile; `.diagnostics` lists each error with its file, line and column."
);
create_exception!(
    agenra,
    SessionError,
    AgenraError,
    "An event the session cannot apply (a duplicate call id, an unknown call, a call in the wrong state). The session is unchanged."
);

/// How deep a Python value may nest (lists and dicts) before it is refused.
const MAX_DEPTH: usize = 64;

/// A Python value as JSON, or a `TypeError`/`ValueError` naming where in
/// `what` (e.g. ``argument `to`[2]``) the offending value sits.
fn to_json(
    v: &Bound<'_, PyAny>,
    what: &dyn Fn() -> String,
    depth: usize,
) -> PyResult<serde_json::Value> {
    use serde_json::Value as J;
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "{}: nested deeper than {MAX_DEPTH} levels",
            what()
        )));
    }
    if v.is_none() {
        return Ok(J::Null);
    }
    // bool before int: Python's bool is an int.
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(J::Bool(b.is_true()));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(J::String(s.to_str()?.to_owned()));
    }
    if let Ok(i) = v.cast::<PyInt>() {
        if let Ok(n) = i.extract::<i64>() {
            return Ok(J::from(n));
        }
        if let Ok(n) = i.extract::<u64>() {
            return Ok(J::from(n));
        }
        return Err(PyValueError::new_err(format!(
            "{}: integer {} is out of the 64-bit range",
            what(),
            i
        )));
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        let x = f.value();
        return serde_json::Number::from_f64(x)
            .map(J::Number)
            .ok_or_else(|| {
                PyValueError::new_err(format!("{}: {x} is not a finite number", what()))
            });
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, item) in d.iter() {
            let key = k.cast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{}: a key is not a string ({})",
                    what(),
                    type_name(&k)
                ))
            })?;
            let key = key.to_str()?.to_owned();
            let inner = || format!("{}[{key:?}]", what());
            let value = to_json(&item, &inner, depth + 1)?;
            map.insert(key, value);
        }
        return Ok(J::Object(map));
    }
    if v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok() {
        let mut out = Vec::new();
        for (i, item) in v.try_iter()?.enumerate() {
            let item = item?;
            let inner = || format!("{}[{i}]", what());
            out.push(to_json(&item, &inner, depth + 1)?);
        }
        return Ok(J::Array(out));
    }
    // decimal.Decimal: an exact decimal is written as its string (the
    // monitor reads a decimal parameter's string exactly).
    if type_name(v) == "Decimal" && is_decimal_module(v) {
        let s: String = v.str()?.to_str()?.to_owned();
        return Ok(J::String(s));
    }
    Err(PyTypeError::new_err(format!(
        "{}: a value of type {} cannot be given to the monitor (use str, int, float, bool, None, Decimal, list, tuple or dict)",
        what(),
        type_name(v)
    )))
}

/// Whether `v`'s type comes from the standard `decimal` module (a class of
/// another module that happens to be called `Decimal` is refused).
fn is_decimal_module(v: &Bound<'_, PyAny>) -> bool {
    match v.get_type().module() {
        Ok(m) => m.to_str().is_ok_and(|m| m == "decimal"),
        Err(_) => false,
    }
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A JSON value as a Python value (dicts, lists, str, int, float, bool, None).
fn from_json<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => py.None().into_bound(py),
        J::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        J::String(s) => PyString::new(py, s).into_any(),
        J::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(from_json(py, x)?)?;
            }
            list.into_any()
        }
        J::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, from_json(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// Arguments of a call: a dict of parameter name to value.
fn args_map(
    args: Option<&Bound<'_, PyAny>>,
) -> PyResult<serde_json::Map<String, serde_json::Value>> {
    let Some(args) = args else {
        return Ok(serde_json::Map::new());
    };
    if args.is_none() {
        return Ok(serde_json::Map::new());
    }
    let d = args.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "args: expected a dict of parameter name to value, got {}",
            type_name(args)
        ))
    })?;
    let mut map = serde_json::Map::with_capacity(d.len());
    for (k, v) in d.iter() {
        let key = k.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err(format!(
                "args: a parameter name is not a string ({})",
                type_name(&k)
            ))
        })?;
        let key = key.to_str()?.to_owned();
        let what = || format!("argument `{key}`");
        let value = to_json(&v, &what, 0)?;
        map.insert(key, value);
    }
    Ok(map)
}

/// A dict of name to list of strings (lineage, task sets), field-named errors.
fn string_lists(
    v: Option<&Bound<'_, PyAny>>,
    field: &str,
) -> PyResult<BTreeMap<String, Vec<String>>> {
    let mut out = BTreeMap::new();
    let Some(v) = v else { return Ok(out) };
    if v.is_none() {
        return Ok(out);
    }
    let d = v.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{field}: expected a dict of name to list of str, got {}",
            type_name(v)
        ))
    })?;
    for (k, items) in d.iter() {
        let key: String = k.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{field}: a key is not a string ({})",
                type_name(&k)
            ))
        })?;
        out.insert(key.clone(), str_list(&items, &format!("{field}[{key:?}]"))?);
    }
    Ok(out)
}

fn str_list(v: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<String>> {
    if v.cast::<PyString>().is_ok() {
        return Err(PyTypeError::new_err(format!(
            "{field}: expected a list of str, got a single str"
        )));
    }
    let mut out = Vec::new();
    let iter = v.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{field}: expected a list of str, got {}",
            type_name(v)
        ))
    })?;
    for (i, item) in iter.enumerate() {
        let item = item?;
        let s: String = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{field}[{i}]: expected str, got {}",
                type_name(&item)
            ))
        })?;
        out.push(s);
    }
    Ok(out)
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// One diagnostic of the policy compiler.
#[pyclass(frozen, module = "agenra._agenra", name = "Diagnostic")]
struct PyDiagnostic {
    #[pyo3(get)]
    severity: String,
    #[pyo3(get)]
    file: String,
    #[pyo3(get)]
    line: u32,
    #[pyo3(get)]
    column: u32,
    #[pyo3(get)]
    message: String,
}

#[pymethods]
impl PyDiagnostic {
    fn __str__(&self) -> String {
        format!(
            "{}:{}:{}: {}: {}",
            self.file, self.line, self.column, self.severity, self.message
        )
    }
    fn __repr__(&self) -> String {
        format!(
            "Diagnostic(severity={:?}, file={:?}, line={}, column={}, message={:?})",
            self.severity, self.file, self.line, self.column, self.message
        )
    }
}

fn diagnostic(d: &agenra::Diagnostic, file: &str) -> PyDiagnostic {
    PyDiagnostic {
        severity: d.severity.to_string(),
        file: file.to_owned(),
        line: d.span.line,
        column: d.span.col,
        message: d.message.clone(),
    }
}

/// A compiled policy: immutable, shared by every session opened from it.
#[pyclass(frozen, module = "agenra._agenra", name = "Policy")]
struct PyPolicy {
    inner: CompiledPolicy,
    warnings: Vec<Py<PyDiagnostic>>,
}

#[pymethods]
impl PyPolicy {
    /// The policy's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.policy().name.clone()
    }

    /// The policy's content hash (hex), as audit records name it.
    #[getter]
    fn hash(&self) -> String {
        self.inner.hash().to_string()
    }

    /// The compiler's warnings (the policy compiled anyway).
    #[getter]
    fn warnings(&self, py: Python<'_>) -> Vec<Py<PyDiagnostic>> {
        self.warnings.iter().map(|w| w.clone_ref(py)).collect()
    }

    /// The declared tools' names.
    fn tools(&self) -> Vec<String> {
        self.inner
            .policy()
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// A new session (one agent run) under this policy.
    #[pyo3(signature = (*, record = false, id_prefix = "py-"))]
    fn session(&self, record: bool, id_prefix: &str) -> PySession {
        PySession::open(&self.inner, record, id_prefix)
    }

    fn __repr__(&self) -> String {
        format!(
            "Policy(name={:?}, hash={:?})",
            self.inner.policy().name,
            self.inner.hash().to_string()
        )
    }
}

/// Compiles policy text. `name` names the policy when the text has no
/// `policy` statement; `filename` is what diagnostics name.
#[pyfunction]
#[pyo3(signature = (text, name = "policy", filename = None))]
fn compile_policy(
    py: Python<'_>,
    text: &str,
    name: &str,
    filename: Option<&str>,
) -> PyResult<PyPolicy> {
    let file = filename.unwrap_or("<policy>");
    let source = text.to_owned();
    let policy_name = name.to_owned();
    let compiled = py.detach(move || agenra::compile(&source, &policy_name));
    match compiled {
        Ok(c) => {
            let mut warnings = Vec::with_capacity(c.warnings.len());
            for w in &c.warnings {
                warnings.push(Py::new(py, diagnostic(w, file))?);
            }
            Ok(PyPolicy {
                inner: c.policy,
                warnings,
            })
        }
        Err(agenra::CompileError::Policy(e)) => {
            let lines: Vec<String> = e
                .diagnostics
                .iter()
                .map(|d| format!("{file}:{d}"))
                .collect();
            let err = PolicyError::new_err(lines.join("\n"));
            let mut diags = Vec::with_capacity(e.diagnostics.len());
            for d in &e.diagnostics {
                diags.push(Py::new(py, diagnostic(d, file))?);
            }
            err.value(py).setattr("diagnostics", diags)?;
            Err(err)
        }
        Err(agenra::CompileError::Invalid(e)) => Err(PolicyError::new_err(format!(
            "{file}: the compiled policy failed validation: {e}"
        ))),
    }
}

/// Loads a compiled policy (`agenra compile` JSON output), validated.
#[pyfunction]
#[pyo3(signature = (text, filename = None))]
fn load_compiled_policy(text: &str, filename: Option<&str>) -> PyResult<PyPolicy> {
    let file = filename.unwrap_or("<compiled policy>");
    let policy: agenra::Policy = serde_json::from_str(text).map_err(|e| {
        PolicyError::new_err(format!(
            "{file}:{}:{}: not a compiled policy: {e}",
            e.line(),
            e.column()
        ))
    })?;
    let inner = CompiledPolicy::new(policy)
        .map_err(|e| PolicyError::new_err(format!("{file}: invalid compiled policy: {e}")))?;
    Ok(PyPolicy {
        inner,
        warnings: Vec::new(),
    })
}

/// A decision: ALLOW, DENY or PAUSE, the rule that decided, why, and the
/// hashes of the policy and of the ledger after the step.
#[pyclass(frozen, module = "agenra._agenra", name = "Decision")]
struct PyDecision {
    #[pyo3(get)]
    call: String,
    #[pyo3(get)]
    tool: Option<String>,
    decision: Decision,
    path: Vec<NodeId>,
    policy: CompiledPolicy,
}

fn names_of(policy: &CompiledPolicy, grants: &[usize]) -> Vec<String> {
    grants
        .iter()
        .filter_map(|&g| policy.policy().grants.get(g).map(|g| g.name.clone()))
        .collect()
}

#[pymethods]
impl PyDecision {
    /// "ALLOW", "DENY" or "PAUSE".
    #[getter]
    fn verdict(&self) -> &'static str {
        self.decision.verdict.as_str()
    }
    /// Whether the call may run now.
    #[getter]
    fn allowed(&self) -> bool {
        self.decision.verdict == agenra::Verdict::Allow
    }
    /// The rule or grant that decided (for ALLOW, the caller's grant).
    #[getter]
    fn rule(&self) -> String {
        self.decision.rule.name(self.policy.policy())
    }
    /// Why, as a sentence (rendered when read).
    #[getter]
    fn reason(&self) -> String {
        self.decision.reason_text(self.policy.policy())
    }
    /// The violation's node ids (from the labeled source to the call, for a flow rule).
    #[getter]
    fn path(&self) -> Vec<u32> {
        self.path.iter().map(|n| n.0).collect()
    }
    /// The call's node in the session graph.
    #[getter]
    fn node(&self) -> u32 {
        self.decision.node.0
    }
    /// Grants whose units the call took (or, for an approval that denies, got back).
    #[getter]
    fn grants(&self) -> Vec<String> {
        if self.decision.refunded.is_empty() {
            names_of(&self.policy, &self.decision.grants)
        } else {
            names_of(&self.policy, &self.decision.refunded)
        }
    }
    /// The ledger hash after this step (hex).
    #[getter]
    fn ledger_hash(&self) -> String {
        self.decision.ledger_hash.to_string()
    }
    /// The policy's content hash (hex).
    #[getter]
    fn policy_hash(&self) -> String {
        self.policy.hash().to_string()
    }
    fn __repr__(&self) -> String {
        format!(
            "Decision(verdict={:?}, rule={:?}, call={:?}, reason={:?})",
            self.verdict(),
            self.rule(),
            self.call,
            self.reason()
        )
    }
    fn __bool__(&self) -> bool {
        self.allowed()
    }
}

/// What a result, rejection or task did.
#[pyclass(frozen, module = "agenra._agenra", name = "Applied")]
struct PyApplied {
    #[pyo3(get)]
    call: String,
    #[pyo3(get)]
    node: u32,
    #[pyo3(get)]
    rule: Option<String>,
    #[pyo3(get)]
    reason: String,
    #[pyo3(get)]
    refunded: Vec<String>,
    #[pyo3(get)]
    ledger_hash: String,
}

#[pymethods]
impl PyApplied {
    fn __repr__(&self) -> String {
        format!(
            "Applied(call={:?}, node={}, rule={}, reason={:?}, refunded={:?})",
            self.call,
            self.node,
            self.rule
                .as_ref()
                .map_or_else(|| "None".to_string(), |r| format!("{r:?}")),
            self.reason,
            self.refunded
        )
    }
}

fn applied(policy: &CompiledPolicy, call: &str, a: &Applied) -> PyApplied {
    PyApplied {
        call: call.to_owned(),
        node: a.node.0,
        rule: a.rule.map(|r: Rule| r.name(policy.policy())),
        reason: a.reason_text(policy.policy()),
        refunded: names_of(policy, &a.refunded),
        ledger_hash: a.ledger_hash.to_string(),
    }
}

/// One rule that would stop a call (an entry of `check_all`).
#[pyclass(frozen, module = "agenra._agenra", name = "Stop")]
struct PyStop {
    #[pyo3(get)]
    verdict: &'static str,
    #[pyo3(get)]
    rule: String,
    #[pyo3(get)]
    reason: String,
    #[pyo3(get)]
    path: Vec<u32>,
}

#[pymethods]
impl PyStop {
    fn __repr__(&self) -> String {
        format!(
            "Stop(verdict={:?}, rule={:?}, reason={:?})",
            self.verdict, self.rule, self.reason
        )
    }
}

struct State {
    session: agenra::Session,
    next_id: u64,
    last_time: u64,
    id_prefix: String,
    trace: Option<Vec<String>>,
}

impl State {
    /// `time`, or the system clock; never before the last event's time.
    fn time(&mut self, time: Option<u64>) -> u64 {
        time.unwrap_or_else(|| now_seconds().max(self.last_time))
    }

    fn fresh_id(&mut self) -> String {
        self.next_id += 1;
        format!("{}{}", self.id_prefix, self.next_id)
    }

    /// Records an applied event (sessions opened with `record=True`).
    fn record(&mut self, event: &Event) -> Result<(), String> {
        if let Some(trace) = &mut self.trace {
            let line = serde_json::to_string(event).map_err(|e| e.to_string())?;
            trace.push(line);
        }
        Ok(())
    }

    fn step(&mut self, event: Event) -> Result<StepOutput, StepFailure> {
        let out = self.session.step(&event).map_err(StepFailure::Step)?;
        self.advance(&event);
        self.record(&event).map_err(StepFailure::Record)?;
        Ok(out)
    }

    fn advance(&mut self, event: &Event) {
        let t = match event {
            Event::Call(c) => Some(c.time),
            Event::Result(r) => r.time,
            Event::Approve(a) | Event::Reject(a) => a.time,
            Event::Task(t) => t.time,
        };
        if let Some(t) = t {
            self.last_time = self.last_time.max(t);
        }
    }
}

enum StepFailure {
    Step(agenra::StepError),
    Record(String),
    Poisoned,
}

impl From<StepFailure> for PyErr {
    fn from(f: StepFailure) -> PyErr {
        match f {
            StepFailure::Step(e) => SessionError::new_err(e.to_string()),
            StepFailure::Record(e) => {
                AgenraError::new_err(format!("the event applied but could not be recorded: {e}"))
            }
            StepFailure::Poisoned => AgenraError::new_err(
                "the session is unusable: a step panicked earlier (please report it)",
            ),
        }
    }
}

/// One agent run under a policy. Calls to one session are serialized by a
/// mutex (the GIL is released while it decides).
#[pyclass(frozen, module = "agenra._agenra", name = "Session")]
struct PySession {
    state: Mutex<State>,
    policy: CompiledPolicy,
}

impl PySession {
    fn open(policy: &CompiledPolicy, record: bool, id_prefix: &str) -> PySession {
        PySession {
            state: Mutex::new(State {
                session: policy.session(),
                next_id: 0,
                last_time: 0,
                id_prefix: id_prefix.to_owned(),
                trace: record.then(Vec::new),
            }),
            policy: policy.clone(),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>, StepFailure> {
        self.state.lock().map_err(|_| StepFailure::Poisoned)
    }

    fn build_call(
        &self,
        tool: &str,
        args: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
        time: Option<u64>,
        lineage: Option<&Bound<'_, PyAny>>,
        agent: Option<String>,
    ) -> PyResult<(Call, bool)> {
        let args = args_map(args)?;
        let lineage = string_lists(lineage, "lineage")?;
        let mut call = Call::new(id.clone().unwrap_or_default(), tool, time.unwrap_or(0));
        call.args = args;
        call.lineage = lineage;
        call.agent = agent;
        Ok((call, id.is_none()))
    }

    fn decision(
        &self,
        call: String,
        tool: Option<String>,
        d: Decision,
        path: Vec<NodeId>,
    ) -> PyDecision {
        PyDecision {
            call,
            tool,
            decision: d,
            path,
            policy: self.policy.clone(),
        }
    }
}

/// Which of authorize / check a decision is for.
#[derive(Clone, Copy, PartialEq)]
enum Ask {
    Authorize,
    Check,
}

#[pymethods]
impl PySession {
    #[new]
    #[pyo3(signature = (policy, *, record = false, id_prefix = "py-"))]
    fn new(policy: &PyPolicy, record: bool, id_prefix: &str) -> PySession {
        PySession::open(&policy.inner, record, id_prefix)
    }

    /// Decides a call and records it (ALLOW and PAUSE take units).
    #[pyo3(signature = (tool, args = None, *, id = None, time = None, lineage = None, agent = None))]
    fn authorize(
        &self,
        py: Python<'_>,
        tool: &str,
        args: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
        time: Option<u64>,
        lineage: Option<&Bound<'_, PyAny>>,
        agent: Option<String>,
    ) -> PyResult<PyDecision> {
        let (call, fresh) = self.build_call(tool, args, id, time, lineage, agent)?;
        let (call_id, d, path) = py.detach(|| self.decide(call, fresh, time, Ask::Authorize))?;
        Ok(self.decision(call_id, Some(tool.to_owned()), d, path))
    }

    /// The decision `authorize` would give now; records nothing.
    #[pyo3(signature = (tool, args = None, *, id = None, time = None, lineage = None, agent = None))]
    fn check(
        &self,
        py: Python<'_>,
        tool: &str,
        args: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
        time: Option<u64>,
        lineage: Option<&Bound<'_, PyAny>>,
        agent: Option<String>,
    ) -> PyResult<PyDecision> {
        let (call, fresh) = self.build_call(tool, args, id, time, lineage, agent)?;
        let (call_id, d, path) = py.detach(|| self.decide(call, fresh, time, Ask::Check))?;
        Ok(self.decision(call_id, Some(tool.to_owned()), d, path))
    }

    /// Every rule that would DENY or PAUSE the call, in the order the step
    /// checks them (empty: it would be allowed). Records nothing.
    #[pyo3(signature = (tool, args = None, *, id = None, time = None, lineage = None, agent = None))]
    fn check_all(
        &self,
        py: Python<'_>,
        tool: &str,
        args: Option<&Bound<'_, PyAny>>,
        id: Option<String>,
        time: Option<u64>,
        lineage: Option<&Bound<'_, PyAny>>,
        agent: Option<String>,
    ) -> PyResult<Vec<PyStop>> {
        let (mut call, fresh) = self.build_call(tool, args, id, time, lineage, agent)?;
        let stops: Vec<Stop> = py.detach(|| -> Result<Vec<Stop>, StepFailure> {
            let mut st = self.lock()?;
            if fresh {
                call.id = format!("{}check", st.id_prefix);
            }
            call.time = st.time(time);
            st.session.check_all(&call).map_err(StepFailure::Step)
        })?;
        let policy = self.policy.policy();
        let tool_id = policy.tools.iter().position(|t| t.name == tool);
        Ok(stops
            .into_iter()
            .map(|s| PyStop {
                verdict: s.verdict.as_str(),
                rule: s.rule.name(policy),
                reason: reason_text(policy, &s.reason, s.rule, tool_id),
                path: s.path.iter().map(|n| n.0).collect(),
            })
            .collect())
    }

    /// Reports the result of an admitted call: `status` is "succeeded"
    /// (its output is labeled and read), "failed" (no effect: its units come
    /// back) or "unknown" (units stay spent).
    #[pyo3(signature = (call, status = "succeeded", output = None, *, discovered = None, time = None))]
    fn report(
        &self,
        py: Python<'_>,
        call: String,
        status: &str,
        output: Option<&Bound<'_, PyAny>>,
        discovered: Option<&Bound<'_, PyAny>>,
        time: Option<u64>,
    ) -> PyResult<PyApplied> {
        let status = match status {
            "succeeded" => Outcome::Succeeded,
            "failed" => Outcome::Failed,
            "unknown" => Outcome::Unknown,
            other => {
                return Err(PyValueError::new_err(format!(
                    "status: expected \"succeeded\", \"failed\" or \"unknown\", got {other:?}"
                )))
            }
        };
        let output = match output {
            Some(o) => to_json(o, &|| "output".to_string(), 0)?,
            None => serde_json::Value::Null,
        };
        let discovered = match discovered {
            Some(d) if !d.is_none() => str_list(d, "discovered")?,
            _ => Vec::new(),
        };
        let mut report = Report::new(call.clone(), status).output(output);
        report.discovered = discovered;
        report.time = time;
        let out = py.detach(|| self.lock()?.step(Event::Result(report)))?;
        self.applied_out(&call, out)
    }

    /// A human approves a paused call: it is re-checked now (it can still
    /// be denied, and its units then come back).
    #[pyo3(signature = (call, *, time = None))]
    fn approve(&self, py: Python<'_>, call: String, time: Option<u64>) -> PyResult<PyDecision> {
        let event = Event::Approve(Resolve {
            session: None,
            call: call.clone(),
            time,
        });
        let (out, path, tool) = py.detach(|| -> Result<_, StepFailure> {
            let mut st = self.lock()?;
            let out = st.step(event)?;
            let (path, tool) = match &out {
                StepOutput::Decision(d) => (
                    st.session.path(d).unwrap_or_default(),
                    d.tool
                        .and_then(|t| self.policy.policy().tools.get(t))
                        .map(|t| t.name.clone()),
                ),
                StepOutput::Applied(_) => (Vec::new(), None),
            };
            Ok((out, path, tool))
        })?;
        match out {
            StepOutput::Decision(d) => Ok(self.decision(call, tool, d, path)),
            StepOutput::Applied(_) => Err(AgenraError::new_err(format!(
                "approving `{call}` gave no decision (please report it)"
            ))),
        }
    }

    /// A human rejects a paused call: its reserved units come back.
    #[pyo3(signature = (call, *, time = None))]
    fn reject(&self, py: Python<'_>, call: String, time: Option<u64>) -> PyResult<PyApplied> {
        let event = Event::Reject(Resolve {
            session: None,
            call: call.clone(),
            time,
        });
        let out = py.detach(|| self.lock()?.step(event))?;
        self.applied_out(&call, out)
    }

    /// The user's request: trusted text the agent works from. `sets` seeds
    /// discovered sets (`task seeds SET;`); `scope` (a dict with `tools`,
    /// `forbid`, `resources`, `forbid_resources`) narrows what the task may use.
    #[pyo3(signature = (text, *, id = None, sets = None, scope = None, time = None))]
    fn task(
        &self,
        py: Python<'_>,
        text: String,
        id: Option<String>,
        sets: Option<&Bound<'_, PyAny>>,
        scope: Option<&Bound<'_, PyAny>>,
        time: Option<u64>,
    ) -> PyResult<PyApplied> {
        let sets = string_lists(sets, "sets")?;
        let scope: Option<TaskScope> = match scope {
            Some(s) if !s.is_none() => {
                let json = to_json(s, &|| "scope".to_string(), 0)?;
                Some(
                    serde_json::from_value(json)
                        .map_err(|e| PyValueError::new_err(format!("scope: {e}")))?,
                )
            }
            _ => None,
        };
        let (id, out) = py.detach(|| -> Result<_, StepFailure> {
            let mut st = self.lock()?;
            let id = match id {
                Some(id) => id,
                None => st.fresh_id(),
            };
            let t = st.time(time);
            let event = Event::Task(Task {
                session: None,
                id: id.clone(),
                time: Some(t),
                text,
                sets,
                scope,
            });
            Ok((id, st.step(event)?))
        })?;
        self.applied_out(&id, out)
    }

    /// The events this session applied, as JSON lines `agenra replay`
    /// reads (only for sessions opened with `record=True`).
    fn trace(&self) -> PyResult<Vec<String>> {
        let st = self.lock()?;
        match &st.trace {
            Some(t) => Ok(t.clone()),
            None => Err(AgenraError::new_err(
                "this session records no trace: open it with record=True",
            )),
        }
    }

    /// What is left of grant `name` (None: unlimited).
    fn grant_left(&self, name: &str) -> PyResult<Option<u64>> {
        let policy = self.policy.policy();
        let g = policy
            .grants
            .iter()
            .position(|g| g.name == name)
            .ok_or_else(|| PyValueError::new_err(format!("the policy has no grant `{name}`")))?;
        let st = self.lock()?;
        match st.session.grant_left(g) {
            Some(agenra::core::policy::Quota::Limited(n)) => Ok(Some(n)),
            Some(agenra::core::policy::Quota::Unlimited) => Ok(None),
            None => Err(PyValueError::new_err(format!(
                "the policy has no grant `{name}`"
            ))),
        }
    }

    /// The policy this session decides under.
    #[getter]
    fn policy_hash(&self) -> String {
        self.policy.hash().to_string()
    }
}

impl PySession {
    fn decide(
        &self,
        mut call: Call,
        fresh: bool,
        time: Option<u64>,
        ask: Ask,
    ) -> Result<(String, Decision, Vec<NodeId>), StepFailure> {
        let mut st = self.lock()?;
        if fresh {
            call.id = if ask == Ask::Check {
                // Never taken: a check records nothing, so the next
                // authorize may get the same id.
                format!("{}{}", st.id_prefix, st.next_id + 1)
            } else {
                st.fresh_id()
            };
        }
        call.time = st.time(time);
        let d = match ask {
            Ask::Authorize => {
                let d = st.session.authorize(&call).map_err(StepFailure::Step)?;
                st.last_time = st.last_time.max(call.time);
                if st.trace.is_some() {
                    st.record(&Event::Call(call.clone()))
                        .map_err(StepFailure::Record)?;
                }
                d
            }
            Ask::Check => st.session.check(&call).map_err(StepFailure::Step)?,
        };
        let path = if d.verdict == agenra::Verdict::Allow {
            Vec::new()
        } else {
            st.session.path(&d).unwrap_or_default()
        };
        Ok((call.id, d, path))
    }

    fn applied_out(&self, call: &str, out: StepOutput) -> PyResult<PyApplied> {
        match out {
            StepOutput::Applied(a) => Ok(applied(&self.policy, call, &a)),
            StepOutput::Decision(_) => Err(AgenraError::new_err(format!(
                "`{call}` gave a decision where none was expected (please report it)"
            ))),
        }
    }
}

/// Converts a Python value as the monitor would read it (for tests and for
/// adapters that want to see what is sent).
#[pyfunction]
fn to_monitor_value<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let json = to_json(value, &|| "value".to_string(), 0)?;
    from_json(py, &json)
}

#[pymodule]
fn _agenra(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("AgenraError", py.get_type::<AgenraError>())?;
    m.add("PolicyError", py.get_type::<PolicyError>())?;
    m.add("SessionError", py.get_type::<SessionError>())?;
    m.add_class::<PyPolicy>()?;
    m.add_class::<PySession>()?;
    m.add_class::<PyDecision>()?;
    m.add_class::<PyApplied>()?;
    m.add_class::<PyStop>()?;
    m.add_class::<PyDiagnostic>()?;
    m.add_function(wrap_pyfunction!(compile_policy, m)?)?;
    m.add_function(wrap_pyfunction!(load_compiled_policy, m)?)?;
    m.add_function(wrap_pyfunction!(to_monitor_value, m)?)?;
    Ok(())
}
