"""A pool of worker processes for the sympy work, with a hard deadline per task enforced from outside.

math-verify's own timeout is `signal.alarm`, which cannot interrupt C-level arithmetic (`9^{9^{9^9}}`) and does
not work off the main thread. Here every task runs in a worker process; when its deadline passes, the worker is
killed and replaced, and only that task gets a timeout. A worker that dies under a task costs that task
alone (`WorkerCrashed`); the pool refills in the background. The pool watches every worker's process, busy or
idle: one that dies while nothing is asked of it is replaced at once, not when the next task finds it dead.

Requests share the workers fairly (`owner`): a free worker goes to a request waiting for its first worker, else to the
waiting request that holds the fewest, in turn; and while a request waits with no worker, a group that has run for
GIVE_WAY_AFTER_S leaves its other tasks to a later worker once its current task ends. One request of absurd
expressions costs its own time, not everyone's.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import multiprocessing
import os
import select
import signal
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from multiprocessing import forkserver, resource_tracker
from multiprocessing.connection import Connection
from typing import Any

log = logging.getLogger(__name__)

_PRELOAD = ["verifier_service.scoring.worker", "math_verify", "sympy", "numpy"]
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
# While another request waits with no worker, a group that has run this long leaves its other tasks for later. Groups
# of ordinary answers end well before it, so one client's concurrent chunks do not split each other's groups.
GIVE_WAY_AFTER_S = 0.5
# The pool asks a worker to give way; it does so at the first task boundary past the time above, or when its group
# ends, and answers GAVE_WAY once either way.
_GIVE_WAY = "give way"
_GAVE_WAY = "gave way"
_LEFT = object()  # what the pool reads from a worker that gave way (no task's result can be it)


class TaskTimeout(Exception):
    """The task ran past its deadline; its worker was killed."""


class WorkerCrashed(Exception):
    """The worker died (or was killed) while running the task."""


class PoolClosed(Exception):
    """The pool is shut down."""


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when its parent (the forkserver) dies.

    Without it, a worker busy in C-level arithmetic (which holds the GIL, so no watchdog thread can run)
    outlives a killed service until its task ends, which for `9^{9^{9^9}}` is never. The forkserver exits
    when the last holder of its "alive" pipe is gone; multiprocessing hands each child a copy, so the worker
    closes its copy and the service process is left as the only holder.
    """
    alive_fd = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_alive_fd", None)
    if isinstance(alive_fd, int):
        with contextlib.suppress(OSError):
            os.close(alive_fd)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # Not dumpable: a process of the same user (a scorer's throwaway fork, scoring/forked.py) cannot open this
        # worker's /proc/<pid>/mem and rewrite it without CAP_SYS_PTRACE.
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the worker ends at its next recv() instead
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _worker_main(conn: Connection, fn_path: str, give_way_after_s: float) -> None:
    """Worker process loop: receive a list of tasks, run them in order, send each outcome as it is ready."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent shuts us down
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # so does a stop signal sent to the group: see _start_forkserver
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    module_name, _, fn_name = fn_path.partition(":")
    module = __import__(module_name, fromlist=[fn_name])
    fn: Callable[[Any], Any] = getattr(module, fn_name)
    # sympy and the rest preloaded live as long as the worker: out of the collector's sight, a full collection walks
    # only what the tasks made (otherwise a large text chunk triggers collections over all of sympy: 2x its time).
    gc.freeze()
    asked = select.poll()  # cheaper than conn.poll() between tasks (2 us, not 20)
    asked.register(conn.fileno(), select.POLLIN)
    try:
        conn.send(("ready", os.getpid()))
    except OSError:  # the pool closed while this worker started (a replacement): nobody is left to serve
        return
    while True:
        try:
            tasks = conn.recv()
        except (EOFError, OSError):
            return
        if tasks == _GIVE_WAY:  # asked while its group ran, which ended first: it is free already
            conn.send((_GAVE_WAY, None))
            continue
        started = time.monotonic()
        for index, task in enumerate(tasks):
            # Only a request to give way comes in while a group runs; it stays unread until the group is old enough.
            if index and time.monotonic() - started >= give_way_after_s and asked.poll(0):
                conn.recv()
                conn.send((_GAVE_WAY, None))
                break
            try:
                outcome = ("ok", fn(task))
            except Exception as exc:  # reported to the parent as an internal error, the worker lives on
                outcome = ("error", f"{type(exc).__name__}: {exc}"[:500])
            conn.send(outcome)


def _start_forkserver() -> None:
    """Start multiprocessing's forkserver, if it is not running, with SIGTERM blocked; the workers it forks keep that.

    A stop signal sent to the whole process group (systemd's default, `kill -- -PGID`) is the service's to act on:
    it shuts down and closes the pool. A forkserver that took it would die at once and take the idle workers with it
    (_die_with_parent), and the pool would replace them while it shuts down. The resource tracker unblocks SIGTERM in
    the thread that starts it, so it is started first.
    """
    resource_tracker.ensure_running()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


class _Worker:
    def __init__(self, ctx: Any, fn_path: str, give_way_after_s: float) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_worker_main, args=(child, fn_path, give_way_after_s), daemon=True)
        _start_forkserver()
        self.process.start()
        child.close()
        self.busy = False  # a task of run_group holds it (from when the pool gives it to one)
        self.exited = False  # its process ended (seen by the pool's exit watch)
        self.owner: Hashable = None  # whose tasks it runs while busy
        self.left = 0  # tasks of its group not finished yet
        self.giving_way = False  # asked to leave the rest of its group to another worker

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


def _waits(waiting: deque[asyncio.Future[_Worker]]) -> bool:
    """Whether an owner's queue holds a wait that was not cancelled."""
    return any(not waiter.done() for waiter in waiting)


async def _readable(conn: Connection, timeout: float | None) -> bool:
    """Wait until conn has data (or EOF) without blocking the event loop. False on timeout."""
    if conn.poll():
        return True
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    fd = conn.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await asyncio.wait_for(ready, timeout)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)


class WorkerPool:
    """`size` worker processes running `fn_path` ("module:function") on one task at a time each."""

    def __init__(
        self, size: int, fn_path: str, *, start_timeout_s: float = 60.0, give_way_after_s: float = GIVE_WAY_AFTER_S
    ) -> None:
        self.size = size
        self.fn_path = fn_path
        self.start_timeout_s = start_timeout_s
        self.give_way_after_s = give_way_after_s
        self.restarts = 0
        self._ctx = multiprocessing.get_context("forkserver")
        self._idle: deque[_Worker] = deque()
        self._all: set[_Worker] = set()
        self._refills: set[asyncio.Task[None]] = set()
        self._closed = False
        # Groups waiting for a worker, by owner: owners not served yet in the order they came, then the others in turn.
        self._fresh: dict[Hashable, deque[asyncio.Future[_Worker]]] = {}
        self._turns: dict[Hashable, deque[asyncio.Future[_Worker]]] = {}
        self._held: Counter[Hashable] = Counter()  # workers each owner holds now

    @property
    def ready(self) -> bool:
        return not self._closed and len(self._all) == self.size and all(w.process.is_alive() for w in self._all)

    def pids(self) -> list[int]:
        """The pids of the workers alive now (one that died is left out even before its replacement starts)."""
        return sorted(w.pid for w in self._all if w.pid is not None and w.process.is_alive())

    async def start(self) -> None:
        self._ctx.set_forkserver_preload(_PRELOAD)
        workers = await asyncio.gather(*(self._spawn() for _ in range(self.size)))
        for worker in workers:
            self._hand_on(worker)

    async def _spawn(self) -> _Worker:
        worker = await asyncio.to_thread(_Worker, self._ctx, self.fn_path, self.give_way_after_s)
        if not await _readable(worker.conn, self.start_timeout_s):
            worker.kill()
            raise RuntimeError(f"a worker did not start within {self.start_timeout_s}s")
        try:
            worker.conn.recv()  # ("ready", pid)
        except (EOFError, OSError):
            worker.kill()
            raise RuntimeError(
                "a math worker exited while it started (its error is printed above). A script that starts the "
                "verifier in its own process must do so under `if __name__ == '__main__':`, as with multiprocessing: "
                "each worker imports the script's main module again."
            ) from None
        self._all.add(worker)
        self._watch(worker)
        return worker

    def _watch(self, worker: _Worker) -> None:
        """Replace the worker as soon as its process ends, whatever it was doing (its sentinel becomes readable)."""
        loop = asyncio.get_running_loop()
        loop.add_reader(worker.process.sentinel, self._on_exit, worker)

    def _on_exit(self, worker: _Worker) -> None:
        """A worker's process ended. An idle one is replaced now; a busy one by its task, which reads the end of
        its pipe and reports `WorkerCrashed` (killing it here would close that pipe under the task's feet)."""
        asyncio.get_running_loop().remove_reader(worker.process.sentinel)
        worker.exited = True
        if worker in self._all and not worker.busy:
            log.warning("math worker %s died while idle; starting a replacement", worker.pid)
            self._replace(worker)

    def _retire(self, worker: _Worker) -> bool:
        """Stop watching the worker and kill it; False if that was done already."""
        if worker not in self._all:
            return False
        if not worker.exited:
            asyncio.get_running_loop().remove_reader(worker.process.sentinel)
        self._all.discard(worker)
        with contextlib.suppress(ValueError):
            self._idle.remove(worker)
        worker.kill()
        return True

    def _replace(self, worker: _Worker) -> None:
        """Kill a worker and start its replacement in the background; once per worker (the exit watch and a task
        that found it dead may both ask)."""
        if not self._retire(worker):
            return
        self.restarts += 1
        if self._closed:
            return
        task = asyncio.get_running_loop().create_task(self._refill())
        self._refills.add(task)
        task.add_done_callback(self._refills.discard)

    async def _refill(self) -> None:
        try:
            worker = await self._spawn()
        except Exception:
            log.exception("could not start a replacement worker; retrying in 1s")
            await asyncio.sleep(1)
            if not self._closed:
                await self._refill()
            return
        if self._closed:
            worker.kill()
        else:
            self._hand_on(worker)

    async def run(self, task: Any, *, timeout_s: float, owner: Hashable = None) -> Any:
        """Run one task; raise TaskTimeout, WorkerCrashed or RuntimeError (the task raised) on failure."""
        [outcome] = await self.run_group([task], timeout_s=timeout_s, owner=owner)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def run_group(self, tasks: Sequence[Any], *, timeout_s: float, owner: Hashable = None) -> list[Any]:
        """Run tasks in order on one worker (sharing its caches); one outcome per task, exceptions as values.

        `owner` says whose tasks these are (one request: its groups share the workers fairly with other owners');
        None is an owner of its own. Each task's deadline counts from when the worker starts it (when the previous
        result arrived). A task that times out or kills its worker gets TaskTimeout / WorkerCrashed; the tasks after
        it run on another worker, so one bad task costs only itself. So do the tasks left when the worker is asked
        to give way to another owner's waiting tasks.
        """
        owner = object() if owner is None else owner
        outcomes: list[Any] = []
        pending = list(tasks)
        while pending:
            if self._closed:
                raise PoolClosed("the worker pool is shut down")
            worker = await self._acquire(owner)
            healthy = False
            try:
                healthy = await self._run_on(worker, pending, outcomes, timeout_s)
            finally:
                # A worker that timed out, died, or was abandoned mid-task (cancellation) is never reused.
                self._give_back(worker, healthy)
        return outcomes

    async def _run_on(self, worker: _Worker, pending: list[Any], outcomes: list[Any], timeout_s: float) -> bool:
        """Run the pending tasks on the worker until they are done, one fails it, or it gives way; move each
        finished task from `pending` to `outcomes`. True when the worker can serve again."""
        if worker not in self._all:  # retired while it was handed over (the pool closed)
            return False
        worker.left = len(pending)
        try:
            worker.conn.send(pending)
        except OSError:  # it died while idle: these tasks never ran, so they go to another worker
            return False
        while pending:
            outcome = await self._next_outcome(worker, timeout_s)
            if outcome is _LEFT:
                return True
            outcomes.append(outcome)
            pending.pop(0)
            worker.left = len(pending)
            if isinstance(outcome, (TaskTimeout, WorkerCrashed)):
                return False
        # Asked to give way as it started its last task: its answer comes now, before the next group's results.
        return not worker.giving_way or await self._next_outcome(worker, timeout_s) is _LEFT

    async def _acquire(self, owner: Hashable) -> _Worker:
        """A worker for one group of `owner`'s tasks: an idle one, or the first the fair order gives it."""
        if self._idle and not (self._fresh or self._turns):
            worker = self._idle.popleft()
            self._take(worker, owner)
            return worker
        waiter: asyncio.Future[_Worker] = asyncio.get_running_loop().create_future()
        queues = self._turns if owner in self._turns or self._held[owner] else self._fresh
        queues.setdefault(owner, deque()).append(waiter)
        self._share()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._give_back(waiter.result(), True)  # handed a worker as it was cancelled: pass it on
            else:
                self._forget(owner, waiter)
            raise

    def _give_back(self, worker: _Worker, healthy: bool) -> None:
        """A group is done with the worker: to the next group if it can serve again, else replaced."""
        self._release(worker)
        if healthy and not worker.exited and worker in self._all:
            self._hand_on(worker)
        else:
            self._replace(worker)

    def _take(self, worker: _Worker, owner: Hashable) -> None:
        worker.busy, worker.owner, worker.left, worker.giving_way = True, owner, 0, False
        self._held[owner] += 1

    def _release(self, worker: _Worker) -> None:
        worker.busy = False
        self._held[worker.owner] -= 1
        if self._held[worker.owner] <= 0:
            del self._held[worker.owner]
        worker.owner = None  # an idle worker does not keep the request alive (nor what components keep for it)

    def _forget(self, owner: Hashable, waiter: asyncio.Future[_Worker]) -> None:
        for queues in (self._fresh, self._turns):
            if waiter in queues.get(owner, ()):
                queues[owner].remove(waiter)
                if not queues[owner]:
                    del queues[owner]

    def _hand_on(self, worker: _Worker) -> None:
        """Give a free worker to the next waiting group in the fair order, or keep it idle.

        A group whose wait was cancelled (its batch's deadline, a client that went away) stays queued until its task
        runs again and forgets it, which may be after another group hands its worker on in the same loop turn; such a
        wait is passed over (and dropped), so the worker goes to a group that still waits."""
        while (owner := self._next_owner()) is not None:
            queues = self._fresh if owner in self._fresh else self._turns
            waiting = queues.pop(owner)
            while waiting and waiting[0].done():
                waiting.popleft()
            if not waiting:
                continue
            waiter = waiting.popleft()
            if _waits(waiting):
                self._turns[owner] = waiting  # its next group waits for its turn, behind the others
            self._take(worker, owner)
            waiter.set_result(worker)
            return
        self._idle.append(worker)

    def _next_owner(self) -> Hashable | None:
        """The owner whose group gets the next free worker: the first that has had none yet, else the first in turn
        among those holding the fewest workers now."""
        if self._fresh:
            return next(iter(self._fresh))
        fewest: tuple[int, Hashable] | None = None
        for owner in self._turns:
            held = self._held[owner]
            if fewest is None or held < fewest[0]:
                fewest = (held, owner)
                if not held:
                    break
        return None if fewest is None else fewest[1]

    def _share(self) -> None:
        """Cap a request's share while others wait: for each waiting owner that holds no worker, a worker with tasks
        after its current one is asked to give way (once its group is GIVE_WAY_AFTER_S old; the tasks it leaves wait
        for another worker), first those of the owner that keeps the most."""
        busy = [w for w in self._all if w.busy and not w.exited]
        asked = sum(w.giving_way for w in busy)
        candidates = [w for w in busy if not w.giving_way and w.left > 1]
        if not candidates:
            return
        # An owner whose waits were all cancelled (its task has not run since to forget them) waits for nothing.
        starving = sum(_waits(waiting) for waiting in self._fresh.values()) + sum(
            _waits(waiting) for owner, waiting in self._turns.items() if not self._held[owner]
        )
        keeps = Counter(w.owner for w in busy if not w.giving_way)
        candidates.sort(key=lambda w: (keeps[w.owner], w.left), reverse=True)
        for worker in candidates[: max(0, starving - asked)]:
            with contextlib.suppress(OSError):  # it died: its task reports that, and it gives its place that way
                worker.conn.send(_GIVE_WAY)
            worker.giving_way = True

    @staticmethod
    async def _next_outcome(worker: _Worker, timeout_s: float) -> Any:
        try:
            if not await _readable(worker.conn, timeout_s):
                return TaskTimeout(f"no result within {timeout_s}s")
            status, value = worker.conn.recv()
        except (EOFError, OSError) as exc:
            crashed = WorkerCrashed("the worker died while scoring this item")
            crashed.__cause__ = exc
            return crashed
        if status == _GAVE_WAY:
            return _LEFT
        return RuntimeError(value) if status == "error" else value

    async def close(self) -> None:
        self._closed = True
        for task in list(self._refills):
            task.cancel()
        for queues in (self._fresh, self._turns):
            for waiting in queues.values():
                for waiter in waiting:
                    if not waiter.done():  # a cancelled wait stays queued until its task runs again
                        waiter.set_exception(PoolClosed("the worker pool is shut down"))
            queues.clear()
        for worker in list(self._all):
            self._retire(worker)
