#!/usr/bin/env python3
"""Replay the exported AgentDojo traces through `agenra monitor`.

One `agenra monitor` process per suite. Every trace (benign task or attack
pair) is replayed twice, each time in its own session: once where a human
rejects every PAUSE and once where a human approves it (the approval is a
re-authorization: it may still answer DENY). The events are:

* a `task` event with the user's request, verbatim;
* per ground-truth call, a `call` event with the tool and its arguments (the
  call's origin, user or injection, is never sent);
* when the call is admitted (ALLOW, or PAUSE then approved), a `result`
  event: `succeeded` with the output, or `failed` when agentdojo's runtime
  reported an error. A denied or rejected call's result is not fed, and the
  replay goes on with the next ground-truth call.

Outputs are reported as adapter.json says: for most tools the ids, addresses,
times and amounts are the tool's own result, and the free text a third party
may have written (bodies, subjects, descriptions, contents, reviews, web
pages) comes from a separate `third_party_text` call, untrusted in every
policy.

Writes out/results/<suite>.jsonl (one record per trace and mode: each call's
decision) and out/events/<suite>.jsonl (the monitor's own --trace-out, for
`agenra replay` / `agenra explain`).

Usage: drive.py [--suite S ...] [--benign-only] (AGENRA_BIN names the agenra binary)

--benign-only replays the benign user tasks alone: what a policy writer may
look at while writing (the attack traces are not read).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SUITES = ["workspace", "travel", "banking", "slack"]
MODES = ["reject", "approve"]


def agenra_bin():
    path = os.environ.get("AGENRA_BIN")
    if path:
        return path
    subprocess.run(["cargo", "build", "--release", "--bin", "agenra"], cwd=REPO, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    return os.path.join(target, "release", "agenra")


class Monitor:
    def __init__(self, binary, policy, trace_out):
        if os.path.exists(trace_out):
            os.remove(trace_out)
        self.proc = subprocess.Popen(
            [binary, "monitor", "--policy", policy, "--trace-out", trace_out],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self.latencies_ns = []
        self.by_kind = {}
        self.errors = []

    def send(self, event):
        line = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        t0 = time.perf_counter_ns()
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        elapsed = time.perf_counter_ns() - t0
        self.latencies_ns.append(elapsed)
        self.by_kind.setdefault(event["kind"], []).append(elapsed)
        if not answer:
            raise RuntimeError(f"agenra monitor exited while answering {line}")
        rec = json.loads(answer)
        if "error" in rec:
            self.errors.append({"event": event, "error": rec["error"]})
        return rec

    def close(self):
        self.proc.stdin.close()
        rc = self.proc.wait()
        if rc != 0:
            raise RuntimeError(f"agenra monitor exited with {rc}")


def _lat_stats(values):
    v = sorted(values)
    return {"events": len(v), "mean_us": round(sum(v) / len(v) / 1000, 1),
            "p50_us": round(v[len(v) // 2] / 1000, 1), "p99_us": round(v[min(len(v) - 1, int(len(v) * 0.99))] / 1000, 1)}


def _plain(value):
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def split_output(tool, text, spec):
    """(own result, third-party text or None) for a tool's formatted output."""
    if tool in spec["whole_text"]:
        return None, text
    trusted_whole = tool in spec["whole_trusted"]
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        # Not structured: a trusted tool's text is its own, any other's is
        # third-party text.
        return (text, None) if trusted_whole else (None, text)
    if not isinstance(data, (dict, list)):
        return (text if trusted_whole else _plain(data)), None
    texts = []
    text_fields = set() if trusted_whole else set(spec["text_fields"])
    keyed = set(spec["keyed_fields"])

    def walk(obj):
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if k in text_fields:
                    if v not in (None, ""):
                        texts.append(str(v))
                elif k in keyed and isinstance(v, dict):
                    out[k] = [{"key": kk, "value": walk(vv)} for kk, vv in v.items()]
                else:
                    out[k] = walk(v)
            return out
        if isinstance(obj, list):
            return [walk(x) for x in obj]
        if isinstance(obj, str) and looks_like_text(obj):
            # A name or id never spans lines nor runs long: such a value in a
            # recorded field (a channel named with a paragraph) is text
            # someone wrote, and is reported as such.
            texts.append(obj)
            return "(text)"
        return obj

    own = _plain(walk(data))
    return own, ("\n".join(texts) if texts else None)


MAX_NAME_LEN = 64


def looks_like_text(value):
    return "\n" in value or len(value) > MAX_NAME_LEN


def convert_args(args):
    out = {}
    for k, v in args.items():
        if v is None:
            continue  # an absent optional argument
        if k == "attachments" and isinstance(v, list):
            # agenra has no object type: an attachment is named by its file id.
            v = [a.get("file_id") or a.get("event_details", {}).get("id_") or json.dumps(a, sort_keys=True)
                 if isinstance(a, dict) else str(a) for a in v]
        out[k] = v
    return out


def replay(mon, trace, mode, spec, session, scope_tools=None):
    clock = [0]

    def tick():
        clock[0] += 1
        return clock[0]

    task = {"kind": "task", "id": "task", "session": session, "time": tick(), "text": trace["prompt"]}
    if scope_tools is not None:
        task["scope"] = {"tools": scope_tools}
    mon.send(task)
    decisions = []
    text_calls = 0
    for i, call in enumerate(trace["calls"]):
        cid = f"c{i + 1}"
        rec = mon.send({
            "kind": "call", "id": cid, "session": session, "time": tick(),
            "tool": call["function"], "args": convert_args(call["args"]),
        })
        d = {"i": i, "function": call["function"], "origin": call["origin"],
             "decision": rec.get("decision"), "rule": rec.get("rule"), "error": rec.get("error")}
        admitted = rec.get("decision") == "ALLOW"
        if rec.get("decision") == "PAUSE":
            if mode == "reject":
                mon.send({"kind": "reject", "call": cid, "session": session, "time": tick()})
            else:
                ap = mon.send({"kind": "approve", "call": cid, "session": session, "time": tick()})
                d["approval"] = ap.get("decision")
                d["approval_rule"] = ap.get("rule")
                admitted = ap.get("decision") == "ALLOW"
        d["admitted"] = admitted
        decisions.append(d)
        if not admitted:
            continue
        if call["error"]:
            mon.send({"kind": "result", "call": cid, "session": session, "time": tick(), "status": "failed"})
            continue
        own, text = split_output(call["function"], call["output"], spec)
        result = {"kind": "result", "call": cid, "session": session, "time": tick(), "status": "succeeded"}
        if own not in (None, ""):
            result["output"] = own
        mon.send(result)
        if text:
            text_calls += 1
            tid = f"{cid}.text"
            r = mon.send({"kind": "call", "id": tid, "session": session, "time": tick(),
                          "tool": "third_party_text", "args": {"source": call["function"]}})
            if r.get("decision") != "ALLOW":
                raise RuntimeError(f"third_party_text not allowed in {session}: {r}")
            mon.send({"kind": "result", "call": tid, "session": session, "time": tick(),
                      "status": "succeeded", "output": text})
    return decisions, text_calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", action="append", choices=SUITES)
    ap.add_argument("--traces", default=os.path.join(HERE, "out", "traces"))
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    ap.add_argument("--oracle-scope", action="store_true",
                    help="an upper bound, not the benchmark: each task event carries a scope listing the tools"
                         " the user task's own ground truth uses (what a perfect planner would open)")
    ap.add_argument("--policies", default=os.path.join(HERE, "policies"),
                    help="the directory of <suite>.agr policies (default: policies/)")
    ap.add_argument("--benign-only", action="store_true",
                    help="replay only the benign user tasks (for writing policies without seeing the attacks)")
    opts = ap.parse_args()
    binary = agenra_bin()
    with open(os.path.join(HERE, "adapter.json")) as f:
        adapter = json.load(f)
    os.makedirs(os.path.join(opts.out, "results"), exist_ok=True)
    os.makedirs(os.path.join(opts.out, "events"), exist_ok=True)
    for suite in opts.suite or SUITES:
        spec = adapter[suite]
        policy = os.path.join(opts.policies, f"{suite}.agr")
        mon = Monitor(binary, policy, os.path.join(opts.out, "events", f"{suite}.jsonl"))
        t0 = time.perf_counter()
        n_traces = 0
        scopes = {}
        if opts.oracle_scope:
            with open(os.path.join(opts.traces, f"{suite}.benign.jsonl"), encoding="utf-8") as f:
                for line in f:
                    t = json.loads(line)
                    scopes[t["user_task"]] = sorted({c["function"] for c in t["calls"]} | {"third_party_text"})
        with open(os.path.join(opts.out, "results", f"{suite}.jsonl"), "w") as out:
            for kind in ["benign"] if opts.benign_only else ["benign", "attack"]:
                with open(os.path.join(opts.traces, f"{suite}.{kind}.jsonl"), encoding="utf-8") as f:
                    for line in f:
                        trace = json.loads(line)
                        for mode in MODES:
                            session = f"{trace['user_task']}/{trace['injection_task'] or 'benign'}/{mode}"
                            decisions, text_calls = replay(mon, trace, mode, spec, session,
                                                           scopes.get(trace["user_task"]))
                            out.write(json.dumps({
                                "suite": suite, "kind": kind, "mode": mode,
                                "user_task": trace["user_task"], "injection_task": trace["injection_task"],
                                "decisions": decisions, "text_calls": text_calls,
                            }) + "\n")
                            n_traces += 1
        mon.close()
        lat = sorted(mon.latencies_ns)
        stats = {
            "suite": suite, "traces_replayed": n_traces, "events": len(lat),
            "wall_seconds": round(time.perf_counter() - t0, 3),
            "mean_us": round(sum(lat) / len(lat) / 1000, 1),
            "p50_us": round(lat[len(lat) // 2] / 1000, 1),
            "p99_us": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1000, 1),
            "by_kind": {k: _lat_stats(v) for k, v in sorted(mon.by_kind.items())},
            "monitor_errors": mon.errors[:20], "monitor_error_count": len(mon.errors),
        }
        with open(os.path.join(opts.out, "results", f"{suite}.timing.json"), "w") as f:
            json.dump(stats, f, indent=1)
        print(f"{suite}: {n_traces} replays, {len(lat)} events, {stats['wall_seconds']} s,"
              f" {len(mon.errors)} monitor errors", file=sys.stderr)
        for e in mon.errors[:5]:
            print("  error:", e, file=sys.stderr)


if __name__ == "__main__":
    main()
