"""What one request's programs print is judged as it comes and then dropped: the service's memory does not grow with
the sum of a request's outputs (a thousand tests printing 4 MB each once took a service from 110 MB to 4.1 GB)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import running_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TESTS = 200
OUTPUT_BYTES = (4 << 20) - 64  # each test's output: just under the default cap of 4 MB
PROGRAM = f"import sys\nsys.stdout.write('x ' * {OUTPUT_BYTES // 2})\n"


def memory_kib(pid: int, field: str) -> int:
    """VmRSS (resident now) or VmHWM (the peak since the last reset) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(f"{field}:"))


def test_a_request_printing_800_mb_leaves_the_service_far_smaller(tmp_path: Path) -> None:
    with running_server(tmp_path, sandbox_backend="local", sandbox__pool_size=2) as server:
        pid = server.process.pid  # the server itself: `python -m verifier_service` runs uvicorn in this process
        item = {
            "completion": f"```python\n{PROGRAM}```",
            "code": {"tests": [{"type": "stdio", "stdout": "x y"}] * TESTS, "timeout_s": 30},
        }
        one = {**item, "code": {"tests": [{"type": "stdio", "stdout": "x y"}]}}
        warm = httpx.post(f"{server.url}/v1/score", json={"items": [one]}, timeout=60)  # imports, first buffers
        assert warm.status_code == 200, warm.text
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")  # the peak (VmHWM) starts again from the resident size now
        before = memory_kib(pid, "VmRSS")
        response = httpx.post(f"{server.url}/v1/score", json={"items": [item]}, timeout=280)
        peak = memory_kib(pid, "VmHWM")
    assert response.status_code == 200, response.text
    tests = response.json()["results"][0]["components"]["code"]["tests"]
    assert len(tests) == TESTS and {t["verdict"] for t in tests} == {"wrong_answer"}
    assert tests[0]["detail"] == "differs at token 2 (line 1 of the output): expected 'x [y]', got 'x [x] x x ...'"
    total_mib, grown_mib = TESTS * OUTPUT_BYTES / 2**20, (peak - before) / 1024
    assert grown_mib < total_mib / 8, f"the service grew {grown_mib:.0f} MiB for {total_mib:.0f} MiB of output"
