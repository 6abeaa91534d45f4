"""Build the Docker images that tests need, once per test process, through the docker CLI.

Tests of the Docker sandbox backend and of compose import these rather than building images themselves:

    from tests.images.build import ensure_offline_base, ensure_sandbox_image, require_docker

    @pytest.fixture(scope="session")
    def sandbox_image() -> str:
        require_docker()
        return ensure_sandbox_image(base_image())

Building the offline base takes about a minute with a nearby Debian mirror (and needs root, or passwordless sudo);
later calls find the image and return at once. A test whose fixtures may build it needs a pytest timeout above
BASE_BUILD_TIMEOUT_S, e.g. ``pytest.mark.timeout(900)``: pytest-timeout counts fixture setup.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE_SCRIPT = ROOT / "scripts" / "offline-base-image.sh"
SANDBOX_DOCKERFILE = ROOT / "sandbox" / "image" / "Dockerfile"
RUNNER = ROOT / "sandbox" / "runner"  # the runner package

OFFLINE_BASE = "verifier-base:offline"
SANDBOX_IMAGE = "verifier-sandbox:test"
BASE_IMAGE_ENV = "VERIFIER_TEST_BASE_IMAGE"  # e.g. python:3.12-slim, where a registry can be reached

DOCKER_INFO_TIMEOUT_S = 30
BASE_BUILD_TIMEOUT_S = 840
SANDBOX_BUILD_TIMEOUT_S = 300

PLACEHOLDER_RUNNER = '''"""Placeholder from tests/images/build.py: sandbox/runner/ did not exist at build time."""

import sys


def main():
    print("placeholder runner", sys.argv[1:])
'''


class ImageBuildError(RuntimeError):
    """An image could not be built; the message carries the tail of the build's output."""


def docker_unavailable_reason() -> str | None:
    """Why no Docker engine can be used here, or None when `docker info` succeeds."""
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=DOCKER_INFO_TIMEOUT_S)
    except FileNotFoundError:
        return "no docker CLI on PATH"
    except subprocess.TimeoutExpired:
        return f"`docker info` did not answer within {DOCKER_INFO_TIMEOUT_S}s"
    if done.returncode != 0:
        last_line = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"no Docker engine: `docker info` failed: {last_line}"
    return None


def require_docker() -> None:
    """Skip the calling test (or fixture) with a clear reason when no Docker engine can be reached."""
    reason = docker_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def image_labels(tag: str) -> dict[str, str] | None:
    """The image's labels ({} when it has none), or None when there is no such image."""
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", tag],
        capture_output=True,
        text=True,
        timeout=DOCKER_INFO_TIMEOUT_S,
    )
    return (json.loads(done.stdout) or {}) if done.returncode == 0 else None


def image_size_mb(tag: str) -> float:
    """The image's size as `docker images` reports it, in MB (10**6 bytes), all layers included."""
    out = _run(["docker", "image", "inspect", "--format", "{{.Size}}", tag], timeout=DOCKER_INFO_TIMEOUT_S)
    return int(out) / 1e6


@functools.cache
def ensure_offline_base(tag: str = OFFLINE_BASE) -> str:
    """Build `tag` with scripts/offline-base-image.sh unless an image built by this very script exists; return tag.

    An image built by an older version of the script (its label verifier.base.script-sha256 differs) is rebuilt.
    """
    script_sha = hashlib.sha256(BASE_SCRIPT.read_bytes()).hexdigest()
    with _exclusive("offline-base"):  # test processes running side by side build it once
        labels = image_labels(tag)
        if labels is not None and labels.get("verifier.base.script-sha256") == script_sha:
            return tag
        command = [str(BASE_SCRIPT), "--tag", tag, *(["--force"] if labels is not None else [])]
        if os.geteuid() != 0:
            if shutil.which("sudo") is None:
                raise ImageBuildError(f"building {tag} needs root (debootstrap); run: sudo {' '.join(command)}")
            command = ["sudo", "-n", *command]
        _run(command, timeout=BASE_BUILD_TIMEOUT_S)
    return tag


def base_image() -> str:
    """The base for images under test: $VERIFIER_TEST_BASE_IMAGE if set (not built here), else the offline base."""
    return os.environ.get(BASE_IMAGE_ENV) or ensure_offline_base()


@functools.cache
def ensure_sandbox_image(base: str, tag: str = SANDBOX_IMAGE, *, allow_placeholder: bool = False) -> str:
    """Build the sandbox image FROM `base` and return its tag, `tag` plus a digest of the build context; the layer
    cache makes a rebuild take about a second.

    The digest is in the tag because one Docker engine may serve test runs of several checkouts at once: under a tag
    of its own, a run's image is never replaced mid-run by another checkout's build of different code.

    The build context is a temporary directory holding only the Dockerfile and the .py files of sandbox/runner/
    (the repository root, virtual environment included, would be gigabytes). With allow_placeholder, a missing
    runner is replaced by a stub package whose __main__.py prints its arguments, and the image is labelled
    verifier.runner=placeholder; without it, a missing runner is an ImageBuildError.
    """
    with tempfile.TemporaryDirectory(prefix="sandbox-image-") as tmp:
        context = Path(tmp)
        package = context / "sandbox" / "runner"
        package.mkdir(parents=True)
        shutil.copy(SANDBOX_DOCKERFILE, context / "Dockerfile")
        if (RUNNER / "__main__.py").exists():
            for module in RUNNER.glob("*.py"):
                shutil.copy(module, package / module.name)
            runner_label = "source"
        elif allow_placeholder:
            (package / "__init__.py").write_text("")
            (package / "__main__.py").write_text(PLACEHOLDER_RUNNER)
            runner_label = "placeholder"
        else:
            raise ImageBuildError(f"{RUNNER.relative_to(ROOT)} does not exist; the sandbox image needs it")
        tag = f"{tag}-{_digest(context, base)}"
        command = ["docker", "build", "--quiet", "--build-arg", f"BASE_IMAGE={base}"]
        command += ["--label", f"verifier.runner={runner_label}", "--tag", tag, str(context)]
        _run(command, timeout=SANDBOX_BUILD_TIMEOUT_S)
    return tag


def _digest(context: Path, base: str) -> str:
    """12 hex digits naming what an image is built from: the files of its context, and its base."""
    digest = hashlib.sha256(base.encode())
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(f"\0{path.relative_to(context)}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:12]


@contextmanager
def _exclusive(name: str) -> Iterator[None]:
    path = Path(tempfile.gettempdir()) / f"verifier-tests-{name}-{os.getuid()}.lock"
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(command: list[str], timeout: float) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ImageBuildError(f"{command[0]} ... did not finish within {timeout}s: {' '.join(command)}") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
        raise ImageBuildError(f"{' '.join(command)} exited with {done.returncode}:\n{tail}")
    return done.stdout.strip()
