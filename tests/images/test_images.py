"""The offline base image and the sandbox image: what the Docker backend and the service image rely on."""

from __future__ import annotations

import hashlib
import json
import subprocess
from typing import Any

import pytest

from tests.images.build import BASE_SCRIPT, PLACEHOLDER_RUNNER, RUNNER, image_labels, image_size_mb

# The first test to need the offline base builds it (about a minute here); pytest-timeout counts fixture setup.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

HARDENED = [
    "--read-only",
    "--network=none",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--tmpfs=/tmp:rw,nosuid,nodev,size=16m",
]
ENTRYPOINT = ["/usr/local/bin/python3", "-I", "-B", "/opt/sandbox/runner.pyz"]
COMPILERS = "gcc cc c++ g++ clang tcc"  # none in the offline base
OTHER_COMPILERS = "clang clang++ tcc"  # the sandbox image has g++ (C++ programs), and no other
# Checks the sandbox's confinement from inside: prints what it could and could not do.
CONFINEMENT_PROBE = """
import errno, json, os, socket

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, repr(exc))

def write(path):
    with open(path, "w") as f:
        f.write("x")

print(json.dumps({
    "ids": [os.getuid(), os.getgid(), os.geteuid()],
    "cwd": os.getcwd(),
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
    "connect": attempt(lambda: socket.create_connection(("1.1.1.1", 53), timeout=2)),
    "write_root": attempt(lambda: write("/probe")),
    "write_runner": attempt(lambda: write("/opt/sandbox/runner.pyz")),
    "write_tmp": attempt(lambda: write("/tmp/probe")),
}))
"""


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def run_in(image: str, *command: str, options: tuple[str, ...] = ()) -> str:
    """stdout of `command` in a fresh container; fails the test, with stderr, if it exits non-zero."""
    done = docker("run", "--rm", *options, image, *command)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    return done.stdout.strip()


def config(image: str) -> dict[str, Any]:
    done = docker("image", "inspect", "--format", "{{json .Config}}", image)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_offline_base_runs_python_like_the_official_image(offline_base: str) -> None:
    probe = "import ensurepip, json, ssl, sys, venv; print(json.dumps([sys.executable, sys.version_info >= (3, 11)]))"
    assert json.loads(run_in(offline_base, "python3", "-c", probe)) == ["/usr/local/bin/python3", True]
    assert run_in(offline_base, "/usr/local/bin/python", "-c", "print('ok')") == "ok"
    image_config = config(offline_base)
    assert image_config["Cmd"] == ["python3"]
    assert "LANG=C.UTF-8" in image_config["Env"]


def test_offline_base_is_slim(offline_base: str) -> None:
    leftovers = run_in(
        offline_base,
        "sh",
        "-c",
        f"find /usr/share/man /usr/share/info /var/lib/apt/lists /var/cache/apt -mindepth 1;"
        f"find /usr/share/doc -type f -not -name copyright; for t in {COMPILERS}; do command -v $t; done; true",
    )
    assert leftovers == ""


def test_offline_base_makes_a_venv_with_pip_offline(offline_base: str) -> None:
    # The service image is built FROM the base with a venv and pip; ensurepip needs no network.
    out = run_in(
        offline_base,
        "sh",
        "-c",
        "python3 -m venv /tmp/venv && /tmp/venv/bin/python -m pip --version",
        options=("--network=none",),
    )
    assert out.startswith("pip ")


def test_offline_base_is_labelled_with_the_script_that_built_it(offline_base: str) -> None:
    labels = image_labels(offline_base) or {}
    assert labels["verifier.role"] == "base"
    assert labels["verifier.base.script-sha256"] == hashlib.sha256(BASE_SCRIPT.read_bytes()).hexdigest()


def test_base_script_does_nothing_when_the_image_exists(offline_base: str) -> None:
    before = docker("image", "inspect", "--format", "{{.Id}}", offline_base).stdout
    done = subprocess.run([str(BASE_SCRIPT), "--tag", offline_base], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "already exists" in done.stderr
    assert docker("image", "inspect", "--format", "{{.Id}}", offline_base).stdout == before


def test_base_script_rejects_unknown_arguments() -> None:
    done = subprocess.run([str(BASE_SCRIPT), "--frobnicate"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "unknown argument: --frobnicate" in done.stderr


def test_sandbox_runs_python_as_uid_10001_confined(sandbox_image: str) -> None:
    options = (*HARDENED, "--entrypoint=/usr/local/bin/python3")
    seen = json.loads(run_in(sandbox_image, "-I", "-c", CONFINEMENT_PROBE, options=options))
    assert seen == {
        "ids": [10001, 10001, 10001],
        "cwd": "/tmp",
        "interfaces": ["lo"],
        "connect": "ENETUNREACH",
        "write_root": "EROFS",
        "write_runner": "EROFS",
        "write_tmp": "ok",
    }


def test_sandbox_has_gxx_no_other_compiler_and_no_setid_files(sandbox_image: str) -> None:
    # As root, without the hardening, so that find sees every directory: this checks the image, not the run.
    script = f"for t in {OTHER_COMPILERS}; do command -v $t; done; find / -xdev -type f -perm /6000"
    assert run_in(sandbox_image, "-c", script, options=("--user=0", "--entrypoint=sh")) == ""
    assert run_in(sandbox_image, "-c", "command -v g++", options=("--entrypoint=sh",)).strip() == "/usr/bin/g++"


def test_sandbox_image_config(sandbox_image: str) -> None:
    image_config = config(sandbox_image)
    labels = image_config["Labels"]
    assert image_config["Entrypoint"] == ENTRYPOINT
    assert image_config.get("Cmd") is None  # the backend passes the runner's arguments
    assert image_config["User"] == "10001:10001"
    assert image_config["WorkingDir"] == "/tmp"
    assert labels["verifier.role"] == "sandbox"
    assert labels["org.opencontainers.image.base.name"]
    passwd = run_in(sandbox_image, "-c", "getent passwd sandbox; getent group sandbox", options=("--entrypoint=sh",))
    assert passwd.splitlines() == ["sandbox:x:10001:10001::/nonexistent:/usr/sbin/nologin", "sandbox:x:10001:"]


# What the image's zipapp holds: file name -> text.
LIST_ARCHIVE = (
    "import json, zipfile\n"
    "archive = zipfile.ZipFile('/opt/sandbox/runner.pyz')\n"
    "print(json.dumps({n: archive.read(n).decode() for n in archive.namelist() if not n.endswith('/')}))\n"
)


def test_sandbox_carries_the_runner_package_as_a_zipapp(sandbox_image: str) -> None:
    labels = image_labels(sandbox_image) or {}
    if labels.get("verifier.runner") == "placeholder":
        package = {"__init__.py": "", "__main__.py": PLACEHOLDER_RUNNER}
    else:
        package = {module.name: module.read_text() for module in RUNNER.glob("*.py")}
    archive = json.loads(run_in(sandbox_image, "-I", "-c", LIST_ARCHIVE, options=("--entrypoint=python3",)))
    main = archive.pop("__main__.py")
    assert archive == {f"runner/{name}": text for name, text in package.items()}
    assert "runner.__main__.main()" in main  # what zipapp writes for --main runner.__main__:main


def test_sandbox_adds_little_but_gxx_and_its_precompiled_header(
    sandbox_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = (image_labels(sandbox_image) or {})["org.opencontainers.image.base.name"]
    base_mb, sandbox_mb = image_size_mb(base), image_size_mb(sandbox_image)
    with capsys.disabled():
        print(f"\nimage sizes: {base} {base_mb:.1f} MB, {sandbox_image} {sandbox_mb:.1f} MB")
    # g++ with its libstdc++ headers and binutils: about 240 MB on Debian bookworm; bits/stdc++.h precompiled: 102 MB
    assert sandbox_mb - base_mb < 400, "the sandbox layers should hold g++ and its .gch, a user, a script and chmods"
    listing = run_in(sandbox_image, "-c", "cd /opt/sandbox && find . -type f | sort", options=("--entrypoint=sh",))
    assert listing.split() == ["./pch/bits/stdc++.h.gch", "./runner.pyz"]
