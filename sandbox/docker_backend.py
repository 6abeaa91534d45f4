"""The Docker backend: a warm pool of hardened containers, each with the resident runner as PID 1.

The only module that imports `docker`. Jobs go to the runner over the container's attached stdin/stdout (one socket
per container, held open), so a submission costs no container start and no `docker exec`.

Deliberately no `init=True`: Docker's init would be PID 1 and hold the container's stdin/stdout, and it is an
ordinary (dumpable) process of the sandbox uid, so any program could open /proc/1/fd/1 and write fake results to the
host, or read the next job from /proc/1/fd/0. The runner itself is PID 1 instead: it reaps orphans (init's job),
nothing inside can signal it (the kernel drops signals to a namespace's init that it has no handler for), and it is
non-dumpable, so its fds cannot be opened through /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container

from sandbox.api import SandboxConfig
from sandbox.executor import PooledExecutor

log = logging.getLogger(__name__)

POOL_LABEL = "verifier.sandbox.pool"
ROLE_LABEL, ROLE = "verifier.role", "sandbox-run"
STDOUT, STDERR = 1, 2
IMAGE_POLL_S = 2.0  # while the image is missing: how often to look for it again
MISSING_IMAGE = (
    "the sandbox image {image} does not exist; build it from the repository root: "
    "docker build -f sandbox/image/Dockerfile -t {image} . "
    "(no registry: scripts/offline-base-image.sh, then "
    "docker build -f sandbox/image/Dockerfile --build-arg BASE_IMAGE=verifier-base:offline -t {image} .)"
)


class AttachedChannel:
    """The runner's stdin and stdout over one attached socket; stdout arrives in Docker's multiplexed frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slot: int) -> None:
        self._reader, self._writer, self._slot = reader, writer, slot
        self._buf = bytearray()

    async def send(self, *parts: bytes) -> None:
        for part in (*parts, b"\n"):  # a line in parts: none is copied into one line
            self._writer.write(part)
        await self._writer.drain()

    async def recv(self) -> bytes:
        start = 0
        while (end := self._buf.find(b"\n", start)) < 0:
            start = len(self._buf)
            try:
                header = await self._reader.readexactly(8)
                payload = await self._reader.readexactly(int.from_bytes(header[4:8], "big"))
            except asyncio.IncompleteReadError:
                raise EOFError("the container's runner exited") from None
            if header[0] == STDOUT:
                self._buf += payload
            elif header[0] == STDERR:
                log.warning("sandbox %d: %s", self._slot, payload.decode(errors="replace").rstrip())
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        return line

    def close(self) -> None:
        self._writer.close()


class DockerSandbox:
    def __init__(self, slot: int, container: Container, channel: AttachedChannel) -> None:
        self.slot, self.container, self.channel = slot, container, channel

    async def destroy(self) -> None:
        self.channel.close()
        with contextlib.suppress(docker.errors.NotFound):
            await asyncio.to_thread(self.container.remove, force=True)


class DockerExecutor(PooledExecutor):
    """Executor over a pool of containers of `config.image` (see sandbox/image/)."""

    name = "docker"

    def __init__(self, config: SandboxConfig | None = None, client: docker.DockerClient | None = None) -> None:
        super().__init__(config)
        self._client = client
        self._engine_cpus = 1
        self._awaiting_image: asyncio.Task[None] | None = None

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            raise RuntimeError("DockerExecutor.start() has not run")
        return self._client

    async def start(self) -> None:
        try:
            if self._client is None:
                self._client = await asyncio.to_thread(docker.from_env)
            removed = await asyncio.to_thread(self.remove_containers)
            self._engine_cpus = int((await asyncio.to_thread(self.client.info)).get("NCPU") or 1)
        except docker.errors.DockerException as exc:
            self.pool.last_error = f"no Docker engine: {exc}"
            log.warning("%s", self.pool.last_error)
            return
        if removed:
            log.warning("removed %d sandbox containers left over from an earlier run", removed)
        if not await self._image_exists():
            # Said once, here; every sandbox start would fail alike. Sandboxes start once the image is built.
            self.pool.last_error = MISSING_IMAGE.format(image=self.config.image)
            log.error("%s", self.pool.last_error)
            self._awaiting_image = asyncio.ensure_future(self._start_once_built())
            return
        await super().start()

    async def _image_exists(self) -> bool:
        try:
            await asyncio.to_thread(self.client.images.get, self.config.image)
        except docker.errors.ImageNotFound:
            return False
        except Exception:  # not the image's fault (the engine went away?): starting sandboxes will say what is wrong
            return True
        return True

    async def _start_once_built(self) -> None:
        while not await self._image_exists():
            await asyncio.sleep(IMAGE_POLL_S)
        log.info("the sandbox image %s exists now: starting sandboxes", self.config.image)
        await super().start()

    async def close(self) -> None:
        if self._awaiting_image is not None:
            self._awaiting_image.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._awaiting_image
        await super().close()
        if self._client is not None:
            with contextlib.suppress(docker.errors.DockerException):
                await asyncio.to_thread(self.remove_containers)
            self._client.close()

    def status(self) -> dict[str, Any]:
        return {**super().status(), "isolation": "docker", "image": self.config.image, "warnings": []}

    def remove_containers(self) -> int:
        """Remove every container of this pool name (left by a crash, or at shutdown); return how many."""
        found = self.client.containers.list(all=True, filters={"label": f"{POOL_LABEL}={self.config.pool_name}"})
        for container in found:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
        return len(found)

    def uids_seen_in_use(self) -> dict[int, str]:
        """The uids the engine's running sandbox containers of other pools run as (other services' sandboxes, whose
        processes a service in a container of its own cannot see in /proc)."""
        found = self.client.containers.list(all=True, filters={"label": f"{ROLE_LABEL}={ROLE}"}, ignore_removed=True)
        seen: dict[int, str] = {}
        for container in found:
            if container.status in ("exited", "dead"):  # no process left to count
                continue
            pool = container.labels.get(POOL_LABEL)
            uid = str(container.attrs.get("Config", {}).get("User") or "").split(":")[0]
            if pool != self.config.pool_name and uid.isdigit():
                seen[int(uid)] = f"sandbox container {container.name} (pool {pool})"
        return seen

    def container_options(self, slot: int) -> dict[str, Any]:
        """How each container is hardened (also what the tests inspect)."""
        cfg, top = self.config, self.config.max_limits
        uid = self.uid(slot)  # its own uid: RLIMIT_NPROC counts per uid, across containers
        memory = f"{top.memory_mb + cfg.scratch_mb + 256}m"
        return {
            "name": f"{cfg.pool_name}-sandbox-{slot}",  # by the service's container name (deploy/entrypoint.py)
            "command": ["--serve", "--scratch", "/tmp"],
            "user": f"{uid}:{self.uid(0)}",
            "labels": {POOL_LABEL: cfg.pool_name, ROLE_LABEL: ROLE},
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,noexec,size={cfg.scratch_mb}m,nr_inodes=65536,mode=1777"},
            "shm_size": f"{64 << 20}",
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "pids_limit": top.max_processes + 16,
            "mem_limit": memory,
            "memswap_limit": memory,
            "nano_cpus": 1_000_000_000,
            "cpuset_cpus": str(slot % self._engine_cpus),  # its own CPU, as the local backend pins its sandboxes
            "ipc_mode": "private",
            "hostname": "sandbox",
            "environment": {"LANG": "C.UTF-8"},
            "init": False,
            "stdin_open": True,
            "tty": False,
        }

    async def create_sandbox(self, slot: int) -> DockerSandbox:
        try:
            container = await asyncio.to_thread(self._create_container, slot)
        except docker.errors.ImageNotFound:  # removed since start(): say how to build it again
            raise RuntimeError(MISSING_IMAGE.format(image=self.config.image)) from None
        sock: socket.socket | None = None
        channel: AttachedChannel | None = None
        try:
            sock = await asyncio.to_thread(self._attach, container)
            reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)
            channel = AttachedChannel(reader, writer, slot)
            await asyncio.to_thread(container.start)
            hello = json.loads(await asyncio.wait_for(channel.recv(), self.config.start_timeout_s))
            if not hello.get("ready") or not hello.get("pidns"):
                raise RuntimeError(f"the runner did not start as PID 1: {hello}")
            self.hello(hello)
        except BaseException:  # cancelled too (the pool closing): nothing of it may outlive the event loop
            if channel is not None:
                channel.close()
            elif sock is not None:
                sock.close()
            with contextlib.suppress(docker.errors.DockerException):
                await asyncio.to_thread(container.remove, force=True)
            raise
        return DockerSandbox(slot, container, channel)

    def _create_container(self, slot: int) -> Container:
        """The slot's container, under its name. A container of this pool holding the name (one whose removal
        failed, or a killed service's left since start-up) is removed first; one of another pool is left alone."""
        options = self.container_options(slot)
        try:
            return self.client.containers.create(self.config.image, **options)
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409 Conflict: the name is taken
                raise
        holder = self.client.containers.get(options["name"])
        if holder.labels.get(POOL_LABEL) != self.config.pool_name:
            raise RuntimeError(f"a container named {options['name']} exists and is not of this sandbox pool")
        holder.remove(force=True)
        return self.client.containers.create(self.config.image, **options)

    def _attach(self, container: Container) -> socket.socket:
        """A plain socket attached to stdin/stdout/stderr, before the container starts (so no output is missed)."""
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        raw: Any = self.client.api.attach_socket(container.id, params=params)
        inner = getattr(raw, "_sock", raw)  # a SocketIO over a unix or TCP socket
        return socket.socket(fileno=inner.detach())  # ours alone: the HTTP client can never reuse or close it
