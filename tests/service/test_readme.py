"""The README's example is the one that works: run it, verbatim, against a real server."""

from __future__ import annotations

import re

from tests.conftest import ROOT, Server


def test_readme_python_example(server: Server) -> None:
    readme = (ROOT / "README.md").read_text()
    examples = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "httpx.post" in block]
    assert len(examples) == 1
    code = examples[0].replace("http://127.0.0.1:8088", server.url)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["rewards"] == [2.0, 1.0]


def test_readme_in_process_example() -> None:
    readme = (ROOT / "README.md").read_text()
    [code] = [
        block
        for block in re.findall(r"```python\n(.*?)```", readme, re.S)
        if "from verifier_service import Verifier" in block
    ]
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["rewards"] == [2.0, 2.0, 2.0]


def test_readme_starts_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["docker compose up --build", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
