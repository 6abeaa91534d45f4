"""`python -m verifier_service`: read VERIFIER_* settings and serve with uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from verifier_service.app import create_app
from verifier_service.settings import VerifierSettings


def main() -> None:
    settings = VerifierSettings()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # loop="asyncio": uvloop (picked when installed) cannot start the sandbox's subprocesses as another user.
    uvicorn.run(
        create_app(settings), host=settings.host, port=settings.port, log_level=settings.log_level, loop="asyncio"
    )


if __name__ == "__main__":
    main()
