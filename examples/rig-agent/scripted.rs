//! A completion model that answers from a script instead of a provider,
//! and a tiny executor: the example runs with no model, no network and no
//! async runtime.
//!
//! In rig 0.44 a model is a wire (how requests and replies are shaped)
//! over a transport (what carries them). Here the wire's frames are
//! scripted turns, and the transport pops the next one for each request,
//! keeping the requests so a test can read what the model was shown.

use rig_core::completion::options::{Mapping, OptionFields, OptionMap};
use rig_core::completion::{Accepts, CompletionRequest, FinishReason, ReplayTarget};
use rig_core::driver::{Exchange, Model, Opened, Opening, Transport};
use rig_core::error::{EncodeError, ProviderError};
use rig_core::message::{Api, CallId, ToolName};
use rig_core::operation::{Block, Completion, Finish};
use rig_core::wire::document::{Reassemble, Serves};
use rig_core::wire::{Decoder, Descriptor, Flow, Mode, Out, Wire, WireEvent};
use serde_json::Value;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

/// One scripted reply of the model.
#[derive(Clone, Debug, serde::Serialize)]
pub enum Turn {
    /// The model calls a tool (`id` is the provider's call id).
    ToolCall {
        id: String,
        name: String,
        args: Value,
    },
    /// The model answers in text and the run ends.
    Text(String),
}

impl Turn {
    /// A tool call.
    pub fn call(id: &str, name: &str, args: Value) -> Turn {
        Turn::ToolCall {
            id: id.into(),
            name: name.into(),
            args,
        }
    }

    /// A final text answer.
    pub fn text(text: &str) -> Turn {
        Turn::Text(text.into())
    }
}

/// The scripted wire.
#[derive(Clone, Debug)]
pub struct ScriptWire;

/// The wire's API name, as rig's records name it.
const API: Api = Api::from_static("agenra.scripted");

impl ReplayTarget for ScriptWire {
    fn api(&self) -> Api {
        API
    }

    fn provider(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        "scripted"
    }

    fn accepts(&self, _model: &str) -> Accepts {
        Accepts::ALL
    }

    /// A script ignores every generation option.
    fn map_options(&self, _request: &CompletionRequest, fields: OptionFields<'_>) -> OptionMap {
        let OptionFields {
            reasoning,
            cache,
            service_tier,
            verbosity,
            parallel_tool_calls,
            top_p,
            seed,
            stop,
        } = fields;
        let ignored = |set: bool| match set {
            true => Mapping::Omit("a scripted model ignores options"),
            false => Mapping::Nothing,
        };
        OptionMap {
            reasoning: ignored(reasoning.is_some()),
            cache: ignored(cache.is_some()),
            service_tier: ignored(service_tier.is_some()),
            verbosity: ignored(verbosity.is_some()),
            parallel_tool_calls: ignored(parallel_tool_calls.is_some()),
            top_p: ignored(top_p.is_some()),
            seed: ignored(seed.is_some()),
            stop: ignored(!stop.is_empty()),
        }
    }
}

impl Wire for ScriptWire {
    type Op = Completion;
    type Payload = CompletionRequest;
    type Frame = Turn;
    type Decoder<'id> = TurnDecoder;
    type Reassembler = TurnDocument;

    fn describe(&self) -> Descriptor<'_> {
        Descriptor::new("scripted").model("scripted").replay(self)
    }

    fn encode(
        &self,
        request: CompletionRequest,
        _mode: Mode,
    ) -> Result<CompletionRequest, EncodeError> {
        Ok(request)
    }

    fn decoder<'id>(&self) -> Self::Decoder<'id> {
        TurnDecoder
    }
}

/// Writes a scripted turn into rig's reply: one block, then the end.
#[derive(Debug, Default)]
pub struct TurnDecoder;

impl<'id> Decoder<'id, Completion, Turn> for TurnDecoder {
    type Event = Turn;

    fn classify(&self, frame: Turn) -> WireEvent<Turn> {
        WireEvent::Known(frame)
    }

    fn decode(&mut self, turn: Turn, mut out: Out<'id, Completion>) -> Result<Flow, ProviderError> {
        let reason = match turn {
            Turn::ToolCall { id, name, args } => {
                let name = ToolName::new(name)
                    .map_err(|e| ProviderError::Provider(format!("scripted call: {e}")))?;
                let index = out.fresh_index();
                let block = Block::Call {
                    id: CallId::from_wire(id),
                    name,
                };
                out.whole(index, block, Value::Null, &args.to_string())?;
                FinishReason::ToolCalls
            }
            Turn::Text(text) => {
                out.run(Block::Text, &text)?;
                out.end_run()?;
                FinishReason::Stop
            }
        };
        Ok(out.end(Finish {
            reason: Some(reason),
            ..Finish::default()
        }))
    }
}

/// The reply's document (rig keeps it as the response's `raw`): the turn.
#[derive(Debug, Default)]
pub struct TurnDocument(Value);

impl Reassemble<Turn> for TurnDocument {
    fn absorb(&mut self, frame: &Turn) {
        self.0 = serde_json::to_value(frame).unwrap_or(Value::Null);
    }

    fn finish(self) -> Value {
        self.0
    }
}

impl Serves<Completion> for TurnDocument {}

/// The transport: pops the next turn for each request, and keeps the
/// requests. Clones share the script.
#[derive(Clone, Default)]
pub struct Script {
    turns: Arc<Mutex<VecDeque<Turn>>>,
    requests: Arc<Mutex<Vec<CompletionRequest>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Script {
    /// A script of turns, played in order.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Script {
        Script {
            turns: Arc::new(Mutex::new(turns.into_iter().collect())),
            requests: Arc::default(),
        }
    }

    /// The model the agent talks to.
    pub fn model(&self) -> Model<ScriptWire, Script> {
        Model::new(ScriptWire, self.clone())
    }

    /// Every request the model received, in order.
    pub fn requests(&self) -> Vec<CompletionRequest> {
        lock(&self.requests).clone()
    }
}

impl Transport<ScriptWire> for Script {
    fn send(&self, request: CompletionRequest, _exchange: Exchange) -> Opening<Turn> {
        lock(&self.requests).push(request);
        match lock(&self.turns).pop_front() {
            Some(turn) => Opening::ready(Opened::new(futures::stream::iter([Ok(turn)]))),
            None => Opening::failed(ProviderError::Provider("the script is over".into())),
        }
    }
}

/// Runs a future to completion on this thread. rig's agent needs no
/// particular runtime: it only needs its futures polled.
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}
