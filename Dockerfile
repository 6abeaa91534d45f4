# The verifier service image. Build context: the repository root. compose.yaml builds it; by hand:
#   docker build -t reward-verifier .                                              # FROM python:3.12-slim
#   docker build --build-arg BASE_IMAGE=verifier-base:offline -t reward-verifier .   # no registry: see docs/deploy.md
# Two stages: the builder makes a virtual environment and pip-installs the project into it (not editable, no
# [train] extra; torch only with --build-arg VERIFIER_EXTRAS=models); the final stage is the base image plus that
# venv, a non-root user and the entrypoint. No compiler, no pip cache, no build tools in the final image: the builder
# compiles the project's C modules (setup.py: repetition's n-gram count, steps' claim reader, langdetect's detection),
# and the final stage copies the venv.
# Kept to what the classic builder understands (no BuildKit-only syntax): some engines here have no buildx.
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS builder
# PEM certificates to trust, besides the usual ones, while pip talks to the package index: for builds behind a
# TLS-inspecting proxy. Only the builder stage sees them; the final image does not carry them.
ARG PIP_CA_CERTS=""
ARG PIP_INDEX_URL=https://pypi.org/simple
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_INDEX_URL=${PIP_INDEX_URL} \
    PIP_DEFAULT_TIMEOUT=120 PATH=/opt/verifier/bin:${PATH}
WORKDIR /src

# A C compiler, and Python's headers where the base lacks them (the offline base: Debian's python3), for this stage.
RUN set -eu; \
    export DEBIAN_FRONTEND=noninteractive; \
    packages="gcc libc6-dev"; \
    include="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"; \
    if [ ! -f "$include/Python.h" ]; then packages="$packages python3-dev"; fi; \
    apt-get update -qq; \
    apt-get install -y -qq --no-install-recommends $packages >/dev/null; \
    rm -rf /var/lib/apt/lists/*

# A venv: the offline base's Python is Debian's, "externally managed". setuptools is the project's build backend
# (installed here once, so the project's own install below needs no network and no build isolation).
RUN set -eu; \
    python3 -m venv /opt/verifier; \
    if [ -n "$PIP_CA_CERTS" ]; then \
        cat "$(python -c 'import pip._vendor.certifi as c; print(c.where())')" > /tmp/pip-ca.pem; \
        printf '%s\n' "$PIP_CA_CERTS" >> /tmp/pip-ca.pem; \
    fi

# Dependencies first, from pyproject.toml alone: editing the code reuses this layer (and its downloads). With them
# the `procedural` extra (reasoning-gym, for the component of that name) and the extras named in VERIFIER_EXTRAS
# (spaces or commas): `models` puts torch and transformers in, for reward models in the service (VERIFIER_MODELS;
# PyPI's Linux torch is the CUDA build: the image grows by several GB; PIP_EXTRA_INDEX_URL can name a CPU-only index).
ARG VERIFIER_EXTRAS=""
ARG PIP_EXTRA_INDEX_URL=""
COPY pyproject.toml deploy/requirements.py /src/
RUN set -eu; \
    if [ -s /tmp/pip-ca.pem ]; then export PIP_CERT=/tmp/pip-ca.pem; fi; \
    if [ -n "$PIP_EXTRA_INDEX_URL" ]; then export PIP_EXTRA_INDEX_URL; else unset PIP_EXTRA_INDEX_URL; fi; \
    python requirements.py procedural $VERIFIER_EXTRAS > /tmp/requirements.txt; \
    pip install --quiet -r /tmp/requirements.txt 'setuptools>=77'

COPY README.md setup.py /src/
COPY verifier_service /src/verifier_service
COPY sandbox /src/sandbox
COPY trainer_client /src/trainer_client
COPY reward_models /src/reward_models
# --no-deps: the dependencies are above; the build tools leave the venv once the project is in. The check imports
# the installed package with its C modules (-P: not the copy in /src, the working directory), and reasoning-gym.
RUN set -eu; \
    pip install --quiet --no-deps --no-build-isolation /src; \
    pip uninstall --quiet --yes setuptools pip; \
    python -P -c 'import verifier_service.app, verifier_service.scoring._repetition, sandbox.docker_backend, \
        verifier_service.scoring._arithmetic, verifier_service.scoring.instructions._langdetect, \
        trainer_client, reasoning_gym'; \
    case " $(echo "$VERIFIER_EXTRAS" | tr , ' ') " in \
        *" models "*) python -P -c 'import reward_models.runtime, torch, transformers';; \
    esac

FROM ${BASE_IMAGE}
ARG BASE_IMAGE
# Debian packages for the local sandbox backend inside this container, where no Docker socket is (Kubernetes:
# deploy/k8s, docs/scale.md): SANDBOX_PACKAGES=bubblewrap ("bubblewrap g++" for C++ code items). Empty by default:
# under compose, code runs in the sandbox image's containers, and this image stays as lean as it was.
ARG SANDBOX_PACKAGES=""
LABEL org.opencontainers.image.title="reward-verifier" \
      org.opencontainers.image.description="Scores LLM completions (math, code, think format) for RL training" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      verifier.role="service"

# uid/gid 10000: below the sandbox's (10001 + slot), clear of the users a base image ships. No home, no shell.
RUN set -eu; \
    groupadd --gid 10000 verifier; \
    useradd --uid 10000 --gid 10000 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin verifier; \
    for tool in gcc cc c++ g++ clang tcc; do \
        if command -v "$tool" >/dev/null; then echo "base image has a compiler: $tool" >&2; exit 1; fi; \
    done; \
    if [ -n "$SANDBOX_PACKAGES" ]; then \
        export DEBIAN_FRONTEND=noninteractive; \
        apt-get update -qq; \
        apt-get install -y -qq --no-install-recommends $SANDBOX_PACKAGES >/dev/null; \
        apt-get clean; \
        rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log; \
    fi; \
    rm -rf /root/.cache /tmp/* /var/tmp/*

COPY --from=builder /opt/verifier /opt/verifier
COPY deploy/entrypoint.py /opt/verifier/entrypoint.py
# With g++ among SANDBOX_PACKAGES: bits/stdc++.h precompiled for the local backend's C++ programs (sandbox/pch.py:
# /var/cache/verifier-sandbox/pch, about 100 MB), which the service, as uid 10000, finds there.
RUN if command -v g++ >/dev/null; then /opt/verifier/bin/python -I -m sandbox.pch; fi

# Inside a container the service listens on every interface (compose publishes it on 127.0.0.1 only) and runs
# model-written code in sibling containers through the Docker socket (see docs/deploy.md for what that grants).
ENV PATH=/opt/verifier/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1 \
    VERIFIER_HOST=0.0.0.0 \
    VERIFIER_PORT=8088 \
    VERIFIER_SANDBOX_BACKEND=docker
EXPOSE 8088
WORKDIR /opt/verifier
USER 10000:10000

# Started as root (compose does, to reach the socket), the entrypoint joins the socket's group and drops to
# uid 10000 before the service starts; started as 10000 it only execs. See deploy/entrypoint.py.
ENTRYPOINT ["/opt/verifier/bin/python", "-I", "/opt/verifier/entrypoint.py"]
CMD ["/opt/verifier/bin/python", "-m", "verifier_service"]
