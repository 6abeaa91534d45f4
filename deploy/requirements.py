"""The service image's requirements, from pyproject.toml: the project's dependencies and those of the extras named
on the command line (separated by spaces or commas), one per line. The Dockerfile's builder stage installs them
before the project's code is copied in, so editing the code reuses that layer. An extra that pyproject.toml does not
define stops the build, naming it.

    python deploy/requirements.py procedural            # the default image
    python deploy/requirements.py procedural models     # VERIFIER_EXTRAS=models: torch and transformers too
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path


def requirements(pyproject: Path, extras: Sequence[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    defined = project.get("optional-dependencies", {})
    names = [name for word in extras for name in word.replace(",", " ").split()]
    unknown = sorted({name for name in names if name not in defined})
    if unknown:
        raise SystemExit(f"unknown extra(s) {', '.join(unknown)}: pyproject.toml defines {', '.join(sorted(defined))}")
    out = list(project["dependencies"])
    for name in dict.fromkeys(names):
        out += [requirement for requirement in defined[name] if requirement not in out]
    return out


if __name__ == "__main__":
    print("\n".join(requirements(Path("pyproject.toml"), sys.argv[1:])))
