//! The natural-language producer: asks an OpenAI-compatible
//! chat-completions endpoint for an IR under the JSON Schema, then reads it
//! strictly and validates it against the policy. Off unless configured.

use crate::error::{ParseError, ValidationErrors};
use crate::ir::{PermissionIr, Source, Span};
use crate::validate::{validate, Validated};
use agenra_core::policy::Policy;
use std::time::Duration;

/// The endpoint's base URL (e.g. `http://127.0.0.1:8080/v1`); `/chat/completions` is appended.
pub const ENV_BASE_URL: &str = "AGENRA_LLM_BASE_URL";
/// The model name sent in each request.
pub const ENV_MODEL: &str = "AGENRA_LLM_MODEL";
/// The API key, sent as `Authorization: Bearer KEY` (optional: local servers need none).
pub const ENV_API_KEY: &str = "AGENRA_LLM_API_KEY";
/// Seconds to wait for the whole answer (default 120).
pub const ENV_TIMEOUT: &str = "AGENRA_LLM_TIMEOUT";

/// The JSON Schema of the IR (`docs/permission-ir.schema.json`).
pub const SCHEMA: &str = include_str!("../../../docs/permission-ir.schema.json");

/// Where and how to ask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmConfig {
    /// Base URL; `/chat/completions` is appended.
    pub base_url: String,
    /// The model.
    pub model: String,
    /// The API key, if any.
    pub api_key: Option<String>,
    /// Timeout for the whole request.
    pub timeout: Duration,
}

/// Why [`from_text`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The producer is off: the variables are not set.
    #[error("the natural-language producer is off: set {} (and {ENV_API_KEY} if the endpoint needs a key)", missing.join(" and "))]
    NotConfigured {
        /// The variables that are unset or empty.
        missing: Vec<&'static str>,
    },
    /// A variable with a value that cannot be used.
    #[error("{var}: {message}")]
    BadConfig {
        /// The variable.
        var: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The request did not get an answer.
    #[error("{url}: {message}")]
    Transport {
        /// The URL asked.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The endpoint answered with an error status.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The URL asked.
        url: String,
        /// The status code.
        status: u16,
        /// The start of the answer's body.
        body: String,
    },
    /// The answer is not a chat completion with a message.
    #[error("the endpoint's answer is not a chat completion: {0}")]
    BadAnswer(String),
    /// The model's message is not an IR.
    #[error("the model's answer is not an IR: {0}")]
    NotIr(#[from] ParseError),
    /// The model's IR has defects.
    #[error("the model's IR is invalid:\n{0}")]
    Invalid(#[from] ValidationErrors),
}

impl LlmConfig {
    /// Reads [`ENV_BASE_URL`], [`ENV_MODEL`], [`ENV_API_KEY`] and [`ENV_TIMEOUT`].
    pub fn from_env() -> Result<LlmConfig, LlmError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`LlmConfig::from_env`], with variables from `get`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<LlmConfig, LlmError> {
        let val = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let base_url = val(ENV_BASE_URL);
        let model = val(ENV_MODEL);
        let missing: Vec<&'static str> = [(ENV_BASE_URL, &base_url), (ENV_MODEL, &model)]
            .into_iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k)
            .collect();
        let (Some(base_url), Some(model)) = (base_url, model) else {
            return Err(LlmError::NotConfigured { missing });
        };
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::BadConfig {
                var: ENV_BASE_URL,
                message: format!("{base_url:?} is not an http:// or https:// URL"),
            });
        }
        let timeout = match val(ENV_TIMEOUT) {
            None => Duration::from_secs(120),
            Some(t) => match t.trim().parse::<u64>() {
                Ok(s) if s > 0 => Duration::from_secs(s),
                _ => {
                    return Err(LlmError::BadConfig {
                        var: ENV_TIMEOUT,
                        message: format!("{t:?} is not a positive number of seconds"),
                    })
                }
            },
        };
        Ok(LlmConfig {
            base_url,
            model,
            api_key: val(ENV_API_KEY),
            timeout,
        })
    }
}

/// The policy's vocabulary, for the prompt: tools with their parameters
/// and sinks, sinks, agents, facts, levels, categories.
pub fn vocabulary(policy: &Policy) -> serde_json::Value {
    let tools: Vec<serde_json::Value> = policy
        .tools
        .iter()
        .map(|t| {
            serde_json::json!({
                "name": t.name,
                "params": t.params.iter().map(|p| format!(
                    "{}{}: {}", p.name, if p.optional { "?" } else { "" }, p.type_name()
                )).collect::<Vec<_>>(),
                "resource": t.resource.map(|r| t.params[r].name.clone()),
                "sinks": t.sinks.iter().filter_map(|s| policy.sinks.get(s.sink)).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({
        "tools": tools,
        "sinks": policy.sinks,
        "agents": policy.agents.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        "facts": policy.facts,
        "levels": policy.levels,
        "categories": policy.categories,
    })
}

/// The chat-completions request body for `text`.
pub fn request_body(text: &str, policy: &Policy, model: &str) -> serde_json::Value {
    let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap_or(serde_json::Value::Null);
    let system = format!(
        "You translate a user's request to an AI agent into a Permission IR: a JSON \
         document that follows this JSON Schema exactly (no other fields):\n{SCHEMA}\n\
         Use only these tools, parameters, sinks, agents, facts, levels and categories of the \
         deployment's policy:\n{}\n\
         Rules: list as actions only the tool calls the request needs; constrain resources \
         (assets) and argument values the user named; forbid what the user excluded; \
         allowances only for data the user asked to send somewhere, with the lowest ceiling \
         that suffices. Every part needs evidence: text spans with start/end as UTF-8 byte \
         offsets into the request and the exact quoted text in `quote`. Set `source.text` \
         to the request verbatim. Answer with the JSON document only.",
        vocabulary(policy)
    );
    serde_json::json!({
        "model": model,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": text},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "permission_ir", "schema": schema},
        },
    })
}

/// Asks the endpoint for the IR of `text`, reads it strictly, puts `text`
/// in its source (whatever the model wrote there), repairs text spans whose
/// quote occurs exactly once in the text but at other offsets, and
/// validates it against `policy`.
pub fn from_text(text: &str, policy: &Policy, config: &LlmConfig) -> Result<Validated, LlmError> {
    let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
    let agent = ureq::AgentBuilder::new().timeout(config.timeout).build();
    let mut request = agent.post(&url).set("Content-Type", "application/json");
    if let Some(key) = &config.api_key {
        request = request.set("Authorization", &format!("Bearer {key}"));
    }
    let body = request_body(text, policy, &config.model).to_string();
    let answer = match request.send_string(&body) {
        Ok(response) => response.into_string().map_err(|e| LlmError::Transport {
            url: url.clone(),
            message: e.to_string(),
        })?,
        Err(ureq::Error::Status(status, response)) => {
            let body = response.into_string().unwrap_or_default();
            return Err(LlmError::Status {
                url,
                status,
                body: body.chars().take(500).collect(),
            });
        }
        Err(e) => {
            return Err(LlmError::Transport {
                url,
                message: e.to_string(),
            })
        }
    };
    let content = message_content(&answer)?;
    // The source is ours, whatever the model wrote there (or left out).
    let mut ir = crate::parse::parse_patched(strip_fences(&content), |v| {
        if let Some(doc) = v.as_object_mut() {
            let task_id = doc
                .get("source")
                .and_then(|s| s.get("task_id"))
                .and_then(|t| t.as_str())
                .filter(|t| !t.is_empty())
                .unwrap_or("task")
                .to_string();
            let source = Source {
                task_id,
                text: text.to_string(),
                events: 0,
            };
            doc.insert(
                "source".into(),
                serde_json::to_value(source).unwrap_or_default(),
            );
        }
    })?;
    repair_quotes(&mut ir);
    Ok(validate(ir, policy)?)
}

/// `choices[0].message.content` of a chat completion.
fn message_content(answer: &str) -> Result<String, LlmError> {
    let v: serde_json::Value =
        serde_json::from_str(answer).map_err(|e| LlmError::BadAnswer(e.to_string()))?;
    v.pointer("/choices/0/message/content")
        .and_then(|c| c.as_str())
        .map(str::to_string)
        .ok_or_else(|| LlmError::BadAnswer("no choices[0].message.content string".into()))
}

/// A message wrapped in a Markdown code fence, unwrapped.
fn strip_fences(s: &str) -> &str {
    let t = s.trim();
    match t.strip_prefix("```") {
        Some(rest) => {
            let rest = rest.trim_start_matches("json");
            rest.strip_suffix("```").unwrap_or(rest).trim()
        }
        None => t,
    }
}

/// Moves a text span whose `quote` is not at its offsets to the quote's
/// only occurrence in the text. A quote found nowhere or more than once is
/// left for validation to report.
pub fn repair_quotes(ir: &mut PermissionIr) {
    let text = ir.source.text.clone();
    let fix = |spans: &mut Vec<Span>| {
        for span in spans.iter_mut() {
            let Span::Text(t) = span else { continue };
            let Some(q) = &t.quote else { continue };
            if q.is_empty() || text.get(t.start..t.end) == Some(q.as_str()) {
                continue;
            }
            let mut found = text.match_indices(q.as_str());
            if let (Some((at, _)), None) = (found.next(), found.next()) {
                t.start = at;
                t.end = at + q.len();
            }
        }
    };
    if let Some(i) = &mut ir.intent {
        fix(&mut i.evidence);
    }
    for a in &mut ir.assets {
        fix(&mut a.evidence);
        if let Some(l) = &mut a.label {
            fix(&mut l.evidence);
        }
    }
    ir.actions.iter_mut().for_each(|x| fix(&mut x.evidence));
    ir.obligations.iter_mut().for_each(|x| fix(&mut x.evidence));
    ir.allowances.iter_mut().for_each(|x| fix(&mut x.evidence));
    ir.forbidden.iter_mut().for_each(|x| fix(&mut x.evidence));
    ir.sinks.iter_mut().for_each(|x| fix(&mut x.evidence));
    ir.flows.iter_mut().for_each(|x| fix(&mut x.evidence));
}
