//! Opening the session (`--store`) and running the proxy.

use super::*;

/// The number `N` of a call id the proxy made up (`mcp-N:ID`).
pub(super) fn call_number(id: &str) -> Option<u64> {
    let (n, _) = id.strip_prefix("mcp-")?.split_once(':')?;
    n.parse().ok()
}

/// Opens the log (`--store`, or one in memory) and recovers it.
pub(super) fn open_gateway(
    store: Option<&Path>,
    policy: CompiledPolicy,
    policy_path: &Path,
) -> Result<Gateway, Failed> {
    let log = match store {
        None => Log::open(Box::new(MemoryBackend::default())),
        Some(path) => match path.to_str() {
            Some(url) if agenra_store::is_postgres_url(url) => Log::open_pg(url),
            _ => Log::open_redb(path),
        },
    };
    let shown =
        || agenra_store::redact(&store.map(|p| p.display().to_string()).unwrap_or_default());
    let log = log.map_err(|e| fail(format!("mcp-proxy: --store {}: {e}", shown())))?;
    Gateway::open(log, policy, &policy_path.display().to_string(), false)
        .map_err(|e| fail(format!("mcp-proxy: --store {}: {e}", shown())))
}

/// Opens the proxy's session, or resumes it from the store: a call the
/// previous run left running (forwarded, no response recorded) is
/// reported `unknown` (it may have run: its units stay spent and its
/// output counts as read), and a call it left waiting for approval is
/// rejected (the request it would answer died with that run). Returns the
/// session's policy hash and the last call number used in it.
pub(super) fn resume(
    proxy: &Proxy,
    compiled: &CompiledPolicy,
    shown: &str,
) -> Result<(String, u64), Failed> {
    let view = proxy
        .gateway
        .create_session(
            Some(proxy.tenant.clone()),
            Some(proxy.session.clone()),
            None,
        )
        .and_then(Pending::wait)
        .map_err(|e| {
            fail(format!(
                "mcp-proxy: cannot open session `{}` of tenant `{}`: {}",
                proxy.session, proxy.tenant, e.error
            ))
        })?
        .0;
    let calls = proxy
        .calls()
        .map_err(|e| fail(format!("mcp-proxy: {}", e.error)))?;
    let last = calls
        .iter()
        .filter_map(|(id, _)| call_number(id))
        .max()
        .unwrap_or(0);
    if view.created {
        if !shown.is_empty() {
            log(&format!(
                "new session `{}` of tenant `{}` on store {shown}",
                proxy.session, proxy.tenant
            ));
        }
        return Ok((view.policy_hash, last));
    }
    let (mut unknown, mut rejected) = (0, 0);
    let mut open: Vec<&(String, Status)> = calls
        .iter()
        .filter(|(_, s)| matches!(s, Status::Running | Status::Paused))
        .collect();
    open.sort_by_key(|(id, _)| (call_number(id), id.clone()));
    for (call, status) in open {
        let settled = if *status == Status::Running {
            unknown += 1;
            proxy.report(call, Outcome::Unknown, Value::Null)
        } else {
            rejected += 1;
            proxy.resolve(
                call,
                &By::proxy("resumed: nobody was left to approve it"),
                false,
            )
        };
        settled.map_err(|e| {
            fail(format!(
                "mcp-proxy: resuming session `{}`: call {call}: {}",
                proxy.session, e.error
            ))
        })?;
    }
    log(&format!(
        "resumed session `{}` of tenant `{}` from store {shown} ({} events, {} calls); \
         {unknown} call(s) left running reported `unknown` (units stay spent), \
         {rejected} call(s) left waiting for approval rejected",
        proxy.session,
        proxy.tenant,
        view.events,
        calls.len()
    ));
    if view.policy_hash != compiled.hash().to_string() {
        log(&format!(
            "session `{}` keeps the policy it was opened with ({}); {} applies to new \
             sessions only (start one with --session NAME)",
            proxy.session,
            view.policy_hash,
            compiled.hash()
        ));
    }
    Ok((view.policy_hash, last))
}

/// Runs the proxy until the server exits; the exit code is the server's.
pub fn run(
    policy_path: &Path,
    server: &[String],
    pause: &PauseOptions,
    store: &StoreOptions,
    options: &ProxyOptions,
) -> Result<(), Failed> {
    let cancel_timeout = options.cancel_timeout.unwrap_or(DEFAULT_CANCEL_TIMEOUT);
    if cancel_timeout == 0 {
        return Err(fail(
            "mcp-proxy: --cancel-timeout must be at least 1 second",
        ));
    }
    let wait = pause
        .validate()
        .map_err(|e| fail(format!("mcp-proxy: {e}")))?;
    check_name("tenant", &store.tenant)
        .map_err(|e| fail(format!("mcp-proxy: --tenant: {}", e.error)))?;
    check_name("session", &store.session)
        .map_err(|e| fail(format!("mcp-proxy: --session: {}", e.error)))?;
    // The server: a command to start, or an HTTP endpoint (`--upstream`).
    let upstream = match &options.upstream {
        Some(_) if !server.is_empty() => {
            return Err(fail(format!(
                "mcp-proxy: {}",
                super::http_upstream::UpstreamError::Both
            )))
        }
        Some(url) => Some(
            super::http_upstream::Upstream::new(url)
                .map_err(|e| fail(format!("mcp-proxy: {e}")))?,
        ),
        None => None,
    };
    if upstream.is_none() && server.is_empty() {
        return Err(fail("mcp-proxy: no server command given (after `--`)"));
    }
    if options.listen.is_none() && options.http_token.is_some() {
        return Err(fail(
            "mcp-proxy: --http-token is only used with --listen (the HTTP transport)",
        ));
    }
    // Bound before anything starts, so that a bad address starts nothing.
    let listen = match &options.listen {
        Some(addr) => Some(
            super::http_listen::bind(addr, options.http_token.as_deref())
                .map_err(|e| fail(format!("mcp-proxy: {e}")))?,
        ),
        None => None,
    };
    let routes = listen
        .as_ref()
        .map(super::http_listen::routes)
        .transpose()?;
    let (policy, _) = load_policy(policy_path, false)?;
    let compiled =
        CompiledPolicy::new(policy).map_err(|e| fail(format!("{}: {e}", policy_path.display())))?;
    let gateway = open_gateway(store.store.as_deref(), compiled.clone(), policy_path)?;
    if let Some(w) = &wait {
        // An approval after the proxy's timeout is refused by the gateway.
        gateway.set_pause_timeout(w.timeout);
    }
    let shown = store
        .store
        .as_ref()
        .map(|p| agenra_store::redact(&p.display().to_string()))
        .unwrap_or_default();
    let mut proxy = Proxy {
        gateway,
        tenant: store.tenant.clone(),
        session: store.session.clone(),
        policy_hash: String::new(),
        state: Mutex::new(State {
            pending: HashMap::new(),
            waiting: HashMap::new(),
            waiting_keys: HashMap::new(),
            tasks: HashMap::new(),
            seq: 0,
        }),
        server_in: Mutex::new(None),
        wait: wait.as_ref().map(|w| w.timeout),
        cancel_timeout,
        timers: Timers::default(),
        callable: (!options.show_all_tools).then(|| callable_tools(compiled.policy())),
        child: ChildState::default(),
        client: match &routes {
            Some(routes) => ClientSide::Http(Arc::clone(routes)),
            None => ClientSide::Stdio,
        },
    };
    let (policy_hash, last) = resume(&proxy, &compiled, &shown)?;
    proxy.policy_hash = policy_hash;
    proxy.state.get_mut().unwrap_or_else(|e| e.into_inner()).seq = last;
    let proxy = Arc::new(proxy);
    let timers = Arc::clone(&proxy);
    std::thread::Builder::new()
        .name("agenra-mcp-timers".into())
        .spawn(move || run_timers(&timers))
        .map_err(|e| fail(format!("mcp-proxy: cannot start the timer thread: {e}")))?;
    // Listen before the server starts, so a bad address starts nothing.
    let desk = match &wait {
        Some(w) => {
            let desk: Arc<dyn ApprovalDesk> = Arc::clone(&proxy) as Arc<dyn ApprovalDesk>;
            let server = DeskServer::spawn(desk, Arc::clone(&w.perimeter), &w.listen)
                .map_err(|e| fail(format!("mcp-proxy: --approvals-listen: {e}")))?;
            log(&format!(
                "approvals on http://{} (tenant `{}`, session `{}`); \
                 a paused call waits at most {} s",
                server.addr(),
                proxy.tenant,
                proxy.session,
                w.timeout
            ));
            Some(server)
        }
        None => None,
    };
    let (mut child, from) = match upstream {
        Some((upstream, messages)) => {
            // No process to end: it counts as reaped.
            proxy.child.reaped.store(true, Ordering::SeqCst);
            *lock_in(&proxy) = Some(ServerIn::Http(super::http_upstream::UpstreamIn(upstream)));
            (None, From::Http(messages))
        }
        None => {
            let (program, args) = server
                .split_first()
                .ok_or_else(|| fail("mcp-proxy: no server command given (after `--`)"))?;
            let mut child = Command::new(program)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| fail(format!("mcp-proxy: cannot start `{program}`: {e}")))?;
            let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take())
            else {
                return Err(fail("mcp-proxy: the server's pipes are missing"));
            };
            *lock_in(&proxy) = Some(ServerIn::Child(server_in));
            proxy.child.pid.store(child.id(), Ordering::SeqCst);
            (Some(child), From::Child(server_out))
        }
    };
    watch_signals(&proxy)?;

    match (listen, &routes) {
        (Some(listen), Some(routes)) => {
            let addr = listen.addr;
            super::http_listen::serve(listen, &proxy, Arc::clone(routes))?;
            log(&format!(
                "MCP streamable HTTP on http://{addr}{} (one MCP session: the agent's)",
                super::http_listen::MCP_PATH
            ));
        }
        _ => {
            let client_proxy = Arc::clone(&proxy);
            std::thread::spawn(move || client_to_server(&client_proxy));
        }
    }

    let relay = |text: &[u8]| match from_server(&proxy, text) {
        Some(instead) => proxy.send_client(&instead),
        None => proxy.send_client(text),
    };
    match from {
        From::Child(server_out) => each_line(BufReader::new(server_out), "the server", |text| {
            relay(text);
            true
        }),
        // Until the client is gone and the last request to the server is
        // done.
        From::Http(messages) => {
            for message in messages {
                match message {
                    super::http_upstream::Upstreamed::Message(text) => relay(&text),
                    super::http_upstream::Upstreamed::Failed { id, why } => {
                        proxy.send_client(&super::http_upstream::unanswered(&proxy, &id, &why))
                    }
                }
            }
        }
    }
    // The server closed its output: the client's ends too (its reader sees
    // the end now, not when the server process is gone), and a server that
    // does not exit is ended (MCP's stdio shutdown: SIGTERM, then SIGKILL).
    match &proxy.client {
        ClientSide::Stdio => close_client_output(),
        ClientSide::Http(routes) => routes.close(),
    }
    let status = match child.as_mut() {
        Some(child) => Some(
            end_child(&proxy, child)
                .map_err(|e| fail(format!("mcp-proxy: waiting for the server: {e}")))?,
        ),
        None => None,
    };
    // The process exits now: approval requests in flight are cut rather
    // than waited for (an idle client connection could hold a graceful
    // shutdown open).
    std::mem::forget(desk);
    let signal = proxy.child.stopped_by.load(Ordering::SeqCst);
    if signal != 0 {
        return Err(Failed(u8::try_from(128 + signal).unwrap_or(1)));
    }
    match status.map_or(Some(0), |s| s.code()) {
        Some(0) => Ok(()),
        Some(code) => Err(Failed(u8::try_from(code).unwrap_or(1))),
        None => Err(Failed(1)),
    }
}

/// Where the server's messages come from.
enum From {
    /// The child's standard output, one message a line.
    Child(std::process::ChildStdout),
    /// `--upstream`: the answers to the proxy's requests.
    Http(std::sync::mpsc::Receiver<super::http_upstream::Upstreamed>),
}

pub(super) fn lock_in(proxy: &Proxy) -> MutexGuard<'_, Option<ServerIn>> {
    proxy.server_in.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads `reader` line by line until it ends (or fails: logged as a read
/// from `peer`), handing each non-blank line, without its line end, to
/// `each`; `each` answers false to stop early.
pub(super) fn each_line(mut reader: impl BufRead, peer: &str, mut each: impl FnMut(&[u8]) -> bool) {
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                log(&format!("cannot read from {peer}: {e}"));
                return;
            }
        }
        let text = trim_newline(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if !each(text) {
            return;
        }
    }
}

pub(super) fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Writes one line (with its newline) to the server; false when its input
/// is closed.
pub(super) fn to_server(proxy: &Proxy, line: &[u8]) -> bool {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    let mut server_in = lock_in(proxy);
    let written = match server_in.as_mut() {
        None => return false,
        Some(ServerIn::Child(w)) => w.write_all(&buf).and_then(|()| w.flush()).is_ok(),
        Some(ServerIn::Http(upstream)) => upstream.0.send(line),
    };
    if !written {
        *server_in = None;
        return false;
    }
    true
}
