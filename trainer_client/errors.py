"""The client's one exception hierarchy, and the translation of every httpx error into it.

    VerifierError
    ├── VerifierUnavailableError     no answer came back (transient): a reward function returns None
    │   ├── VerifierConnectionError  could not connect, or the connection broke
    │   ├── VerifierTimeoutError     connected, but no answer in time
    │   ├── VerifierServerError      5xx or 429, still failing after the retries  (also a VerifierStatusError)
    │   └── VerifierNotReadyError    `wait_until_ready` ran out of time (nothing listening: a connection error)
    ├── VerifierStatusError          an HTTP error status: `.status_code`, `.detail` (the server's message)
    │   └── VerifierRequestError     4xx: the request is wrong; every retry would fail the same way
    ├── VerifierResponseError        an answer came back but does not follow the wire contract
    ├── VerifierConfigError          the client is set up wrongly (bad URL, unsupported scheme, misuse)
    └── VerifierUnjudgedError        the verifier answered, but could not judge an item (reward null): the trainer
                                     adapters raise it where the trainer cannot skip a sample

Errors are translated at the seam, `raise map_httpx_error(exc) from exc`, so the httpx error stays the cause.
"""

from __future__ import annotations

from typing import Any

import httpx


class VerifierError(Exception):
    """Base class of every error the trainer client raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Ray and multiprocessing hand exceptions between processes by pickling them. The default rebuilds them as
        # cls(*args), which fails for subclasses with keyword-only arguments (status_code=, verdicts=): Ray then
        # reports an UnserializableException instead of this error. Rebuild without calling __init__.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[VerifierError], args: tuple[Any, ...], state: dict[str, Any]) -> VerifierError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class VerifierUnavailableError(VerifierError):
    """The verifier gave no usable answer; trying again later may work."""


class VerifierConnectionError(VerifierUnavailableError):
    """Could not connect to the verifier, or the connection broke before the answer arrived."""


class VerifierTimeoutError(VerifierUnavailableError):
    """Connected, but the answer did not arrive within the client's timeout."""


class VerifierNotReadyError(VerifierUnavailableError):
    """The verifier did not report ready (`GET /readyz` -> 200) before the deadline."""


class VerifierStatusError(VerifierError):
    """An error that comes from an HTTP status: the status code and the server's message."""

    def __init__(self, message: str, *, status_code: int, detail: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.detail = detail


class VerifierServerError(VerifierStatusError, VerifierUnavailableError):
    """The verifier answered 5xx or 429 (busy) on every attempt."""


class VerifierRequestError(VerifierStatusError):
    """The verifier refused the request (4xx other than 429: invalid item, too large, bad API key).

    Not retried: the same request fails the same way. A training step should stop and show the message.
    """


class VerifierResponseError(VerifierError):
    """The verifier's answer does not follow the wire contract (not JSON, wrong shape, wrong count or order)."""


class VerifierConfigError(VerifierError):
    """The client is set up wrongly: an invalid URL, an unsupported scheme, or misuse of the httpx client."""


class VerifierUnjudgedError(VerifierError):
    """The verifier could not judge an item (its reward is null: an unparseable gold answer, no sandbox, a crashed
    worker). `verdicts` maps each component that scored null to its verdict. The message names them, never the
    completion."""

    def __init__(self, message: str, *, verdicts: dict[str, str]) -> None:
        super().__init__(message)
        self.verdicts = verdicts


# Every exception httpx defines, most specific first; `map_httpx_error` takes the first match.
_HTTPX_ERRORS: tuple[tuple[type[Exception], type[VerifierError]], ...] = (
    (httpx.ConnectTimeout, VerifierConnectionError),
    (httpx.TimeoutException, VerifierTimeoutError),  # read, write, pool
    (httpx.ConnectError, VerifierConnectionError),
    (httpx.NetworkError, VerifierConnectionError),  # read, write, close
    (httpx.RemoteProtocolError, VerifierConnectionError),  # the server hung up mid-answer
    (httpx.ProxyError, VerifierConnectionError),
    (httpx.LocalProtocolError, VerifierConfigError),
    (httpx.ProtocolError, VerifierConnectionError),
    (httpx.UnsupportedProtocol, VerifierConfigError),
    (httpx.TransportError, VerifierConnectionError),
    (httpx.DecodingError, VerifierResponseError),
    (httpx.TooManyRedirects, VerifierResponseError),
    (httpx.RequestError, VerifierConnectionError),
    (httpx.HTTPStatusError, VerifierError),  # refined by status below
    (httpx.HTTPError, VerifierError),
    (httpx.InvalidURL, VerifierConfigError),
    (httpx.CookieConflict, VerifierConfigError),
    (httpx.StreamError, VerifierConfigError),  # consumed / closed / not read: client misuse
)

# What a `try` around an httpx call must catch: everything above (InvalidURL, CookieConflict and StreamError are
# not HTTPError subclasses).
HTTPX_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx.InvalidURL, httpx.CookieConflict, httpx.StreamError)

# Connect errors are the only exceptions worth retrying: the request never reached the server.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (httpx.ConnectError, httpx.ConnectTimeout)


def status_error(status_code: int, detail: str | None, what: str, *, hint: str | None = None) -> VerifierError:
    """The error for an HTTP status that is not a success: 5xx/429 -> server error, other 4xx -> request error.
    `hint` (what to do about it) ends the message."""
    message = f"{what} -> HTTP {status_code}" + (f": {detail}" if detail else "") + (f"; {hint}" if hint else "")
    if status_code >= 500 or status_code == 429:
        return VerifierServerError(message, status_code=status_code, detail=detail)
    if status_code >= 400:
        return VerifierRequestError(message, status_code=status_code, detail=detail)
    return VerifierResponseError(f"{what} -> unexpected HTTP {status_code}")


def map_httpx_error(exc: Exception, what: str = "request to the verifier") -> VerifierError:
    """Translate an httpx exception into this package's hierarchy; the caller raises it `from exc`."""
    if isinstance(exc, httpx.HTTPStatusError):
        return status_error(exc.response.status_code, exc.response.text[:500] or None, what)
    for httpx_type, ours in _HTTPX_ERRORS:
        if isinstance(exc, httpx_type):
            return ours(f"{what} failed: {type(exc).__name__}: {exc}")
    return VerifierError(f"{what} failed: {type(exc).__name__}: {exc}")
