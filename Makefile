# What runs locally is what runs in CI: .ci/run calls `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SRC := $(wildcard verifier_service sandbox trainer_client reward_models tests bench deploy conftest.py setup.py)


INTEROP := .venv-interop
INTEROP_STAMP := $(INTEROP)/.installed
# The trainers the adapters are tested against (tests/interop, docs/trainers.md), pinned, in a virtualenv laid over
# .venv: a .pth file adds .venv's site-packages as a site directory (site.addsitedir, so the .pth files there apply
# too: the project's editable install), and torch, transformers and the project come from there. verl and OpenRLHF go
# in without their dependencies: their own pins (transformers < 5.11, flash-attn and deepspeed built from source,
# hydra's antlr 4.9) cannot be installed here and are not needed by the modules the adapters use.
INTEROP_NO_DEPS := verl==0.9.1 openrlhf==0.11.2 omegaconf==2.4.0 codetiming==1.4.0 pylatexenc==2.11
INTEROP_DEPS := ray==2.60.0 tensordict==0.10.0 verifiers==0.4.0

RAY := .venv-ray
RAY_STAMP := $(RAY)/.installed
# The `ray` extra (Ray Serve, pinned in pyproject.toml) in an overlay virtualenv laid over .venv like the one above,
# for the Ray tests (tests/ray) and bench/scale_ray.py. Apart from .venv-interop: that one holds the trainers.
RAY_EXTRA = $(shell $(BIN)/python -c 'import shlex, tomllib; print(*map(shlex.quote, tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["ray"]))')

.PHONY: system-deps pch install interop ray format lint typecheck test run bench all clean integration down

$(STAMP): pyproject.toml setup.py verifier_service/scoring/_repetition.c verifier_service/scoring/_arithmetic.c \
		verifier_service/scoring/instructions/_langdetect.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# [train] brings torch with its CUDA libraries (PyPI has no CPU-only Linux wheel): ~4 GB, ~1.5 min cold
	$(BIN)/python -m pip install --quiet -e '.[dev,train,procedural]'
	touch $(STAMP)

install: $(STAMP) system-deps pch

$(INTEROP_STAMP): $(STAMP) Makefile
	test -x $(INTEROP)/bin/python || $(PYTHON) -m venv $(INTEROP)
	$(BIN)/python -c 'import sysconfig; print("import site; site.addsitedir(%r)" % sysconfig.get_paths()["purelib"])' \
	  > "$$($(INTEROP)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-project.pth"
	$(INTEROP)/bin/python -m pip install --quiet --upgrade pip
	$(INTEROP)/bin/python -m pip install --quiet --no-deps $(INTEROP_NO_DEPS)
	$(INTEROP)/bin/python -m pip install --quiet $(INTEROP_DEPS)
	touch $(INTEROP_STAMP)

interop: $(INTEROP_STAMP)

# About 1 minute and 300 MB cold (ray's wheel, plus what Serve needs that .venv lacks).
$(RAY_STAMP): $(STAMP) pyproject.toml Makefile
	test -x $(RAY)/bin/python || $(PYTHON) -m venv $(RAY)
	$(BIN)/python -c 'import sysconfig; print("import site; site.addsitedir(%r)" % sysconfig.get_paths()["purelib"])' \
	  > "$$($(RAY)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-project.pth"
	$(RAY)/bin/python -m pip install --quiet --upgrade pip
	$(RAY)/bin/python -m pip install --quiet $(RAY_EXTRA)
	touch $(RAY_STAMP)

ray: $(RAY_STAMP)

# Operating-system packages the sandbox uses: bubblewrap (the local backend's isolation), g++ (its C++ programs) and
# debootstrap (the offline base image). Installed when missing and we are root; otherwise say what is missing and go
# on.
system-deps:
	@missing=""; command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v g++ >/dev/null || missing="$$missing g++"; \
	command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "warning: not installed:$$missing (needs root and apt-get); sandbox tests that need them skip"; fi; \
	fi

# bits/stdc++.h precompiled for the local backend's C++ programs with their flags (sandbox/pch.py), once per g++
# build: about 100 MB in /var/cache/verifier-sandbox/pch as root, else ~/.cache/verifier-sandbox/pch; a few seconds
# the first time, then nothing to do. Without g++ it says so; if it fails, C++ programs compile without it (about
# 1 s slower each), and a local executor that finds none builds it as it starts.
pch: $(STAMP) system-deps
	-$(BIN)/python -m sandbox.pch

format: install
	$(BIN)/ruff format $(SRC)
	$(BIN)/ruff check --fix $(SRC)

lint: install
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: install
	$(BIN)/mypy

# The suite, then the adapters against the real trainers' packages (the overlay's Python: tests/interop), then the
# verifier on a two-node Ray cluster (the ray overlay's Python: tests/ray).
test: install interop ray lint typecheck
	$(BIN)/python -m pytest
	$(INTEROP)/bin/python -m pytest tests/interop
	$(RAY)/bin/python -m pytest tests/ray

run: install
	$(BIN)/python -m verifier_service

bench: install
	$(BIN)/python bench/math_speed.py

all: format lint typecheck test

clean:
	rm -rf $(VENV) $(INTEROP) $(RAY) .pytest_cache .mypy_cache .ruff_cache

# The compose deployment's end-to-end test alone (it also runs in `make test`): builds the images, starts the
# project, scores, breaks things, tears down. Needs a Docker engine; skips without one.
integration: install
	$(BIN)/python -m pytest tests/integration

# `docker compose down`, then the sandbox containers that a killed verifier left behind: the service removes its
# own at shutdown and startup, but a SIGKILLed one cannot, and they are not compose's to remove. Sandboxes carry
# the label verifier.sandbox.pool=<project>-verifier-<replica> (deploy/entrypoint.py).
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
COMPOSE_PROJECT ?= $(or $(COMPOSE_PROJECT_NAME),$(shell sed -n 's/^COMPOSE_PROJECT_NAME=//p' .env 2>/dev/null | tail -n 1),$(shell basename "$(CURDIR)" | tr A-Z a-z | tr -cd 'a-z0-9_-'))
down:
	$(COMPOSE) -p $(COMPOSE_PROJECT) down --remove-orphans
	@docker ps -a --filter label=verifier.sandbox.pool --format '{{.ID}} {{.Label "verifier.sandbox.pool"}}' \
	  | awk -v pool='^$(COMPOSE_PROJECT)-verifier-[0-9]+$$' '$$2 ~ pool { print $$1 }' \
	  | xargs -r sh -c 'echo "removing $$# sandbox containers left by a killed verifier"; docker rm -f "$$@" >/dev/null' sh
