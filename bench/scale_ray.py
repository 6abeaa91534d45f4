"""The verifier on a two-node Ray cluster on this machine: correct rewards from both nodes, the Serve proxy's cost
per request, and batched throughput on two nodes against one.

    make ray && .venv-ray/bin/python bench/scale_ray.py          # about 3 minutes; run it on a quiet machine
    .venv-ray/bin/python bench/scale_ray.py --quick              # about a minute: what tests/ray/test_cluster.py runs

Two `ray start` nodes on distinct loopback addresses, 127.0.0.2 (head) and 127.0.0.3 (Ray rewrites 127.0.0.1 to the
host's address), each with one CPU and pinned to a core of its own with taskset (where there are two), under a Ray
auth token of this run's own. The verifier is deployed as the shipped Serve application (`build_app`): one replica
per node, each with one math worker and one bubblewrap sandbox on its node, listening on its node's address as well
as behind Serve's proxy (HeadOnly, on 127.0.0.1). Then, in one run:

1. Correctness: `--batches` batches (math, format, code, and a program that lists its network interfaces) sent
   8 at a time through the proxy; every reward must be the expected one, and both nodes must serve a share (counted
   from each replica's own /metrics).
2. Per-request cost: one-item math requests (a plain number: no worker, no sandbox), sequential, through the proxy
   and at a node's own address; then 16 at a time (the proxy, or both nodes' addresses in turn).
3. Scale-out: `--rounds` rounds, each timing the same kind of work (fresh items, math cache off) on one node (the
   worker node, 127.0.0.3, through its own address) and on both (both addresses, spread by the trainer client), in
   alternating order; the median of the rounds' ratios (target: at least 1.6x). Other work on the machine skews it:
   run it when the machine is quiet (it prints the load average every round).

It stops only what it started: Serve, then every process whose command line holds this run's temp dir (Ray's
daemons) and their descendants; then it checks that no sandbox process of its replicas' uids is left.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from machine import free_port, load_average

from trainer_client import ClientConfig, VerifierClient
from verifier_service.schema import ScoreItem

ROOT = Path(__file__).resolve().parents[1]
HEAD, WORKER = "127.0.0.2", "127.0.0.3"
NODES = (HEAD, WORKER)
SETTINGS = {  # the service's settings, read by every replica (build_app passes the driver's VERIFIER_* on)
    "VERIFIER_SANDBOX_BACKEND": "local",
    "VERIFIER_SANDBOX__REQUIRE_ISOLATION": "true",
    "VERIFIER_MATH_CACHE_SIZE": "0",
    "VERIFIER_LOG_LEVEL": "warning",
}
INTERFACES = "import socket\nprint(sorted(name for _, name in socket.if_nameindex()))\n"
ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
SUBTRACT = "a, b = map(int, input().split())\nprint(a - b)\n"


class BenchError(SystemExit):
    """A check failed: the message says which; the exit status is 1."""

    def __init__(self, message: str) -> None:
        super().__init__(f"FAILED: {message}")


# -- the cluster ------------------------------------------------------------------------------------------------


@dataclass
class Cluster:
    temp_dir: Path
    address: str
    pinned: bool


@contextmanager
def ray_cluster(temp_dir: Path, pin: bool) -> Iterator[Cluster]:
    """Two Ray nodes on HEAD and WORKER, one CPU each; everything they started is stopped on the way out."""
    token = temp_dir / "token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    ray_env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    # Serve gives a starting proxy 5 s to answer its ready check, then kills it and serve.start fails: on one busy
    # core (the test suite's other work, load average 5) a proxy needed longer. Give it a minute, and its health checks
    # 30 s.
    ray_env |= {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60", "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "30"}
    os.environ.update(ray_env)  # this process is the driver: before ray is imported (it reads them at import)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    port = free_port()
    ray = str(Path(sys.executable).parent / "ray")
    common = ["--num-cpus=1", "--object-store-memory=200000000", "--disable-usage-stats"]
    head = [ray, "start", "--head", f"--node-ip-address={HEAD}", f"--port={port}", "--include-dashboard=false"]
    head += [f"--temp-dir={temp_dir / 'ray'}", *common]
    worker = [ray, "start", f"--address={HEAD}:{port}", f"--node-ip-address={WORKER}", *common]
    try:
        started = time.monotonic()
        for core, argv in enumerate((head, worker)):
            pinning = ["taskset", "-c", str(core)] if pin else []
            done = subprocess.run(pinning + argv, env=env, capture_output=True, text=True, timeout=180)
            if done.returncode != 0:
                raise BenchError(f"ray start failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        pinning = "pinned to cores 0 and 1" if pin else "not pinned"
        print(f"two Ray nodes up in {time.monotonic() - started:.0f}s ({pinning})")
        yield Cluster(temp_dir, f"{HEAD}:{port}", pin)
    finally:
        stopped = stop_processes(str(temp_dir))
        print(f"stopped {stopped} processes of this run's Ray cluster")


def proc_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def read_proc(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    stat = read_proc(pid, "stat")
    return bool(stat) and stat.rsplit(")", 1)[-1].split()[0] != "Z"  # a zombie has exited


def family(marker: str) -> set[int]:
    """The processes whose command line or environment holds `marker` (this run's temp dir: its Ray daemons, and
    every process they start inherits RAY_AUTH_TOKEN_PATH), but this one, and all their descendants."""
    parents = {pid: parent_pid(pid) for pid in proc_pids()}
    found = {
        pid
        for pid in parents
        if pid != os.getpid() and (marker in read_proc(pid, "cmdline") or marker in read_proc(pid, "environ"))
    }
    while True:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        if not more:
            return {pid for pid in found if alive(pid)}
        found |= more


def parent_pid(pid: int) -> int:
    fields = read_proc(pid, "stat").rsplit(")", 1)[-1].split()
    return int(fields[1]) if len(fields) > 1 else 0


def stop_processes(marker: str, grace_s: float = 15.0) -> int:
    """SIGTERM the family of `marker`, SIGKILL what is left after `grace_s`; how many there were."""
    pids = family(marker)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(alive(pid) for pid in pids):
            time.sleep(0.2)
        pids_left = {pid for pid in pids if alive(pid)}
        if not pids_left:
            break
    return len(pids)


def uid_processes(uids: range) -> list[int]:
    found = []
    for pid in proc_pids():
        status = read_proc(pid, "status")
        uid = re.search(r"^Uid:\s+(\d+)", status, re.M)
        if uid and int(uid.group(1)) in uids and alive(pid):
            found.append(pid)
    return found


# -- the verifier on it -----------------------------------------------------------------------------------------


@dataclass
class Deployment:
    proxy: str
    direct: dict[str, str]  # node address -> the replica's own URL


@contextmanager
def verifier(cluster: Cluster, settings: dict[str, str]) -> Iterator[Deployment]:
    """The shipped Serve application, one replica per node; Serve shut down on the way out."""
    import ray
    from ray import serve

    from verifier_service.ray_serve import build_app

    http_port, direct_port = free_port(), free_port()
    os.environ.update(settings | {"VERIFIER_PORT": str(direct_port)})
    ray.init(address=cluster.address, _node_ip_address=HEAD, log_to_driver=False, logging_level="warning")
    try:
        started = time.monotonic()
        serve.start(http_options={"host": "127.0.0.1", "port": http_port, "location": "HeadOnly"})
        serve.run(build_app({"num_cpus": 1}), name="verifier", route_prefix="/")
        print(f"verifier deployed in {time.monotonic() - started:.0f}s")
        yield Deployment(f"http://127.0.0.1:{http_port}", {node: f"http://{node}:{direct_port}" for node in NODES})
    finally:
        serve.shutdown()  # each replica's lifespan stops its workers and sandboxes
        ray.shutdown()


def check_replicas(deployment: Deployment, isolation: str) -> None:
    for node, url in deployment.direct.items():
        ready = httpx.get(f"{url}/readyz", timeout=10)
        body = ready.json()
        shown = body["sandbox"].get("isolation")
        print(f"replica on {node}: /readyz {ready.status_code}, sandbox isolation {shown}, at {url}")
        if ready.status_code != 200 or body["sandbox"].get("isolation") != isolation:
            raise BenchError(f"the replica on {node} is not ready with {isolation}: {json.dumps(body)}")


def answered(url: str) -> int:
    """Score requests the replica at `url` has answered with 200 (its /metrics)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    found = re.search(r'^verifier_requests_total\{status="200"\} (\S+)$', text, re.M)
    return int(float(found.group(1))) if found else 0


# -- work -------------------------------------------------------------------------------------------------------


def batch(seed: int, size: int, probe: bool = False) -> list[tuple[dict[str, Any], float]]:
    """`size` items with their expected rewards: math (a LaTeX fraction, so a worker runs math-verify) with format,
    and every fourth item code (a stdio test, in the sandbox); with `probe`, the first code item lists the network
    interfaces it sees and passes only if that is ['lo'] alone."""
    items = []
    for i in range(size):
        n = seed * 1000 + i
        if i % 4 == 3:
            a, b = n % 97, n % 89
            program = INTERFACES if probe and i == 3 else (ADD if n % 3 else SUBTRACT)
            stdin, stdout = ("", "['lo']") if program is INTERFACES else (f"{a} {b}", str(a + b))
            right = program is not SUBTRACT or b == 0
            item = {
                "completion": f"```python\n{program}```",
                "code": {"tests": [{"type": "stdio", "stdin": stdin, "stdout": stdout}]},
            }
            items.append((item, 1.0 if right else 0.0))
        else:
            p, q = n % 50 + 1, n % 7 + 2
            math_right, format_right = n % 3 != 0, n % 5 != 0
            answer = f"\\frac{{{2 * p if math_right else 2 * p + 1}}}{{{2 * q}}}"
            text = f"{'<think>' if format_right else ''}{p} over {q}</think>The answer is $\\boxed{{{answer}}}$."
            item = {"completion": text, "math": {"gold": f"\\frac{{{p}}}{{{q}}}"}, "format": {}}
            items.append((item, float(math_right) + float(format_right)))
    return items


def check_batch(client: httpx.Client, url: str, seed: int) -> None:
    pairs = batch(seed, 12, probe=True)
    response = client.post(f"{url}/v1/score", json={"items": [item for item, _ in pairs]}, timeout=120)
    response.raise_for_status()
    got = [result["reward"] for result in response.json()["results"]]
    want = [reward for _, reward in pairs]
    if got != want:
        raise BenchError(f"batch {seed}: rewards {got}, expected {want}")


def correctness(deployment: Deployment, batches: int) -> None:
    before = {node: answered(url) for node, url in deployment.direct.items()}
    started = time.monotonic()
    with httpx.Client() as client, ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda seed: check_batch(client, deployment.proxy, seed), range(batches)))
    elapsed = time.monotonic() - started
    served = {node: answered(url) - before[node] for node, url in deployment.direct.items()}
    shares = ", ".join(f"{node}: {count}" for node, count in served.items())
    print(f"\n1. {batches} batches of 12 (math, format, code), 8 at a time through the proxy, in {elapsed:.1f}s:")
    print(f"   every reward right; batches served per node: {shares}")
    if sum(served.values()) != batches or min(served.values()) == 0:
        raise BenchError(f"both nodes must serve a share of the {batches} batches: {served}")


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    pick = [ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1e3 for q in (0.5, 0.9, 0.99)]
    return " / ".join(f"{ms:6.2f}" for ms in pick)


ONE_ITEM = json.dumps({"items": [{"completion": "The answer is 42.", "math": {"gold": "42"}}]}).encode()


def one_request(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    response = client.post(f"{url}/v1/score", content=ONE_ITEM, headers={"content-type": "application/json"})
    elapsed = time.perf_counter() - started
    if response.status_code != 200 or response.json()["results"][0]["reward"] != 1.0:
        raise BenchError(f"one-item request to {url}: HTTP {response.status_code} {response.text[:200]}")
    return elapsed


def per_request_cost(deployment: Deployment, requests: int) -> None:
    print(f"\n2. one-item requests (plain-number math), {requests} each: ms p50 / p90 / p99, then 16 at a time")
    paths = {"Serve proxy": [deployment.proxy], "a node's own address": [deployment.direct[WORKER]]}
    both = list(deployment.direct.values())
    with httpx.Client(timeout=60) as client:
        for name, urls in paths.items():
            for _ in range(20):
                one_request(client, urls[0])  # warm-up: connections, the proxy's routing table
            times = [one_request(client, urls[0]) for _ in range(requests)]
            print(f"   sequential, {name:<22} {percentiles(times)}")
    for name, urls in {"Serve proxy": [deployment.proxy], "both nodes' addresses": both}.items():
        with (
            httpx.Client(timeout=60, limits=httpx.Limits(max_connections=16)) as client,
            ThreadPoolExecutor(16) as pool,
        ):
            started = time.perf_counter()
            list(pool.map(lambda i, urls=urls: one_request(client, urls[i % len(urls)]), range(requests * 4)))
            rate = requests * 4 / (time.perf_counter() - started)
        print(f"   16 at a time, {name:<22} {rate:7.0f} requests/s")


def throughput(urls: list[str], seed: int, batches: int) -> float:
    """Items per second for `batches` batches of 32 through the trainer client over `urls`."""
    pairs = [pair for b in range(batches) for pair in batch(seed * 100 + b, 32)]
    items = [ScoreItem.model_validate(item) for item, _ in pairs]
    config = ClientConfig(chunk_size=32, max_concurrency=8)
    with VerifierClient(urls, config=config) as client:
        started = time.perf_counter()
        results = client.score(items)
        elapsed = time.perf_counter() - started
    if [r.reward for r in results] != [reward for _, reward in pairs]:
        raise BenchError("wrong rewards in the throughput run")
    return len(items) / elapsed


def scale_out(deployment: Deployment, rounds: int, batches: int) -> float:
    one, two = [deployment.direct[WORKER]], list(deployment.direct.values())
    print(
        f"\n3. scale-out: {batches} batches of 32 items (24 math + format, 8 code) per measure, 8 in flight, "
        f"{rounds} rounds alternating"
    )
    throughput(two, seed=999, batches=4)  # warm-up
    singles, pairs = [], []
    for r in range(rounds):
        order = [("one", one), ("two", two)] if r % 2 == 0 else [("two", two), ("one", one)]
        for name, urls in order:
            rate = throughput(urls, seed=2 * r + (name == "two"), batches=batches)
            (singles if name == "one" else pairs).append(rate)
        print(
            f"   round {r + 1}: one node {singles[-1]:6.1f} items/s, two nodes {pairs[-1]:6.1f} items/s, "
            f"ratio {pairs[-1] / singles[-1]:.2f}x   (load average {load_average()})"
        )
    # Each round's two measures are seconds apart: their ratio is the one other work on the machine skews least.
    ratio = statistics.median(two / one for one, two in zip(singles, pairs, strict=True))
    one_rate, two_rate = statistics.median(singles), statistics.median(pairs)
    verdict = "met" if ratio >= 1.6 else "NOT met"
    print(
        f"   median of the rounds' ratios: {ratio:.2f}x (>= 1.6x: {verdict}); median throughputs: one node "
        f"{one_rate:.1f} items/s, two nodes {two_rate:.1f} items/s ({two_rate / one_rate:.2f}x)"
    )
    return ratio


# -- the run ----------------------------------------------------------------------------------------------------


def preflight() -> None:
    for node in NODES:
        with socket.socket() as sock:
            try:
                sock.bind((node, 0))
            except OSError as exc:
                raise SystemExit(
                    f"cannot bind {node} ({exc}): this bench needs the loopback range 127.0.0.0/8"
                ) from exc
    if shutil.which("bwrap") is None:
        raise SystemExit("bubblewrap is not installed (apt-get install bubblewrap): the replicas' sandboxes need it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="40 batches, few requests, one scale-out round")
    parser.add_argument("--batches", type=int, default=None, help="correctness batches (default 80; quick: 40)")
    parser.add_argument("--requests", type=int, default=None, help="one-item requests per path (default 300)")
    parser.add_argument("--rounds", type=int, default=None, help="scale-out rounds (default 5; quick: 1)")
    parser.add_argument("--temp-dir", type=Path, help="an empty directory with a short path (default: a new one)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the nodes to cores")
    parser.add_argument(
        "--sandbox-image",
        help="the Docker backend with this sandbox image (each replica's pool on its node's engine: here, one engine) "
        "instead of bubblewrap",
    )
    args = parser.parse_args()
    batches = args.batches or (40 if args.quick else 80)
    requests = args.requests or (40 if args.quick else 300)
    rounds = args.rounds or (1 if args.quick else 5)
    preflight()
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None
    temp_dir = args.temp_dir or Path(tempfile.mkdtemp(prefix="vray-", dir="/tmp"))  # Ray's socket paths are short
    # No `import ray` before ray_cluster has set RAY_AUTH_MODE: ray reads it once, at import.
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, ray "
        f"{importlib.metadata.version('ray')}; load average {load_average()}"
    )
    try:
        settings, isolation = SETTINGS, "bubblewrap"
        if args.sandbox_image:
            settings = SETTINGS | {"VERIFIER_SANDBOX_BACKEND": "docker", "VERIFIER_SANDBOX__IMAGE": args.sandbox_image}
            isolation = "docker"
        with ray_cluster(temp_dir, pin) as cluster, verifier(cluster, settings) as deployment:
            check_replicas(deployment, isolation)
            correctness(deployment, batches)
            per_request_cost(deployment, requests)
            scale_out(deployment, rounds, batches=8 if args.quick else 48)
    finally:
        if args.temp_dir is None:
            shutil.rmtree(temp_dir, ignore_errors=True)
    # The replicas' sandbox uids (verifier_service.ray_serve.replica_defaults): none may outlive the run.
    from verifier_service.ray_serve import replica_defaults

    bases = [int(replica_defaults(node, 0, 1)["VERIFIER_SANDBOX__UID_BASE"]) for node in NODES]
    left = [pid for base in bases for pid in uid_processes(range(base, base + 256))]
    if left:
        raise BenchError(f"sandbox processes left behind: {left}")
    if args.sandbox_image:
        pools = [replica_defaults(node, 0, 1)["VERIFIER_SANDBOX__POOL_NAME"] for node in NODES]
        listed = subprocess.run(
            ["docker", "ps", "-aq", *(f"--filter=label=verifier.sandbox.pool={pool}" for pool in pools)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if listed.stdout.strip():
            raise BenchError(f"sandbox containers left behind: {listed.stdout.split()}")
    print(f"no sandbox process left; load average at the end {load_average()}")


if __name__ == "__main__":
    main()
