"""The service image's entrypoint: join the Docker socket's group, drop root, name the sandbox pool, exec the CMD.

Started as root (compose.yaml does this), it looks up the group that owns the mounted Docker socket, and becomes
uid/gid 10000 with that group added, before anything else runs: the service itself never runs as root, and nobody
has to find the socket's group id by hand (it differs between hosts: the `docker` group is 999 on one, 105 on
another; root's group where the engine maps its user to root). Started as any other user (`docker run --user`), it
drops nothing.

Then, unless VERIFIER_SANDBOX__POOL_NAME is set, it names the sandbox pool after this container: under compose
`<project>-<service>-<replica number>`, in a swarm stack `<stack>_<service>.<slot>`, otherwise
`verifier-<container id>`. The name labels the sandbox containers this replica starts, and the service removes
the containers of its own name at startup and shutdown; so replicas of one project never remove each other's
sandboxes, a restarted or recreated replica removes what its killed predecessor left, and `make down` finds every
sandbox of a project by the name (its sandbox containers are named `<pool name>-sandbox-<i>`). Each replica also gets
its own range of sandbox uids (VERIFIER_SANDBOX__UID_BASE): process limits count per uid across all containers on a
host. Replicas of two projects on one engine get the same numbers: the service moves past a range that another
pool's running sandboxes use (sandbox/uids.py).

Stdlib, plus the service's venv once root is dropped: its `sandbox` package (the rule for pool names, the size of a
block of uids) and the `docker` SDK; run with `python -I`.
"""

from __future__ import annotations

import os
import re
import stat
import sys

SERVICE_UID = SERVICE_GID = 10000
FIRST_SANDBOX_UID = 10001
CONTAINER_ID = re.compile(r"/containers/([0-9a-f]{64})/")
PROJECT, SERVICE, NUMBER = (f"com.docker.compose.{k}" for k in ("project", "service", "container-number"))
SWARM_TASK = "com.docker.swarm.task.name"  # <stack>_<service>.<slot>.<task id>


def say(message: str) -> None:
    print(f"entrypoint: {message}", file=sys.stderr, flush=True)


def socket_path() -> str | None:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return host.removeprefix("unix://") if host.startswith("unix://") else None


def drop_root() -> None:
    """Become SERVICE_UID, keeping the Docker socket's group as a supplementary group."""
    groups: list[int] = []
    path = socket_path()
    if path is not None:
        try:
            info = os.stat(path)
        except OSError as exc:
            say(f"no Docker socket at {path} ({exc.strerror}): code cannot be scored until one is mounted")
        else:
            if stat.S_ISSOCK(info.st_mode) and info.st_gid != SERVICE_GID:
                groups.append(info.st_gid)
    os.setgroups(groups)
    os.setgid(SERVICE_GID)
    os.setuid(SERVICE_UID)
    if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (SERVICE_UID, SERVICE_UID, SERVICE_GID, SERVICE_GID):
        raise SystemExit("entrypoint: could not drop root")
    os.environ["HOME"] = "/nonexistent"
    say(f"running as uid {SERVICE_UID}, groups {groups or 'none'} (the Docker socket's)")


def own_container_id() -> str | None:
    """This container's id, from the bind mounts Docker makes for /etc/hostname and friends."""
    try:
        with open("/proc/self/mountinfo") as mounts:
            found = CONTAINER_ID.search(mounts.read())
    except OSError:
        return None
    return found.group(1) if found else None


def pool_identity() -> tuple[str, int] | None:
    """(pool name, replica number) for this container, or None when the engine cannot tell."""
    container_id = own_container_id()
    if container_id is None:
        return None
    try:
        import docker  # the service's dependency; imported late so that dropping root never waits on it

        client = docker.from_env(timeout=10)
        try:
            labels = client.api.inspect_container(container_id)["Config"]["Labels"] or {}
        finally:
            client.close()
    except Exception as exc:  # no engine, no permission, no such container: the service reports it
        say(f"cannot ask the Docker engine about this container: {exc}")
        return None
    if PROJECT in labels and SERVICE in labels:
        number = int(labels.get(NUMBER) or 1)
        name = f"{labels[PROJECT]}-{labels[SERVICE]}-{number}"
    elif SWARM_TASK in labels:  # a task that replaces a failed one keeps its slot, hence the pool name
        name = labels[SWARM_TASK].rsplit(".", 1)[0]
        slot = name.rsplit(".", 1)[-1]
        number = int(slot) if slot.isdigit() else 1
    else:
        number, name = 1, f"verifier-{container_id[:12]}"
    from sandbox.api import pool_name

    return pool_name(name), number


def name_pool() -> None:
    if os.environ.get("VERIFIER_SANDBOX_BACKEND", "docker") != "docker":
        return
    if "VERIFIER_SANDBOX__POOL_NAME" in os.environ:
        return
    identity = pool_identity()
    if identity is None:
        return
    name, number = identity
    os.environ["VERIFIER_SANDBOX__POOL_NAME"] = name
    from sandbox.uids import BLOCK  # sandbox uids per replica: the most sandboxes a pool may have

    os.environ.setdefault("VERIFIER_SANDBOX__UID_BASE", str(FIRST_SANDBOX_UID + (number - 1) * BLOCK))
    say(f"sandbox pool {name}, sandbox uids from {os.environ['VERIFIER_SANDBOX__UID_BASE']}")


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("entrypoint: no command to run")
    if os.getuid() == 0:
        drop_root()
    name_pool()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
