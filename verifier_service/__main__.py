"""`python -m verifier_service`: read VERIFIER_* settings and serve with uvicorn."""

from __future__ import annotations

import gc
import logging

import uvicorn

from verifier_service.app import create_app
from verifier_service.settings import VerifierSettings
from verifier_service.url_key import HideUrlKeys

PROBES = ("/healthz", "/readyz")
GC_THRESHOLD = 100_000


class NoProbes(logging.Filter):
    """Keeps load-balancer and compose health checks (every few seconds, forever) out of the access log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        path = args[2] if len(args) >= 3 and isinstance(args[2], str) else ""  # uvicorn: client, method, path, ...
        return path.split("?", 1)[0] not in PROBES


def serve(settings: VerifierSettings) -> None:
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # loop="asyncio": uvloop (picked when installed) cannot start the sandbox's subprocesses as another user.
    config = uvicorn.Config(
        create_app(settings), host=settings.host, port=settings.port, log_level=settings.log_level, loop="asyncio"
    )
    access = logging.getLogger("uvicorn.access")  # after uvicorn.Config, which sets up its loggers
    access.addFilter(NoProbes())
    access.addFilter(HideUrlKeys())  # the key has left the path before uvicorn logs it (url_key.py); and if not
    # What the imports made lives as long as the process: out of the garbage collector's sight, a full collection
    # walks only what requests made (a 512-item batch with every component otherwise pays ~10 ms for one).
    gc.freeze()
    # A collection runs when the tracked objects made minus those freed pass the first threshold (700 by default). A
    # large request keeps tens of thousands alive while it runs, so at 700 the collector walks them again and again
    # (4 to 7 ms of a 512-item batch with every component). Little of what requests make is cyclic garbage (a failed
    # task's traceback is: it may hold a chunk's completions), and it is freed after at most this many objects.
    # Only this server entry point sets either: an in-process `Verifier` leaves its host's collector alone.
    gc.set_threshold(GC_THRESHOLD, 10, 10)
    uvicorn.Server(config).run()


def main() -> None:
    from verifier_service.cli import settings_or_exit

    serve(settings_or_exit({}))


if __name__ == "__main__":
    main()
