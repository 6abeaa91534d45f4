"""C++ compile time with and without the precompiled bits/stdc++.h, through the real sandbox, per backend.

Typical competitive-programming sources (each includes bits/stdc++.h, as most Codeforces submissions do) are compiled
as the service compiles them: a compile job in a sandbox of an executor (`g++ -O2 -std=gnu++17 -DONLINE_JUDGE -pipe`
under the compile limits, runner/native.py), timed on the host from sending the job to holding the binary. Each
compile runs once with the .gch (`-I /opt/sandbox/pch`, as every program gets it) and once without (the job's
`"pch": false`: the real header, read in full), interleaved source by source and round by round, the order of the two
alternating, so that load changes on the machine hit both alike. Every source gets a comment of its own per compile
(nothing is answered from a cache; compile jobs do not go through the executor's binary cache anyway). One sandbox
per backend (pool_size=1): one compile at a time.

It prints the command, the machine (CPUs, Python, platform, g++, load average before and after), whether each
backend's sandbox uses the .gch (the executor's own check: /readyz's sandbox.cpp_pch), and per backend and source
the p50 and p90 in ms with and without, and the ratio of the p50s.

    .venv/bin/python bench/cpp_compile.py [--backends local docker] [--rounds 10] [--image TAG] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from machine import load_average

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox import SandboxConfig, StdioTest, create_executor  # noqa: E402
from sandbox.api import CPP_FLAGS  # noqa: E402
from sandbox.executor import PooledExecutor, _facts  # noqa: E402

BENCH_IMAGE = "verifier-sandbox:bench"  # built from this checkout; verifier-sandbox:latest may be stale
CHECK_TIMEOUT_S = 180.0  # for the executor's own check of the .gch (the local one may build it first)

HEAD = "#include <bits/stdc++.h>\nusing namespace std;\ntypedef long long ll;\n"
SOURCES = {
    "a-plus-b": HEAD + "int main() { ios::sync_with_stdio(false); cin.tie(nullptr); ll a, b; cin >> a >> b;"
    " cout << a + b << '\\n'; }\n",
    "dijkstra": HEAD
    + """
int main() {
    int n, m; cin >> n >> m;
    vector<vector<pair<int, ll>>> g(n);
    for (int i = 0; i < m; i++) { int u, v; ll w; cin >> u >> v >> w; g[u].push_back({v, w}); g[v].push_back({u, w}); }
    vector<ll> dist(n, LLONG_MAX); dist[0] = 0;
    priority_queue<pair<ll, int>, vector<pair<ll, int>>, greater<>> pq; pq.push({0, 0});
    while (!pq.empty()) {
        auto [d, u] = pq.top(); pq.pop();
        if (d > dist[u]) continue;
        for (auto [v, w] : g[u]) if (d + w < dist[v]) { dist[v] = d + w; pq.push({dist[v], v}); }
    }
    for (ll d : dist) cout << (d == LLONG_MAX ? -1 : d) << ' ';
    cout << endl;
}
""",
    "dp-strings": HEAD
    + """
const ll MOD = 1e9 + 7;
int main() {
    string s; cin >> s;
    unordered_map<char, int> last; map<string, int> seen; set<int> lens;
    vector<ll> dp(s.size() + 1, 0); dp[0] = 1;
    for (size_t i = 1; i <= s.size(); i++) {
        dp[i] = 2 * dp[i - 1] % MOD;
        if (last.count(s[i - 1])) dp[i] = (dp[i] - dp[last[s[i - 1]] - 1] + MOD) % MOD;
        last[s[i - 1]] = i; seen[s.substr(0, i)]++; lens.insert(i);
    }
    stringstream out; out << (dp[s.size()] - 1 + MOD) % MOD << ' ' << seen.size() << ' ' << *lens.rbegin();
    cout << out.str() << endl;
}
""",
    "segment-tree": HEAD
    + """
template <class T, class F> struct Seg {
    int n; vector<T> t; F f; T e;
    Seg(int n, F f, T e) : n(n), t(2 * n, e), f(f), e(e) {}
    void set(int i, T v) { for (t[i += n] = v; i > 1; i >>= 1) t[i >> 1] = f(t[i], t[i ^ 1]); }
    T query(int l, int r) { T a = e, b = e; for (l += n, r += n; l < r; l >>= 1, r >>= 1) {
        if (l & 1) a = f(a, t[l++]); if (r & 1) b = f(t[--r], b); } return f(a, b); }
};
int main() {
    int n, q; cin >> n >> q;
    auto mx = [](ll a, ll b) { return max(a, b); };
    Seg<ll, decltype(mx)> seg(n, mx, LLONG_MIN);
    for (int i = 0; i < n; i++) { ll x; cin >> x; seg.set(i, x); }
    while (q--) { int t, a, b; cin >> t >> a >> b; if (t == 1) seg.set(a, b); else cout << seg.query(a, b) << '\\n'; }
    bitset<64> bits(n); tuple<int, int> tp{n, q}; cout << bits.count() + get<0>(tp) << endl;
}
""",
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def compile_once(executor: PooledExecutor, source: str, pch: bool) -> tuple[float, bool]:
    """(seconds, whether a binary came back) for one compile job in the executor's sandbox."""
    spec = {"kind": "compile", "flags": list(CPP_FLAGS), "files": {}, "pch": pch}
    started = time.perf_counter()
    facts = await executor._collect_part(
        source, (StdioTest("", ""),), [spec], [0], executor.config.compile_limits, _facts
    )
    seconds = time.perf_counter() - started
    assert not isinstance(facts, str)
    return seconds, isinstance(facts[0].get("binary_b64"), str)


async def pch_check(executor: PooledExecutor) -> bool | None:
    """The executor's own verdict on the .gch (sandbox.cpp_pch), once its check has run."""
    deadline = time.monotonic() + CHECK_TIMEOUT_S
    while executor.cpp_pch is None and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return executor.cpp_pch


async def bench_backend(backend: str, image: str | None, rounds: int, sources: dict[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {"pool_size": 1}
    if backend == "docker":
        config |= {"image": image, "pool_name": f"bench-cpp-{os.getpid()}"}
    executor = create_executor(backend, SandboxConfig(**config))
    assert isinstance(executor, PooledExecutor)
    await executor.start()
    try:
        status = executor.status()
        if not status["ready"]:
            return {"error": f"the {backend} sandbox did not start: {status.get('last_error')}"}
        pch_used = await pch_check(executor)
        times: dict[str, dict[str, list[float]]] = {name: {"with": [], "without": []} for name in sources}
        failed = {"with": 0, "without": 0}  # no binary: a compile past its limits (a loaded machine's wall clock)
        for r in range(rounds):
            for i, (name, source) in enumerate(sources.items()):
                order = (True, False) if (r + i) % 2 == 0 else (False, True)
                for pch in order:
                    unique = f"{source}// round {r}, {'with' if pch else 'without'}, {time.time_ns()}\n"
                    seconds, ok = await compile_once(executor, unique, pch)
                    failed["with" if pch else "without"] += not ok
                    times[name]["with" if pch else "without"].append(seconds)
        return {
            "isolation": status.get("isolation", "container"),
            "cpp": executor.cpp,
            "pch_used": pch_used,
            "failed_compiles": failed,
            "sources": {name: summary(row) for name, row in times.items()},
            "all": summary({mode: [s for row in times.values() for s in row[mode]] for mode in ("with", "without")}),
        }
    finally:
        await executor.close()


def summary(row: dict[str, list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode, seconds in row.items():
        ms = [1000 * s for s in seconds]
        out[mode] = {
            "n": len(ms),
            "p50_ms": percentile(ms, 0.5),
            "p90_ms": percentile(ms, 0.9),
            "mean_ms": statistics.fmean(ms),
        }
    out["p50_ratio"] = out["without"]["p50_ms"] / out["with"]["p50_ms"]
    return out


def machine() -> dict[str, Any]:
    try:
        gxx = subprocess.run(["g++", "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        gxx = "none"
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "host_gxx": gxx}  # fmt: skip


def docker_image(args: argparse.Namespace) -> str | None:
    if args.image:
        return str(args.image)
    from tests.images.build import base_image, docker_unavailable_reason, ensure_sandbox_image  # dev-only helpers

    if docker_unavailable_reason() is not None:
        return None
    return ensure_sandbox_image(base_image(), tag=BENCH_IMAGE)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sources = dict(list(SOURCES.items())[: args.sources])
    report: dict[str, Any] = {"machine": machine(), "flags": list(CPP_FLAGS), "rounds": args.rounds, "backends": {}}
    report["image"] = docker_image(args) if "docker" in args.backends else None
    for backend in args.backends:
        if backend == "docker" and report["image"] is None:
            report["backends"][backend] = {"error": "no Docker engine here"}
            continue
        report["backends"][backend] = await bench_backend(backend, report["image"], args.rounds, sources)
    return report


def print_report(report: dict[str, Any]) -> None:
    m = report["machine"]
    print(f"machine: {m['cpus']} CPUs, Python {m['python']}, {m['platform']}, host g++: {m['host_gxx']}")
    print(f"flags: {' '.join(report['flags'])}; {report['rounds']} rounds, each source with and without, interleaved")
    if report["image"]:
        print(f"docker sandbox image: {report['image']}")
    for backend, row in report["backends"].items():
        if "error" in row:
            print(f"\n{backend}: skipped: {row['error']}")
            continue
        failed = row["failed_compiles"]
        print(f"\n{backend} ({row['isolation']}): the sandbox uses the .gch: {row['pch_used']}; compiles with no "
              f"binary (past a limit), with / without: {failed['with']} / {failed['without']}")  # fmt: skip
        print(f"{'source':<16} {'with p50':>9} {'p90':>7} {'without p50':>12} {'p90':>7} {'ratio':>6}  (ms)")
        for name, s in [*row["sources"].items(), ("all", row["all"])]:
            w, wo = s["with"], s["without"]
            print(f"{name:<16} {w['p50_ms']:>9.0f} {w['p90_ms']:>7.0f} {wo['p50_ms']:>12.0f} {wo['p90_ms']:>7.0f}"
                  f" {s['p50_ratio']:>5.1f}x")  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backends", nargs="+", choices=("local", "docker"), default=["local", "docker"])
    parser.add_argument("--image", help=f"docker: the sandbox image (default: build {BENCH_IMAGE} from this checkout)")
    parser.add_argument("--rounds", type=int, default=10, help="compiles per source and mode")
    parser.add_argument("--sources", type=int, default=len(SOURCES), help=f"how many of the {len(SOURCES)} sources")
    parser.add_argument("--smoke", action="store_true", help="2 rounds of 2 sources: the test's quick run")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.sources = 2, 2
    return args


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    args = parse_args(argv)
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    load_before = load_average()
    print(f"command: {command}")
    print(f"load average (1, 5, 15 min) before: {load_before}")
    report = asyncio.run(run(args))
    report |= {"command": command, "load_average": {"before": load_before, "after": load_average()}}
    print_report(report)
    after = report["load_average"]["after"]
    print(f"\nload average (1, 5, 15 min) before: {load_before}, after: {after} (this run too)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
