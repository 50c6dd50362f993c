//! The natural-language producer against a local HTTP server that plays an
//! OpenAI-compatible chat-completions endpoint (there is no network here:
//! a `TcpListener` thread answers one request with a canned completion).

mod common;

use agenra_permission_ir::{self as pir, LlmConfig, LlmError};
use common::{ir, policy, TEXT};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the server saw: the request line, the headers (lowercased names), the body.
struct Seen {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Value,
}

/// Serves one request on 127.0.0.1 with `status` and `body`; returns the
/// base URL and a handle that yields what the server saw.
fn serve_once(status: u16, body: String) -> (String, JoinHandle<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("a connection");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        let mut buf = vec![0; len];
        reader.read_exact(&mut buf).unwrap();
        let mut stream = stream;
        let reason = if status == 200 { "OK" } else { "Error" };
        write!(
            stream,
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        stream.flush().unwrap();
        Seen {
            request_line: request_line.trim_end().to_string(),
            headers,
            body: serde_json::from_slice(&buf).unwrap_or(Value::Null),
        }
    });
    (format!("http://{addr}/v1"), handle)
}

fn completion(content: &str) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}]
    })
    .to_string()
}

fn config(base_url: String) -> LlmConfig {
    LlmConfig {
        base_url,
        model: "test-model".into(),
        api_key: Some("sk-test".into()),
        timeout: Duration::from_secs(10),
    }
}

#[test]
fn the_model_answer_is_read_validated_and_lowerable() {
    // The model echoes the IR in a code fence, with a wrong source text and
    // one quote at the wrong offsets: the text is ours, the span is moved.
    let mut doc = ir();
    doc["source"]["text"] = json!("something else");
    doc["actions"][0]["evidence"][0]["text"]["start"] = json!(1);
    let answer = format!("```json\n{doc}\n```");
    let (url, server) = serve_once(200, completion(&answer));
    let p = policy();
    let valid = pir::from_text(TEXT, &p, &config(url)).expect("a valid IR");
    assert_eq!(valid.ir().source.text, TEXT);
    assert_eq!(
        valid.ir().actions[0].evidence[0],
        pir::Span::Text(pir::TextSpan {
            start: 0,
            end: 13,
            quote: Some("Look up Alice".into())
        })
    );
    pir::lower(&valid, &p).unwrap();
    let seen = server.join().unwrap();
    assert_eq!(seen.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert!(seen
        .headers
        .contains(&("authorization".into(), "Bearer sk-test".into())));
    assert_eq!(seen.body["model"], "test-model");
    assert_eq!(seen.body["messages"][1]["content"], TEXT);
    // Asked under the schema, with the policy's vocabulary.
    assert_eq!(
        seen.body["response_format"]["json_schema"]["schema"]["title"],
        "Agenra Permission IR, version 1"
    );
    let system = seen.body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("email.send") && system.contains("confidential"),
        "{system}"
    );
}

#[test]
fn a_model_answer_without_source_gets_ours() {
    let mut doc = ir();
    doc.as_object_mut().unwrap().remove("source");
    let (url, server) = serve_once(200, completion(&doc.to_string()));
    let valid = pir::from_text(TEXT, &policy(), &config(url)).expect("a valid IR");
    assert_eq!(valid.ir().source.text, TEXT);
    assert_eq!(valid.ir().source.task_id, "task");
    server.join().unwrap();
}

#[test]
fn an_invalid_model_answer_is_refused_with_its_defects() {
    let mut doc = ir();
    doc["actions"][2]["tool"] = json!("email.sendmail");
    let (url, server) = serve_once(200, completion(&doc.to_string()));
    match pir::from_text(TEXT, &policy(), &config(url)) {
        Err(LlmError::Invalid(e)) => {
            assert_eq!(e.errors.len(), 1);
            assert_eq!(e.errors[0].kind(), "unknown-tool");
        }
        other => panic!("{other:?}"),
    }
    server.join().unwrap();
    // Duplicate keys from the model are refused like anywhere else.
    let dup = ir()
        .to_string()
        .replacen("\"version\":1", "\"version\":1,\"version\":1", 1);
    let (url, server) = serve_once(200, completion(&dup));
    assert!(matches!(
        pir::from_text(TEXT, &policy(), &config(url)),
        Err(LlmError::NotIr(pir::ParseError::DuplicateKey { .. }))
    ));
    server.join().unwrap();
    // Not a chat completion.
    let (url, server) = serve_once(200, "{\"choices\":[]}".into());
    assert!(matches!(
        pir::from_text(TEXT, &policy(), &config(url)),
        Err(LlmError::BadAnswer(_))
    ));
    server.join().unwrap();
}

#[test]
fn endpoint_errors_are_reported() {
    let (url, server) = serve_once(401, "{\"error\":\"bad key\"}".into());
    match pir::from_text(TEXT, &policy(), &config(url)) {
        Err(LlmError::Status { status, body, .. }) => {
            assert_eq!(status, 401);
            assert!(body.contains("bad key"));
        }
        other => panic!("{other:?}"),
    }
    server.join().unwrap();
    // Nobody listening.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = pir::from_text(
        TEXT,
        &policy(),
        &config(format!("http://127.0.0.1:{port}/v1")),
    )
    .unwrap_err();
    assert!(matches!(e, LlmError::Transport { .. }), "{e:?}");
}

#[test]
fn off_unless_configured() {
    let none = |_: &str| None;
    match LlmConfig::from_lookup(none) {
        Err(e @ LlmError::NotConfigured { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains(pir::ENV_BASE_URL) && msg.contains(pir::ENV_MODEL),
                "{msg}"
            );
        }
        other => panic!("{other:?}"),
    }
    let only_url = |k: &str| (k == pir::ENV_BASE_URL).then(|| "http://127.0.0.1:1/v1".to_string());
    assert!(matches!(
        LlmConfig::from_lookup(only_url),
        Err(LlmError::NotConfigured { missing }) if missing == [pir::ENV_MODEL]
    ));
    let vars = |k: &str| match k {
        "AGENRA_LLM_BASE_URL" => Some("http://127.0.0.1:1/v1".to_string()),
        "AGENRA_LLM_MODEL" => Some("m".to_string()),
        "AGENRA_LLM_TIMEOUT" => Some("5".to_string()),
        _ => None,
    };
    let c = LlmConfig::from_lookup(vars).unwrap();
    assert_eq!(
        (c.model.as_str(), c.api_key, c.timeout),
        ("m", None, Duration::from_secs(5))
    );
    let bad = |k: &str| match k {
        "AGENRA_LLM_BASE_URL" => Some("ftp://x".to_string()),
        "AGENRA_LLM_MODEL" => Some("m".to_string()),
        _ => None,
    };
    assert!(matches!(
        LlmConfig::from_lookup(bad),
        Err(LlmError::BadConfig { .. })
    ));
}

#[test]
fn the_schema_describes_the_types() {
    let schema: Value = serde_json::from_str(pir::SCHEMA).unwrap();
    // Every top-level field of a full IR is a property of the schema, and
    // every field of each part is a property of its definition.
    let full = ir();
    let props = |v: &Value| -> Vec<String> {
        v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    for k in full.as_object().unwrap().keys() {
        assert!(props(&schema).contains(k), "{k}");
    }
    for (part, def) in [
        ("assets", "asset"),
        ("actions", "action"),
        ("allowances", "allowance"),
        ("forbidden", "forbidden"),
        ("sinks", "sink"),
        ("flows", "flow"),
    ] {
        for item in full[part].as_array().unwrap() {
            for k in item.as_object().unwrap().keys() {
                assert!(props(&schema["$defs"][def]).contains(k), "{def}.{k}");
            }
        }
        // And the schema's required fields are what the Rust type requires:
        // removing one makes the document unreadable.
        for req in schema["$defs"][def]["required"].as_array().unwrap() {
            let mut doc = full.clone();
            doc[part][0]
                .as_object_mut()
                .unwrap()
                .remove(req.as_str().unwrap());
            assert!(
                pir::parse(&doc.to_string()).is_err(),
                "{def}.{req} is not required by the type"
            );
        }
    }
}
