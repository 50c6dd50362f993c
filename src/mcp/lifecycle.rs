//! The client's side and the proxy's end: stdin EOF, signals, and the
//! server process ended with the proxy (MCP's stdio shutdown).

use super::*;

/// Reads the client until it closes its side, then closes the server's
/// input (which asks a well-behaved MCP server to exit) and rejects the
/// calls still waiting for approval (nobody is left to answer).
pub(super) fn client_to_server(proxy: &Arc<Proxy>) {
    each_line(std::io::stdin().lock(), "the client", |text| {
        let forward = match from_client(proxy, text) {
            Action::Answer(answer) => {
                proxy.send_client(answer.as_bytes());
                return true;
            }
            Action::Drop => return true,
            Action::Forward => Cow::Borrowed(text),
            Action::ForwardParsed(line) => Cow::Owned(line),
        };
        if !to_server(proxy, &forward) {
            log("cannot write to the server (its input is closed)");
            return false;
        }
        true
    });
    // Dropping the server's input closes it.
    drop(lock_in(proxy).take());
    reject_waiting(proxy);
    // MCP's stdio shutdown: a server that does not exit once its input
    // closed is sent SIGTERM, then SIGKILL.
    stop_child(proxy, "the client closed its input");
}

/// Rejects the calls still waiting for approval (nobody is left to answer).
pub(super) fn reject_waiting(proxy: &Proxy) {
    let waiting: Vec<String> = lock(&proxy.state).waiting.keys().cloned().collect();
    for call in waiting {
        let by = By::proxy("the client is gone");
        let _ = settle(proxy, &call, Settle::Reject(Why::ClientGone), &by);
    }
}

/// How long the server gets to exit after its input closed, and after
/// SIGTERM.
pub(super) const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The server process: its pid, and whether it was reaped (after which the
/// pid may belong to another process and is never signalled).
#[derive(Default)]
pub(super) struct ChildState {
    pub(super) pid: AtomicU32,
    pub(super) reaped: AtomicBool,
    /// The signal that stopped the proxy (0: none): its exit code is then
    /// 128 + it, whatever the server's.
    pub(super) stopped_by: AtomicI32,
}

/// Sends `signal` to the server unless it was reaped.
pub(super) fn signal_child(child: &ChildState, signal: libc::c_int) {
    let pid = child.pid.load(Ordering::SeqCst);
    if pid == 0 || child.reaped.load(Ordering::SeqCst) {
        return;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) on the pid of our own child, not reaped yet (so the
    // pid is still its); no memory is shared.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Waits up to `grace` for the server to be reaped.
pub(super) fn reaped_within(child: &ChildState, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if child.reaped.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.reaped.load(Ordering::SeqCst)
}

/// Ends the server if it does not exit by itself: waits `EXIT_GRACE`,
/// sends SIGTERM, waits again, sends SIGKILL (MCP's stdio shutdown).
pub(super) fn stop_child(proxy: &Proxy, why: &str) {
    if reaped_within(&proxy.child, EXIT_GRACE) {
        return;
    }
    log(&format!(
        "{why}, and the server has not exited: sending it SIGTERM"
    ));
    signal_child(&proxy.child, libc::SIGTERM);
    if reaped_within(&proxy.child, EXIT_GRACE) {
        return;
    }
    log("the server has not exited after SIGTERM: sending it SIGKILL");
    signal_child(&proxy.child, libc::SIGKILL);
}

/// Waits for the server once its output closed: SIGTERM after
/// `EXIT_GRACE`, SIGKILL after another; marks it reaped.
pub(super) fn end_child(
    proxy: &Proxy,
    child: &mut std::process::Child,
) -> std::io::Result<std::process::ExitStatus> {
    let mut signalled = 0;
    let mut deadline = Instant::now() + EXIT_GRACE;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            match signalled {
                0 => {
                    log("the server closed its output but has not exited: sending it SIGTERM");
                    signal_child(&proxy.child, libc::SIGTERM);
                }
                1 => {
                    log("the server has not exited after SIGTERM: sending it SIGKILL");
                    signal_child(&proxy.child, libc::SIGKILL);
                }
                _ => break child.wait()?,
            }
            signalled += 1;
            deadline = Instant::now() + EXIT_GRACE;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    proxy.child.reaped.store(true, Ordering::SeqCst);
    Ok(status)
}

/// Closes the client's end of the proxy's standard output: file
/// descriptor 1 is pointed at /dev/null (so it is never reused for another
/// file), which closes the pipe the client reads.
pub(super) fn close_client_output() {
    let _ = std::io::stdout().lock().flush();
    // SAFETY: open/dup2/close on file descriptors this process owns; the
    // path is a NUL-terminated literal.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null >= 0 {
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
}

/// On SIGTERM, SIGINT or SIGHUP the proxy stops as a client closing its
/// input would have it (waiting calls rejected, the server's input
/// closed), ends the server (SIGTERM, then SIGKILL) and exits with 128 +
/// the signal's number.
pub(super) fn watch_signals(proxy: &Arc<Proxy>) -> Result<(), Failed> {
    let proxy = Arc::clone(proxy);
    on_signal(move |name, number| {
        log(&format!("{name}: stopping, and ending the server"));
        proxy.child.stopped_by.store(number, Ordering::SeqCst);
        drop(lock_in(&proxy).take());
        reject_waiting(&proxy);
        signal_child(&proxy.child, libc::SIGTERM);
        if !reaped_within(&proxy.child, EXIT_GRACE) {
            signal_child(&proxy.child, libc::SIGKILL);
            reaped_within(&proxy.child, EXIT_GRACE);
        }
        std::process::exit(128 + number);
    })
}

/// Runs `stop` (with the signal's name and number) on a thread of its own
/// when the proxy gets SIGTERM, SIGINT or SIGHUP; `stop` ends the process.
pub(super) fn on_signal(
    stop: impl FnOnce(&'static str, libc::c_int) + Send + 'static,
) -> Result<(), Failed> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(format!("mcp-proxy: cannot watch signals: {e}")))?;
    let (mut term, mut int, mut hup) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
                signal(SignalKind::hangup())?,
            ))
        })
        .map_err(|e| fail(format!("mcp-proxy: cannot watch signals: {e}")))?;
    std::thread::Builder::new()
        .name("agenra-mcp-signals".into())
        .spawn(move || {
            let (name, number) = runtime.block_on(async {
                tokio::select! {
                    _ = term.recv() => ("SIGTERM", libc::SIGTERM),
                    _ = int.recv() => ("SIGINT", libc::SIGINT),
                    _ = hup.recv() => ("SIGHUP", libc::SIGHUP),
                }
            });
            stop(name, number);
        })
        .map_err(|e| fail(format!("mcp-proxy: cannot watch signals: {e}")))?;
    Ok(())
}
