"""Each Deployment of deploy/k8s run as its Docker equivalent: the image the manifest names (the project's Dockerfile,
with bubblewrap for the bubblewrap pod), the container's settings read from the manifest and given to `docker run`.
What Docker cannot give one container (`hostUsers: false`, a gVisor RuntimeClass) is left out; the rest is what the
sandbox depends on. No network: the probe runs inside the container (`docker exec`)."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.deploy.test_k8s import DEPLOYMENTS, documents
from tests.images.build import require_docker
from tests.integration.compose import TAG, base_image_override, host_extra_cas

BUILD_TIMEOUT_S = 1200  # the service's dependencies download on a first build
PROBE = """
import json, sys, time, urllib.request
for _ in range(120):
    try:
        ready = urllib.request.urlopen("http://127.0.0.1:8088/readyz", timeout=3)
        break
    except Exception:
        time.sleep(0.5)
program = "import os, socket\\nprint(os.getuid(), sorted(name for _, name in socket.if_nameindex()))\\n"
item = {"completion": "```python\\n" + program + "```",
        "code": {"tests": [{"type": "stdio", "stdin": "", "stdout": "10001 ['lo']"}]}}
request = urllib.request.Request("http://127.0.0.1:8088/v1/score", data=json.dumps({"items": [item]}).encode(),
                                 headers={"content-type": "application/json"})
[result] = json.loads(urllib.request.urlopen(request, timeout=60).read())["results"]
print(json.dumps({"isolation": json.loads(ready.read())["sandbox"]["isolation"], "reward": result["reward"]}))
"""


def docker_flags(spec: dict[str, Any]) -> list[str]:
    """`docker run` flags for the pod's one container: user, security settings, /tmp, environment, command."""
    [box] = spec["containers"]
    pod, ctx = spec.get("securityContext", {}), box["securityContext"]
    flags = ["--user", f"{pod['runAsUser']}:{pod['runAsGroup']}", "--network", "none", "--tmpfs", "/tmp"]
    flags += ["--read-only"] if ctx.get("readOnlyRootFilesystem") else []
    flags += ["--security-opt", "no-new-privileges"] if ctx.get("allowPrivilegeEscalation") is False else []
    flags += [f"--cap-drop={cap}" for cap in ctx["capabilities"].get("drop", [])]
    flags += [f"--cap-add={cap}" for cap in ctx["capabilities"].get("add", [])]
    seccomp = ctx.get("seccompProfile") or pod.get("seccompProfile") or {"type": "RuntimeDefault"}
    flags += ["--security-opt", "seccomp=unconfined"] if seccomp["type"] == "Unconfined" else []
    flags += (
        ["--security-opt", "apparmor=unconfined"] if ctx.get("appArmorProfile", {}).get("type") == "Unconfined" else []
    )
    flags += ["--security-opt", "systempaths=unconfined"] if ctx.get("procMount") == "Unmasked" else []
    flags += [f"--env={var['name']}={var['value']}" for var in box["env"] if "value" in var]
    flags += ["--env=VERIFIER_MATH_WORKERS=1", "--env=VERIFIER_SANDBOX__POOL_SIZE=1"]  # this machine's size
    if "command" in box:
        flags += ["--entrypoint", box["command"][0]]
    return flags


def build(sandbox_packages: str) -> str:
    tag = f"reward-verifier:pod-{TAG}{'-' + sandbox_packages if sandbox_packages else ''}"
    args = ["--build-arg", f"SANDBOX_PACKAGES={sandbox_packages}"]
    if base := base_image_override():
        args += ["--build-arg", f"BASE_IMAGE={base}"]
    if cas := host_extra_cas():
        args += ["--build-arg", f"PIP_CA_CERTS={cas}"]
    done = subprocess.run(
        ["docker", "build", "--quiet", *args, "-t", tag, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return tag


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
@pytest.mark.parametrize(("kind", "isolation"), [("bubblewrap", "bubblewrap"), ("gvisor", "rlimits")])
def test_the_pod_runs_code_in_its_sandbox(kind: str, isolation: str) -> None:
    require_docker()
    [deployment] = documents(DEPLOYMENTS[kind])
    spec = deployment["spec"]["template"]["spec"]
    image = build("bubblewrap" if kind == "bubblewrap" else "")
    name = f"verifier-pod-test-{uuid.uuid4().hex[:8]}"
    command = spec["containers"][0].get("command", [])[1:]
    run = ["docker", "run", "--detach", "--rm", "--name", name, *docker_flags(spec), image, *command]
    started = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    try:
        probe = subprocess.run(
            ["docker", "exec", name, "/opt/verifier/bin/python", "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=180,
        )
        logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True, timeout=30)
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, timeout=60)
    assert probe.returncode == 0, probe.stderr[-2000:] + logs.stdout[-2000:] + logs.stderr[-2000:]
    # The jailed program ran as the sandbox's uid (not the service's) and saw no network but loopback.
    assert json.loads(probe.stdout.strip().splitlines()[-1]) == {"isolation": isolation, "reward": 1.0}
