"""What pytest collects depends on the virtualenv it runs in: Ray Serve (verifier_service/ray_serve.py here,
tests/ray in tests/conftest.py) only where the `ray` extra is installed, which is the ray overlay (`make ray`;
`make test` runs tests/ray there)."""

from __future__ import annotations

import importlib.util


def ray_serve_installed() -> bool:
    if importlib.util.find_spec("ray") is None:  # cheap: nothing is imported
        return False
    try:
        import ray.serve  # noqa: F401
    except ImportError:  # ray without the serve extra (the interop overlay)
        return False
    return True


collect_ignore = [] if ray_serve_installed() else ["verifier_service/ray_serve.py"]
