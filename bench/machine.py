"""Helpers the benchmarks share: a free loopback port, a local verifier, stopping a service, and how busy the machine
was."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from trainer_client import VerifierClient

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def load_average() -> str:
    """Other work on the machine skews the numbers (the service uses every core): say how busy it was."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def service_processes(url: str) -> tuple[int, list[int]]:
    """A local verifier's own process and its math workers, by pid (Linux): the workers as /readyz lists them, the
    service as their grandparent (multiprocessing's forkserver, the service's child, forks them)."""
    workers: list[int] = httpx.get(f"{url}/readyz", timeout=30).json()["math_workers"]["pids"]
    forkserver = _parent(workers[0])
    return _parent(forkserver), workers


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def cpu_ns(pid: int) -> tuple[int, int]:
    """A process's time on a CPU and its time waiting for one (runnable, another process on every core), in ns: the
    first two fields of /proc/<pid>/schedstat, its main thread's."""
    on_cpu, waiting = Path(f"/proc/{pid}/schedstat").read_text().split()[:2]
    return int(on_cpu), int(waiting)


def verifier_cpu_ns(service: tuple[int, list[int]]) -> tuple[int, int, int]:
    """`service_processes`' service process's time on a CPU and waiting for one, and its workers' time on a CPU, so
    far (ns)."""
    main, workers = service
    on_cpu, waiting = cpu_ns(main)
    return on_cpu, waiting, sum(cpu_ns(worker)[0] for worker in workers)


def stop(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout_s`."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def verifier(log: Path | None = None, python: str = sys.executable, **settings: str) -> Iterator[str]:
    """`python -m verifier_service` (this Python, or `python`) on a free loopback port, code scoring off, with only
    these VERIFIER_* settings (none from the environment); its URL once /readyz answers 200. Its output goes to `log`
    (else this process's); stopped on the way out."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env |= {"VERIFIER_HOST": "127.0.0.1", "VERIFIER_PORT": str(port), "VERIFIER_CODE_ENABLED": "false"}
    env |= {"VERIFIER_LOG_LEVEL": "warning", **settings}
    command = [python, "-m", "verifier_service"]
    if log is None:
        process = subprocess.Popen(command, cwd=ROOT, env=env)
    else:
        with log.open("wb") as out:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        with VerifierClient(url) as client:
            client.wait_until_ready(120)
        yield url
    finally:
        stop(process)


def process_cpu_ns(pid: int) -> int:
    """A process's time on a CPU so far, all its threads together, those that have ended too (ns, counted by the
    kernel in clock ticks: 10 ms on most systems): utime and stime of /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
