"""`python -m verifier_service`: read VERIFIER_* settings and serve with uvicorn."""

from __future__ import annotations

import logging
from typing import Any

import uvicorn

from verifier_service.app import create_app, tune_collector
from verifier_service.connections import (
    AcceptErrors,
    MalformedRequests,
    bounded_protocol,
    connection_budget,
    open_file_limit,
    raise_open_file_limit,
)
from verifier_service.settings import VerifierSettings
from verifier_service.url_key import HideUrlKeys

PROBES = ("/healthz", "/readyz")


class NoProbes(logging.Filter):
    """Keeps load-balancer and compose health checks (every few seconds, forever) out of the access log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        path = args[2] if len(args) >= 3 and isinstance(args[2], str) else ""  # uvicorn: client, method, path, ...
        return path.split("?", 1)[0] not in PROBES


def install_log_filters() -> None:
    """Health probes stay out of the access log; a key in a URL is masked in every line, whoever logs it (a key in
    the right place has left the path before uvicorn logs it, url_key.py; one in a URL that only comes close has not).
    Each filter once, however often this is called.
    """
    add_filter(logging.getLogger("uvicorn.access"), NoProbes())
    add_filter(logging.getLogger("asyncio"), AcceptErrors())  # out of file descriptors: a line a second, not thousands
    add_filter(logging.getLogger("uvicorn.error"), MalformedRequests())  # counted in the connections' line instead
    for name in ("", "uvicorn", "uvicorn.access"):  # the root's handler (ours, asyncio's) and uvicorn's own two
        for handler in logging.getLogger(name).handlers:
            add_filter(handler, HideUrlKeys())


def add_filter(target: logging.Filterer, new: logging.Filter) -> None:
    if not any(type(old) is type(new) for old in target.filters):
        target.addFilter(new)


def server_config(app: Any, settings: VerifierSettings, **options: Any) -> uvicorn.Config:
    """How uvicorn serves `app`, here and on a Ray Serve replica's own listener (ray_serve.serve_directly): at the
    address and log level of `settings`, with the connection limits of connections.py; `options` are uvicorn.Config's
    others. Raises this process's open-file limit first, since the connection cap is fitted to it, and installs the
    log filters after uvicorn.Config, which sets up uvicorn's loggers."""
    # loop="asyncio": uvloop (picked when installed) cannot start the sandbox's subprocesses as another user.
    # http: uvicorn's httptools protocol with the connection limits and timeouts of connections.py.
    raise_open_file_limit()
    cap, backlog = connection_budget(settings, open_file_limit())
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        loop="asyncio",
        http=bounded_protocol(settings, cap, backlog),
        backlog=backlog,
        **options,
    )
    install_log_filters()
    return config


def serve(settings: VerifierSettings) -> None:
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = server_config(create_app(settings), settings)
    tune_collector()
    try:
        uvicorn.Server(config).run()
    except KeyboardInterrupt:  # uvicorn shut down cleanly, then raised the Ctrl-C again to exit by it: no traceback
        raise SystemExit(130) from None


def main() -> None:
    from verifier_service.cli import settings_or_exit

    serve(settings_or_exit({}))


if __name__ == "__main__":
    main()
