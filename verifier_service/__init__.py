"""Reward verifier: an HTTP service that scores LLM completions for RL training.

`from verifier_service import score` (and `Verifier`, `AsyncVerifier`) scores in this process, with no server: see
`verifier_service.inprocess`. They are imported on first use, so that `import verifier_service.schema` (which the
trainer client does) stays light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["AsyncVerifier", "Verifier", "__version__", "score"]


def __getattr__(name: str) -> Any:
    if name in ("AsyncVerifier", "Verifier", "score"):
        from verifier_service import inprocess

        return getattr(inprocess, name)
    raise AttributeError(f"module 'verifier_service' has no attribute {name!r}")
