"""Shared test helpers: a real verifier server on loopback, started as `python -m verifier_service`."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from conftest import ray_serve_installed

ROOT = Path(__file__).parents[1]
# A server that loads models imports torch and transformers first: more than a minute on a busy 2-core machine.
MODEL_SERVER_READY_S = 180.0
# tests/interop checks the trainer adapters against the trainers' own packages, which live in the overlay virtualenv
# (`make interop`, .venv-interop); `make test` runs it there, after this suite.
# tests/ray runs the verifier on Ray Serve, which lives in the ray overlay (`make ray`, .venv-ray); `make test` runs
# it there, after this suite. (The closest conftest's collect_ignore wins, so this one says it, not the root's.)
collect_ignore = [] if importlib.util.find_spec("verl") else ["interop"]
collect_ignore += [] if ray_serve_installed() else ["ray"]
# The agreement set's checkers are programs the sandbox runs (`checker input output answer`), not modules: importing
# them for doctests runs them (broken.py exits 3 at import and stops the collection).
collect_ignore += ["data/cpp_agreement"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def running_server(
    tmp_path: Path,
    port: int | None = None,
    python: str = sys.executable,
    preexec_fn: Callable[[], None] | None = None,
    wait_for: str = "/readyz",
    ready_timeout: float = 60.0,
    **settings: object,
) -> Iterator[Server]:
    """Start a real uvicorn server with VERIFIER_* settings (under `python`, after `preexec_fn` in its process: to
    set its resource limits, say), and wait up to `ready_timeout` seconds until `wait_for` answers 200; stop it (and
    its workers) afterwards."""
    port = port or free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env |= {"VERIFIER_HOST": "127.0.0.1", "VERIFIER_PORT": str(port), "VERIFIER_LOG_LEVEL": "warning"}
    # Servers alive at once must not share sandbox uids (per-uid process limits would couple them).
    env |= {"VERIFIER_SANDBOX__UID_BASE": str(100_000 + (port % 10_000) * 32)}
    env |= {f"VERIFIER_{k.upper()}": str(v) for k, v in settings.items()}
    log = tmp_path / f"server-{port}.log"
    with log.open("ab") as out:  # a server restarted on the same port adds to the same log
        process = subprocess.Popen(
            [python, "-m", "verifier_service"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec_fn,
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_until_ok(server, wait_for, timeout=ready_timeout)
        yield server
    finally:
        stop_process(process)


@contextmanager
def running_process(
    command: list[str], log: Path, url: str, ready_path: str, timeout: float, env: dict[str, str] | None = None
) -> Iterator[str]:
    """A test's own server process (a stand-in engine or judge, `transformers serve`) run from the repository's root,
    its output to `log`: `url` once GET `url` + `ready_path` answers 200 (raises if it exits first or the time is up);
    stopped afterwards."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_ok(Server(url, process, log), ready_path, timeout)
        yield url
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 15 s."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_ready(server: Server, timeout: float) -> None:
    wait_until_ok(server, "/readyz", timeout)


def wait_until_ok(server: Server, path: str, timeout: float) -> None:
    """Until GET `path` answers 200; raises if the server exits first or the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.output()}")
        try:
            if httpx.get(f"{server.url}{path}", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server not ready within {timeout}s:\n{server.output()}")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One shared server for tests that do not disturb it."""
    settings = {"math_timeout_s": 3, "max_batch_items": 2000, "max_completion_chars": 200_000}
    with running_server(tmp_path_factory.mktemp("server"), **settings) as srv:
        yield srv


@pytest.fixture
def no_project_constants(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Hypothesis draws a share of its strings and numbers from the constants of the project's modules in memory
    (hypothesis.internal.conjecture.providers._get_local_constants), so a generated case depends on what the run has
    imported, and a generated string may be one of the service's own messages ('Value error, ') that an echo check then
    finds in the answer. Without them, a fuzzing test draws the same cases alone and in the whole suite. (An internal
    of hypothesis: should it go, setattr fails here, loudly.)"""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    monkeypatch.setattr(providers, "_get_local_constants", Constants)
    providers.CONSTANTS_CACHE.cache.clear()  # what was worked out with them
    yield
    providers.CONSTANTS_CACHE.cache.clear()


@pytest.fixture
def earlier_garbage_collected() -> None:
    """Collect what earlier tests left to the garbage collector, with their ResourceWarnings ignored, before a test that
    allocates enough to start a full collection itself (reasoning-gym's ARC data): an unclosed socket some earlier test
    dropped would otherwise be finalized inside this test, and its warning, an error here, would fail it (it did
    once in the whole suite, never alone)."""
    import gc
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
