"""A warm pool of sandboxes, each with a resident runner; one submission at a time per sandbox.

Leasing a sandbox is how concurrency is bounded: with `size` sandboxes, at most `size` submissions run, the rest wait
in FIFO order (the wall clock of a test starts inside the sandbox, so waiting here never causes a timeout). A sandbox
that misbehaved, was left mid-job (cancelled) or reached its reuse limit is destroyed and replaced in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

RETRY_DELAYS_S = (0.5, 1, 2, 5, 10, 30)


class SandboxUnavailable(Exception):
    """No sandbox can be had: the backend cannot start one."""


class Channel(Protocol):
    """A runner's stdin/stdout: JSON lines."""

    async def send(self, *parts: bytes) -> None:
        """One line, given in parts (written as they are: a megabyte part is never copied into a joined line)."""
        ...

    async def recv(self) -> bytes:
        """The next line, without its newline; EOFError when the runner is gone."""
        ...


class Sandbox(Protocol):
    @property
    def slot(self) -> int: ...

    @property
    def channel(self) -> Channel: ...

    async def destroy(self) -> None: ...


class Pool:
    def __init__(
        self, create: Callable[[int], Awaitable[Sandbox]], size: int, jobs_per_sandbox: int, name: str
    ) -> None:
        self._create, self.size, self._max_jobs, self._name = create, size, jobs_per_sandbox, name
        self._idle: asyncio.Queue[Sandbox] = asyncio.Queue()
        self._up: dict[int, Sandbox] = {}  # slot -> its sandbox, idle or leased
        self._jobs: dict[int, int] = {}
        self._starting: set[int] = set()
        self._retiring: set[Sandbox] = set()  # retired, not yet destroyed
        self._leased: set[Sandbox] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.replaced = 0  # retired (misbehaved, left mid-job, or reached jobs_per_sandbox) and started anew
        self.destroyed = 0  # gone: replaced, or at close
        self.failed_starts = 0
        self.last_error: str | None = None

    async def start(self) -> None:
        """Start every slot; return once all have come up or failed (failed slots keep retrying)."""
        await asyncio.gather(*(self._fill(slot, retry=False) for slot in range(self.size)))
        for slot in range(self.size):
            if slot not in self._up:
                self._spawn(self._fill(slot, retry=True))

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[Sandbox]:
        """A sandbox for one submission. Left early (an error, a cancellation), it may be mid-job: it is replaced."""
        sandbox = await self._acquire()
        self._leased.add(sandbox)
        keep = False
        try:
            yield sandbox
            keep = True
        finally:
            self._leased.discard(sandbox)
            if self._up.get(sandbox.slot) is sandbox:  # else it was retired while leased
                self._jobs[sandbox.slot] += 1
                if keep and self._jobs[sandbox.slot] < self._max_jobs and not self._closed:
                    self._idle.put_nowait(sandbox)
                else:
                    self.retire(sandbox)

    def retire(self, sandbox: Sandbox) -> None:
        """Destroy it (if it is still the slot's sandbox) and start its replacement in the background."""
        if self._up.get(sandbox.slot) is not sandbox:
            return
        del self._up[sandbox.slot]
        self._retiring.add(sandbox)
        self._starting.add(sandbox.slot)  # from now: requests wait for the replacement instead of failing
        self.replaced += 1
        self._spawn(self._replace(sandbox))

    async def _acquire(self) -> Sandbox:
        while True:
            if self._closed:
                raise SandboxUnavailable("the sandbox pool is closed")
            if not self._up and not self._starting:
                raise SandboxUnavailable(self.last_error or "no sandbox is running")
            with contextlib.suppress(TimeoutError):
                sandbox = await asyncio.wait_for(self._idle.get(), timeout=1.0)
                if self._up.get(sandbox.slot) is sandbox:
                    return sandbox

    async def _replace(self, old: Sandbox) -> None:
        await self._destroy(old)
        self._retiring.discard(old)
        await self._fill(old.slot, retry=True)

    async def _fill(self, slot: int, retry: bool) -> None:
        delays = itertools.chain(RETRY_DELAYS_S, itertools.repeat(RETRY_DELAYS_S[-1]))
        while not self._closed:
            self._starting.add(slot)  # while an attempt is under way, requests wait for it rather than fail
            try:
                sandbox = await self._create(slot)
            except Exception as exc:
                self.failed_starts += 1
                self.last_error = f"cannot start a {self._name} sandbox: {exc}"
                log.warning("%s%s", self.last_error, " (retrying)" if retry else "")
                if not retry:
                    return
                self._starting.discard(slot)
                await asyncio.sleep(next(delays))
                continue
            finally:
                self._starting.discard(slot)
            if self._closed:
                await self._destroy(sandbox)
                return
            self._up[slot], self._jobs[slot] = sandbox, 0
            self.last_error = None
            self._idle.put_nowait(sandbox)
            return

    async def _destroy(self, sandbox: Sandbox) -> None:
        self.destroyed += 1
        try:
            await sandbox.destroy()
        except Exception:
            log.exception("could not destroy a %s sandbox", self._name)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # The retired ones too: a replacement cancelled above may have left its old sandbox half destroyed.
        sandboxes, self._up, self._retiring = [*self._up.values(), *self._retiring], {}, set()
        await asyncio.gather(*(self._destroy(s) for s in sandboxes))

    def status(self) -> dict[str, Any]:
        busy = [s for s in self._leased if self._up.get(s.slot) is s]  # not one retired while leased
        return {
            "ready": bool(self._up),
            "pool_size": self.size,
            "up": len(self._up),
            "idle": len(self._up) - len(busy),
            "busy": len(busy),
            "starting": len(self._starting),
            "replaced": self.replaced,
            "destroyed": self.destroyed,
            "failed_starts": self.failed_starts,
            "last_error": self.last_error,
        }
