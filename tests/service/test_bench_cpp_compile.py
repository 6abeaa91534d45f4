"""bench/cpp_compile.py, C++ compile time with and without the precompiled bits/stdc++.h, as a smoke run on each
backend: every compile comes back with a binary, the sandbox uses the .gch, and the report has p50 and p90 for both
modes of every source; not any speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)  # the docker run may build the sandbox image first (and the offline base: BASE_BUILD_...)
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_the_cpp_compile_bench_times_both_modes_through_the_sandbox(tmp_path: Path, backend: str) -> None:
    if backend == "docker":
        from tests.images.build import require_docker

        require_docker()
    out = tmp_path / "cpp.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "cpp_compile.py"), "--smoke", "--backends", backend, "--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=880,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    report = json.loads(out.read_text())
    row = report["backends"][backend]
    if backend == "local" and row.get("isolation") != "bubblewrap":
        pytest.skip("bubblewrap cannot run here (apt-get install bubblewrap; needs user namespaces)")
    assert (row["cpp"], row["pch_used"], row["failed_compiles"]) == (True, True, {"with": 0, "without": 0}), row
    assert len(row["sources"]) == 2
    for summary in [*row["sources"].values(), row["all"]]:
        for mode in ("with", "without"):
            assert summary[mode]["n"] >= 2 and 0 < summary[mode]["p50_ms"] <= summary[mode]["p90_ms"], summary
    assert report["command"] and report["machine"]["cpus"] and report["load_average"]["after"]
    assert f"{backend} (" in result.stdout and "with p50" in result.stdout and "machine:" in result.stdout
