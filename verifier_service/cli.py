"""The `reward-verifier` command: `serve` (the HTTP service) and `score FILE.jsonl` (score a file with no server).

Settings come from the same VERIFIER_* variables in both (see the README's "Settings").
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from verifier_service.settings import VerifierSettings

EPILOG = "Settings: VERIFIER_* environment variables (README, 'Settings'), e.g. VERIFIER_MATH_WORKERS=4."


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="reward-verifier", description=__doc__.splitlines()[0], epilog=EPILOG)
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="run the HTTP service (as `python -m verifier_service`)", epilog=EPILOG)
    serve.add_argument("--host", help="address to listen on (default: VERIFIER_HOST, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: VERIFIER_PORT, 8088)")
    score = commands.add_parser(
        "score",
        help="score a JSONL file of items in this process",
        description="Score a JSONL file of items (one wire-format item per line) with no server; write one result "
        "per item, in order, as JSONL; print a summary of the verdicts to stderr.",
        epilog=EPILOG + " Exit status: 0, or 1 when some line was not a valid item or could not be scored (each such "
        "line gets an error line in its place; the rest are scored).",
    )
    score.add_argument("file", help="the items, one JSON object per line; - for stdin")
    score.add_argument("-o", "--output", default="-", help="where the results go (default: stdout)")
    score.add_argument("--chunk-size", type=int, default=256, help="items scored at once (default 256)")
    score.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "serve":
        from verifier_service.__main__ import serve

        overrides = {key: value for key in ("host", "port") if (value := getattr(args, key)) is not None}
        serve(settings_or_exit(overrides))
        return 0
    from verifier_service.score_file import score_file

    settings = settings_or_exit({})
    logging.basicConfig(level=max(logging.WARNING, logging.getLevelName(settings.log_level.upper())))
    if args.chunk_size < 1:
        raise SystemExit("reward-verifier: --chunk-size must be at least 1")
    try:
        run = score_file(args.file, args.output, settings, chunk_size=args.chunk_size, quiet=args.quiet)
        summary = asyncio.run(run)
    except OSError as exc:
        raise SystemExit(f"reward-verifier: {exc}") from None
    return 1 if summary.invalid or summary.failed else 0


def settings_or_exit(overrides: dict[str, object]) -> VerifierSettings:
    try:
        return VerifierSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        errors = exc.errors(include_input=False)
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}".removeprefix(": ") for e in errors)
        raise SystemExit(f"reward-verifier: invalid settings: {problems}") from None


if __name__ == "__main__":
    sys.exit(main())
