"""The generative judges of VERIFIER_JUDGES: an async client per judge for any OpenAI-compatible chat endpoint
(vLLM, SGLang, `transformers serve`, a hosted API), and the pooled resource (`resources.PARTS["judges"]`) that holds
them, probes them for /readyz and lists them for GET /v1/judges.

A request is `POST {base_url}/chat/completions {"model", "messages": [one user turn], "temperature": 0,
"max_tokens"}`; its answer's `choices[0].message.content` is the reply. Every failure is a value, never an exception
and never a reply: a call not done within the judge's `timeout_s` (connecting, sending, waiting and reading the whole
body: one deadline) is `Failure("judge_timeout")`; a connection refused or reset, an HTTP status other than 200, a
body over MAX_REPLY_BYTES (read no further) or not of that shape is `Failure("judge_error")`. At most `max_concurrency`
requests to a judge are in flight at once. The key (from the variable `api_key_env` names) is sent as a Bearer token,
a `user:password@` in the base URL as basic auth, and a query (`?key=`) as each request's parameters: none appears in
a log (httpx's INFO line per request included), an answer or an exception; /readyz, GET /v1/judges and the logs show
the base URL without userinfo or query.

Whether a judge answers is probed with `GET {base_url}/models` (no prompt is sent): once at start, in the
background (a judge that is down does not hold the start), then again when /readyz asks and the last word is older
than `PROBE_TTL_S`; every real call updates it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from reward_models.spec import shown_url
from verifier_service.settings import JudgeSettings, VerifierSettings

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 5.0
MAX_REPLY_BYTES = 4 * 2**20  # a chat completion's body at most: max_tokens 32,768 is about 130 kB of text
PROBE_TTL_S = 10.0


@dataclass(frozen=True)
class Failure:
    """Why a judge gave no reply: `judge_timeout` or `judge_error`, and a short reason (no key, no prompt)."""

    verdict: str
    reason: str


def endpoint(url: str) -> tuple[str, httpx.QueryParams, httpx.BasicAuth | None]:
    """The base URL's parts, each sent its own way: the URL without userinfo, query or fragment (what requests go
    to, and what is shown), the query's parameters (added to each request: a hosted API's `?key=`) and the userinfo
    as basic auth (percent-decoded). httpx logs each request's URL at INFO: the credentials are never in it.

    >>> bare, params, auth = endpoint("https://user:p%40ss@judge:8000/v1?key=k&v=#x")
    >>> bare, str(params), auth is not None
    ('https://judge:8000/v1', 'key=k&v=', True)
    """
    parts = urlsplit(url)
    auth = None
    if parts.username is not None or parts.password is not None:
        auth = httpx.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))
    bare = urlsplit(shown_url(url))._replace(query="", fragment="").geturl().rstrip("/")
    return bare, httpx.QueryParams(parts.query), auth


class _NoQuery(logging.Filter):
    """httpx's INFO line per request (`HTTP Request: POST URL ...`) without the URL's query: a judge's `?key=`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(arg, httpx.URL) and arg.query for arg in record.args):
            record.args = tuple(arg.copy_with(query=None) if isinstance(arg, httpx.URL) else arg for arg in record.args)
        return True


_NO_QUERY = _NoQuery()


class JudgeClient:
    """One judge: its settings, an httpx.AsyncClient and the semaphore that caps its requests in flight."""

    def __init__(self, name: str, settings: JudgeSettings, key: str | None) -> None:
        self.name, self.settings = name, settings
        self.shown, params, auth = endpoint(settings.base_url)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        limits = httpx.Limits(max_connections=settings.max_concurrency)
        self.client = httpx.AsyncClient(
            base_url=self.shown, params=params, auth=auth, headers=headers, timeout=settings.timeout_s, limits=limits
        )
        self.slots = asyncio.Semaphore(settings.max_concurrency)
        self.reachable: bool | None = None
        self.why: str | None = None  # why it is not reachable: a status or an exception's type, never a secret
        self.checked_at = 0.0
        self._probe: asyncio.Future[None] | None = None
        # why the last call was refused (401, 403) until a call is answered: a /models that answers without
        # checking the key must not turn the judge reachable again at every probe while every call is refused
        self._refused: str | None = None

    @classmethod
    def build(cls, name: str, settings: JudgeSettings) -> JudgeClient:
        key = None
        if settings.api_key_env is not None:
            key = os.environ.get(settings.api_key_env)
            if not key:  # names the variable, never a value
                raise RuntimeError(f"VERIFIER_JUDGES: judge {name!r}: {settings.api_key_env} is not set or empty")
        return cls(name, settings, key)

    async def ask(self, prompt: str) -> str | Failure:
        """The judge's reply to one user turn, or why there is none."""
        body = {
            "model": self.settings.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": self.settings.max_tokens,
        }
        async with self.slots:
            try:
                async with asyncio.timeout(self.settings.timeout_s):  # the whole call, not each httpx phase
                    async with self.client.stream("POST", "/chat/completions", json=body) as response:
                        if response.status_code != 200:
                            # a 5xx may be this prompt's (too long, say): the judge is up; a 401 or 403 is every call's
                            self._answered(response.status_code, "POST /chat/completions", up_on_5xx=True)
                            return Failure("judge_error", f"the judge answered HTTP {response.status_code}")
                        self._refused = None
                        content = await capped_body(response)
            except (TimeoutError, httpx.TimeoutException):
                self._heard(True)  # it may be up and slow; a refused connection says otherwise
                return Failure("judge_timeout", f"the judge did not answer within {self.settings.timeout_s:g}s")
            except httpx.HTTPError as exc:
                self._heard(False, type(exc).__name__)
                return Failure("judge_error", f"the judge could not be reached ({type(exc).__name__})")
        self._heard(True)
        if content is None:
            return Failure("judge_error", f"the judge's answer is over {MAX_REPLY_BYTES // 2**20} MiB")
        return reply_of(content)

    def _heard(self, reachable: bool, why: str | None = None) -> None:
        """The last word on the judge; a change to not reachable is logged once, not at every probe."""
        if not reachable and self.reachable is not False:
            log.warning("judge %s at %s cannot be reached (%s)", self.name, self.shown, why)
        self.reachable, self.why, self.checked_at = reachable, None if reachable else why, time.monotonic()

    def _answered(self, status: int, route: str, up_on_5xx: bool = False) -> None:
        """An HTTP answer: the judge is up, unless it refused the key or the credentials (401, 403: every call will
        fail) or, to a probe, failed itself (5xx)."""
        if status in (401, 403):
            self._heard(False, f"{route} answered {status}: the key or the credentials were refused")
            if route.startswith("POST"):
                self._refused = self.why
        elif status >= 500 and not up_on_5xx:
            self._heard(False, f"{route} answered {status}")
        else:
            self._heard(True)

    async def probe(self) -> None:
        """GET /models: whether the judge answers, without asking it anything. Its status says; the body is not read
        (a list of models could be of any size, or never end), and the whole probe has one deadline."""
        try:
            async with asyncio.timeout(min(self.settings.timeout_s, PROBE_TIMEOUT_S)):
                async with self.client.stream("GET", "/models") as response:
                    status = response.status_code
        except (TimeoutError, httpx.HTTPError) as exc:
            self._heard(False, f"GET /models: {type(exc).__name__}")
            return
        if self._refused is not None and status < 400:  # up, but the calls are refused: they are what counts
            self._heard(False, self._refused)
            return
        self._answered(status, "GET /models")

    def probe_if_stale(self) -> None:
        """Start a probe in the background when the last word on the judge is old and none is under way."""
        if self._probe is not None and not self._probe.done():
            return
        if time.monotonic() - self.checked_at >= PROBE_TTL_S:
            with contextlib.suppress(RuntimeError):  # asked from outside the service's loop: the cached word stands
                self._probe = asyncio.ensure_future(self.probe())

    def info(self) -> dict[str, Any]:
        """What /readyz and GET /v1/judges show: no key, the URL without credentials."""
        settings = self.settings
        return {
            "base_url": self.shown,
            "model": settings.model,
            "reachable": self.reachable,
            "why": self.why,
            "api_key": settings.api_key_env is not None,
            "max_concurrency": settings.max_concurrency,
            "timeout_s": settings.timeout_s,
            "max_tokens": settings.max_tokens,
            "context_chars": settings.context_chars,
        }

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)
        await self.client.aclose()


async def capped_body(response: httpx.Response) -> bytes | None:
    """The response's body, or None once it passes MAX_REPLY_BYTES (read no further: a judge that streams without end
    costs this much memory at most)."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
        return None
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():  # decoded: a compressed body is capped at its real size
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def reply_of(body: bytes) -> str | Failure:
    """`choices[0].message.content` of a chat completion's body, or judge_error."""
    try:
        content = json.loads(body)["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError):
        return Failure("judge_error", "the judge's answer is not a chat completion")
    if not isinstance(content, str):
        return Failure("judge_error", "the judge's answer has no text")
    return content


class Judges:
    """The judges of VERIFIER_JUDGES (`resources.PARTS["judges"]`). Always ready: a judge that cannot be reached does
    not stop the service (its items are null, judge_error); /readyz shows whether each answers."""

    def __init__(self, settings: dict[str, JudgeSettings]) -> None:
        self.settings = settings
        self.clients: dict[str, JudgeClient] = {}

    @classmethod
    def build(cls, settings: VerifierSettings, metrics: object) -> Judges:
        return cls(settings.judges)

    async def start(self) -> None:  # the clients need the loop: made here, not in build
        if any(urlsplit(judge.base_url).query for judge in self.settings.values()):
            logging.getLogger("httpx").addFilter(_NO_QUERY)  # one filter object: adding it twice keeps one
        self.clients = {name: JudgeClient.build(name, judge) for name, judge in self.settings.items()}
        for client in self.clients.values():
            client.probe_if_stale()

    async def close(self) -> None:
        await asyncio.gather(*(client.close() for client in self.clients.values()))

    def report(self) -> tuple[bool, dict[str, Any]]:
        for client in self.clients.values():
            client.probe_if_stale()
        return True, {name: client.info() for name, client in self.clients.items()}

    def waiting_for(self, shown: dict[str, Any]) -> str:
        return "the judges"  # never: judges do not hold readiness
