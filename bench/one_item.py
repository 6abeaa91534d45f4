"""One-item requests per second through the service, with uvicorn's two HTTP parsers side by side.

    .venv/bin/python bench/one_item.py                 # needs wrk (Debian: apt-get install wrk)
    .venv/bin/python bench/one_item.py --seconds 20 --connections 64

Most trainers other than TRL send one sample per request (verl, OpenRLHF, slime): the service's cost per request
is what bounds them. wrk (C, so the load generator costs little of the machine) posts GSM8K-shaped one-item math +
format requests, each with fresh numbers so the math cache never answers, to a verifier started with uvicorn's
pure-Python h11 parser and then with httptools (the C parser the service installs and uvicorn picks); both runs in
one process of this script, alternated, and the ratio printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx
from machine import free_port, load_average, stop

ROOT = Path(__file__).resolve().parents[1]
# Each request a new sum, half of them answered wrong: the math cache never answers twice.
LUA = textwrap.dedent(
    r"""
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    counter = 0
    request = function()
      counter = counter + 1
      local a, b = math.random(1, 999), math.random(1, 999)
      local body = string.format('{"items":[{"completion":"<think>She sold %d clips in April and %d in May, so '
        .. '%d + %d = %d. Let me check: %d.</think>The answer is \\\\boxed{%d}.","math":{"gold":"%d"},"format":{}}]}',
        a, b, a, b, a + b, counter, a + b, a + b + (counter % 2))
      return wrk.format(nil, nil, nil, body)
    end
    """
)
SERVE = (
    "import sys, uvicorn; from verifier_service.app import create_app; uvicorn.run(create_app(), "
    "host='127.0.0.1', port=int(sys.argv[1]), http=sys.argv[2], log_level='warning', loop='asyncio')"
)


def serve(http: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env |= {"VERIFIER_CODE_ENABLED": "false", "VERIFIER_LOG_LEVEL": "warning"}
    process = subprocess.Popen([sys.executable, "-c", SERVE, str(port), http], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    stop(process)
    raise SystemExit(f"the verifier ({http}) did not start")


def requests_per_second(url: str, script: Path, seconds: int, connections: int) -> float:
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), f"{url}/v1/score"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "Non-2xx" in out:
        raise SystemExit(f"some requests failed:\n{out}")
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if found is None:
        raise SystemExit(f"no rate in wrk's output:\n{out}")
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    parser.add_argument("--connections", type=int, default=32, help="concurrent connections")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each parser, alternated")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("this benchmark needs wrk (Debian: apt-get install wrk)")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load average {load_average()}")  # fmt: skip
    rates: dict[str, list[float]] = {"h11": [], "httptools": []}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "one_item.lua"
        script.write_text(LUA)
        for _ in range(args.rounds):
            for http in rates:
                process, url = serve(http)
                try:
                    requests_per_second(url, script, 2, args.connections)  # warm-up
                    rates[http].append(requests_per_second(url, script, args.seconds, args.connections))
                finally:
                    stop(process)
                print(f"{http:<10} {rates[http][-1]:8.0f} requests/s")
    best = {http: max(found) for http, found in rates.items()}
    print(f"one-item requests/s at {args.connections} connections: h11 {best['h11']:.0f}, httptools "
          f"{best['httptools']:.0f}, ratio {best['httptools'] / best['h11']:.2f}x")  # fmt: skip
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
