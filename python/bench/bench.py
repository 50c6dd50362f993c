#!/usr/bin/env python3
"""`authorize` from Python on the standard workload of `agenra bench monitor`.

    python python/bench/bench.py --json [--samples N] [--runs R]

The standard workload (src/bench.rs): 10 tools of two parameters (`target`,
`n`), 50 grants, 20 flow rules, 10 path rules, a session that already holds
1,000 events, then random calls from the same fixed-seed generator. The
policy is built in the core model there; here it is the same policy written
in the policy language (`standard_policy()`), and the generator is ported
call for call (xorshift64*, seed 0x5eed).

Each timed call's arguments are built just before it (as an agent's loop
builds them); the timed region is `session.authorize(tool, args, id=...,
time=...)` alone: converting the arguments, deciding with the GIL released,
recording, and the returned `Decision`. Prints one JSON line with `p50_ns`,
`p99_ns` and `samples` (with `--runs R`, the median over R runs of each
figure; each run has a new session and replays the same calls).
"""

import argparse
import json
import os
import statistics
import sys
import time

try:
    import agenra
except ImportError:  # run from a checkout without installing: say how
    sys.exit("bench.py: the agenra package is not installed (pip install ./python)")

GRANTS, FLOW_RULES, PATH_RULES, TOOLS, SINKS = 50, 20, 10, 10, 4
PRELOADED_EVENTS = 1_000
LEVELS = ["public", "internal", "confidential", "secret"]
MASK = (1 << 64) - 1


class Rng:
    """xorshift64*, as src/bench.rs's `Rng`."""

    def __init__(self, seed):
        self.state = max(seed, 1)

    def next_u64(self):
        s = self.state
        s ^= s >> 12
        s ^= (s << 25) & MASK
        s ^= s >> 27
        self.state = s
        return (s * 0x2545F4914F6CDD1D) & MASK

    def below(self, n):
        return self.next_u64() % max(n, 1)


def standard_policy():
    """src/bench.rs `workload_policy()`, in the policy language."""
    out = ['policy "bench";', "levels public < internal < confidential < secret;"]
    out.append("categories " + ", ".join(f"cat{i}" for i in range(8)) + ";")
    out.append("sinks " + ", ".join(f"sink{i}" for i in range(SINKS)) + ";")
    out.append("sets found;")
    for t in range(TOOLS):
        body = ["resource target;"]
        if t >= 6:
            body.append(f"sink sink{t % SINKS};")
        else:
            trust = "trusted" if t % 2 == 0 else "untrusted"
            body.append(f"output <{LEVELS[t % 3]}, {{cat{t % 8}}}, {trust}>;")
        out.append(f"tool tool{t}.op(target: string, n: int) {{ {' '.join(body)} }}")
    out.append('resource glob "/secret/*" label <secret, {cat7}, trusted>;')
    for g in range(GRANTS):
        quota = "1000000" if g % 3 == 0 else "unlimited"
        out.append(
            f'grant g{g}: tool{g % TOOLS}.op on prefix "/data/{g % 5}/" where n <= {1000 + g} quota {quota};'
        )
    for r in range(FLOW_RULES):
        sink = f"sink{r % SINKS}"
        if r % 4 == 3:
            out.append(f"allow flow flow{r}: up to <internal, {{cat{r % 8}}}, untrusted> -> {sink} when n >= 0;")
        else:
            pat = f"sensitivity >= secret and category cat{(r + 5) % 8}"
            if r % 2 == 0:
                pat += " and untrusted"
            out.append(f"deny flow flow{r}: {pat} -> {sink} when n >= 0;")
    for r in range(PATH_RULES):
        if r % 2 == 0:
            out.append(
                f'deny path path{r}: call "tool{r % 6}.*" and reads(sensitivity >= secret) -> to sink{r % SINKS};'
            )
        else:
            out.append(f"deny count path{r}: at most 1000000 call tool{r % TOOLS}.op;")
    return "\n".join(out) + "\n"


def random_call(rng):
    """src/bench.rs `random_call`: (tool, args)."""
    tool = rng.below(TOOLS)
    if rng.below(8) == 0:
        target = f"/secret/{rng.below(100)}"
    else:
        a = rng.below(5)
        b = rng.below(1000)
        target = f"/data/{a}/{b}"
    n = rng.below(1_100)
    return f"tool{tool}.op", {"target": target, "n": n}


def preload(session, rng, n):
    """src/bench.rs `play`: calls, and a result for each ALLOWed call."""
    played = 0
    call_id = 0
    while played < n:
        tool, args = random_call(rng)
        cid = f"c{call_id}"
        d = session.authorize(tool, args, id=cid, time=call_id)
        call_id += 1
        played += 1
        if d.verdict == "ALLOW" and played < n:
            session.report(cid)
            played += 1
    return call_id


def run_once(policy, samples):
    session = policy.session()
    rng = Rng(0x5EED)
    next_id = preload(session, rng, PRELOADED_EVENTS)
    times = []
    verdicts = {"ALLOW": 0, "DENY": 0, "PAUSE": 0}
    authorize = session.authorize
    clock = time.perf_counter_ns
    for i in range(samples):
        tool, args = random_call(rng)
        cid = f"c{next_id + i}"
        t = next_id + i
        start = clock()
        d = authorize(tool, args, id=cid, time=t)
        elapsed = clock() - start
        times.append(elapsed)
        verdicts[d.verdict] += 1
    times.sort()

    def pct(p):
        return times[min(int(len(times) * p), len(times) - 1)]

    return {
        "p50_ns": pct(0.50),
        "p95_ns": pct(0.95),
        "p99_ns": pct(0.99),
        "mean_ns": sum(times) // len(times),
        "verdicts": verdicts,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=1, help="report the median of this many runs")
    opts = ap.parse_args()
    if opts.samples < 1 or opts.runs < 1:
        ap.error("--samples and --runs must be at least 1")
    policy = agenra.compile_policy(standard_policy(), name="bench", filename="standard.agr")
    runs = [run_once(policy, opts.samples) for _ in range(opts.runs)]
    report = {
        key: int(statistics.median(r[key] for r in runs)) for key in ["p50_ns", "p95_ns", "p99_ns", "mean_ns"]
    }
    report.update(
        {
            "samples": opts.samples,
            "runs": opts.runs,
            "runs_p50_ns": [r["p50_ns"] for r in runs],
            "verdicts": runs[0]["verdicts"],
            "workload": "standard",
            "grants": GRANTS,
            "flow_rules": FLOW_RULES,
            "path_rules": PATH_RULES,
            "preloaded_events": PRELOADED_EVENTS,
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
        }
    )
    if opts.json:
        print(json.dumps(report))
    else:
        print(
            f"authorize from Python, standard workload: p50 {report['p50_ns'] / 1000:.2f} µs,"
            f" p99 {report['p99_ns'] / 1000:.2f} µs ({opts.samples} samples, median of {opts.runs} runs;"
            f" verdicts {report['verdicts']})"
        )


if __name__ == "__main__":
    main()
