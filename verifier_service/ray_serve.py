"""The verifier as a Ray Serve application (the `ray` extra): `serve run verifier_service.ray_serve:build_app`, or the
same import path in a KubeRay RayService's `serveConfigV2`. docs/scale.md says when to use it and what it costs.

Each replica is the whole service on its node: the app of `create_app`, with settings from the same VERIFIER_*
variables, whose lifespan Serve runs, so the replica's math workers and sandbox pool (bubblewrap or Docker, on that
node) start and stop with it. One replica per node by default. Besides Serve's proxy, each replica listens on its
node's own address at VERIFIER_PORT (8088): a trainer that posts there, or spreads its batches over every node's URL
(the trainer client takes several), skips the proxy's hop, which costs small requests more than the scoring does.

No `from __future__ import annotations` here: Serve reads the builder's signature at run time.
"""

import asyncio
import ipaddress
import logging
import os
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import ray
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve import Application

from sandbox.uids import BLOCK as UID_BLOCK  # sandbox uids per replica: the most sandboxes a pool may have
from verifier_service.__main__ import server_config
from verifier_service.app import create_app, tune_collector
from verifier_service.settings import ENV_PREFIX, VerifierSettings

log = logging.getLogger(__name__)

FIRST_SANDBOX_UID = 20001  # above the compose replicas' blocks (10001 + 256 * n, deploy/entrypoint.py)
# uvloop, which Ray installs and Serve would run the replica on, cannot start the sandbox's processes as another
# user (the reason __main__ runs uvicorn with loop="asyncio").
REPLICA_ENV = {"RAY_USE_UVLOOP": "0"}


class RayServeArgs(BaseModel):
    """What `serve run verifier_service.ray_serve:build_app key=value ...` (or a RayService's `args`) may set.
    Everything else is a VERIFIER_* variable, as for `python -m verifier_service`."""

    model_config = ConfigDict(extra="forbid")  # `num_cpu=2` is a typo to report, not an argument to drop

    num_replicas: int | None = Field(None, ge=1, description="Default: one per node with num_cpus CPUs.")
    num_cpus: float = Field(1.0, gt=0, description="CPUs each replica reserves; its math workers and sandboxes.")
    max_replicas_per_node: int = Field(1, ge=1, description="More than one replica on a node share its CPUs.")
    max_ongoing_requests: int | None = Field(
        None,
        ge=1,
        description="Requests Serve's proxy sends a replica at once; default 2 per CPU. The proxy prefers the replica "
        "on its own node until that one has this many: more would wait inside one replica while another is idle.",
    )
    direct: bool = Field(True, description="Each replica also listens at <node address>:VERIFIER_PORT.")


def build_app(args: dict[str, Any] | RayServeArgs) -> Application:
    """The Serve application: the `Verifier` deployment with these options, settings from this process's VERIFIER_*
    variables (checked here, so a mistake fails in the driver rather than in every replica)."""
    options = RayServeArgs.model_validate(args)
    environ = {k: v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}
    VerifierSettings()  # fail fast: the replicas read the same variables
    num_replicas = options.num_replicas or count_nodes(options.num_cpus)
    deployment = Verifier.options(
        num_replicas=num_replicas,
        max_replicas_per_node=options.max_replicas_per_node,
        max_ongoing_requests=options.max_ongoing_requests or 2 * workers(options.num_cpus),
        ray_actor_options={"num_cpus": options.num_cpus, "runtime_env": {"env_vars": {**environ, **REPLICA_ENV}}},
    )
    return deployment.bind(num_cpus=options.num_cpus, direct=options.direct)


class VerifierReplica:
    """One replica: the service's app, built on the replica's node (`__serve_build_asgi_app__`, after __init__)."""

    def __init__(self, num_cpus: float = 1.0, direct: bool = True) -> None:
        self.num_cpus, self.direct = num_cpus, direct

    def __serve_build_asgi_app__(self) -> FastAPI:
        node_ip = ray.util.get_node_ip_address()
        context = serve.get_replica_context()
        local_rank = context.rank.local_rank if context.rank is not None else 0
        for name, value in replica_defaults(node_ip, local_rank, self.num_cpus).items():
            os.environ.setdefault(name, value)
        settings = VerifierSettings()
        app = create_app(settings)
        tune_collector()  # the replica's process serves this app only, as the CLI server's does
        if self.direct:
            serve_directly(app, settings)
        log.info("verifier replica on %s: sandbox pool %s", node_ip, settings.sandbox.pool_name)
        return app


# The deployment; `build_app` sets its options. (Not decorators: mypy ignores what a class decorator returns.)
Verifier = serve.deployment(name="Verifier")(serve.ingress()(VerifierReplica))


def replica_defaults(node_ip: str, local_rank: int, num_cpus: float) -> dict[str, str]:
    """VERIFIER_* defaults of one replica, for what the environment leaves unset.

    Listen on the node's own address; as many math workers and sandboxes as the CPUs Ray gave the replica (not the
    node's count, which `os.cpu_count` would give); a sandbox pool name and uid range of its own, so that replicas
    sharing a kernel or a Docker engine (several Ray nodes on one host, or several replicas on one node) never kill
    each other's sandboxes, nor share per-uid process limits.

    >>> defaults = replica_defaults("10.0.3.7", 0, 4)
    >>> defaults["VERIFIER_HOST"], defaults["VERIFIER_MATH_WORKERS"], defaults["VERIFIER_SANDBOX__UID_BASE"]
    ('10.0.3.7', '4', '21793')
    >>> replica_defaults("10.0.3.7", 1, 4)["VERIFIER_SANDBOX__POOL_NAME"]
    'ray-10.0.3.7-1'
    """
    count = str(workers(num_cpus))
    block = 256 * local_rank + ipaddress.ip_address(node_ip).packed[-1]  # a block per last byte of an address
    return {
        "VERIFIER_HOST": node_ip,
        "VERIFIER_MATH_WORKERS": count,
        "VERIFIER_SANDBOX__POOL_SIZE": count,
        "VERIFIER_SANDBOX__POOL_NAME": f"ray-{node_ip.replace(':', '-')}-{local_rank}",
        "VERIFIER_SANDBOX__UID_BASE": str(FIRST_SANDBOX_UID + UID_BLOCK * block),
    }


def workers(num_cpus: float) -> int:
    """Math workers (and sandboxes) for a replica with `num_cpus` CPUs: one per whole CPU, at least one."""
    return max(1, int(num_cpus))


def serve_directly(app: FastAPI, settings: VerifierSettings) -> None:
    """Also serve `app` at settings.host:settings.port, from the end of its start-up to the start of its shut-down.

    The listener lives inside the app's lifespan, which Serve runs on the replica's event loop: both paths share one
    runtime. The port is bound before anything else, so a port that is taken fails the replica with the reason. It is
    served as `python -m verifier_service` serves (`__main__.server_config`): the same header and body timeouts,
    connection cap, open-file limit and log filters, so idle connections cannot exhaust a replica either.
    """
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with inner(app):
            listener = bind(settings.host, settings.port)
            # The logs are Ray's and the lifespan is Serve's: uvicorn sets up neither.
            config = server_config(app, settings, lifespan="off", log_config=None, access_log=False)
            server = DirectServer(config)
            task = asyncio.create_task(server.serve(sockets=[listener]))
            log.info("serving directly on http://%s:%d", settings.host, settings.port)
            try:
                yield
            finally:
                server.should_exit = True
                await task
                listener.close()

    app.router.lifespan_context = lifespan


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port. IPPROTO_TCP, not 0 (`socket.create_server`): asyncio sets TCP_NODELAY only on
    connections of such a socket, and without it each answer waits ~40 ms for the client's delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
    except OSError:
        listener.close()
        raise
    return listener


class DirectServer(uvicorn.Server):
    """uvicorn without its signal handlers: the replica's process and its signals are Ray's."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def count_nodes(num_cpus: float) -> int:
    """Alive Ray nodes with at least `num_cpus` CPUs (at least 1). `serve run` calls the builder before it connects:
    then connect to the cluster it will use (RAY_ADDRESS, else the local one) for the count, and leave again."""
    if ray.is_initialized():
        return fitting_nodes(ray.nodes(), num_cpus)
    try:
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False, logging_level=logging.WARNING)
    except ConnectionError:
        return 1  # no cluster yet: `serve run` starts a one-node one
    try:
        return fitting_nodes(ray.nodes(), num_cpus)
    finally:
        ray.shutdown()


def fitting_nodes(nodes: list[dict[str, Any]], num_cpus: float) -> int:
    return max(1, sum(1 for node in nodes if node.get("Alive") and node["Resources"].get("CPU", 0) >= num_cpus))
