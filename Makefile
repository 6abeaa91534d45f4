# What runs locally is what runs in CI: .ci/run calls `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SRC := $(wildcard verifier_service sandbox trainer_client tests bench)

.PHONY: install format lint typecheck test run bench all clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# [train] brings torch with its CUDA libraries (PyPI has no CPU-only Linux wheel): ~4 GB, ~1.5 min cold
	$(BIN)/python -m pip install --quiet -e '.[dev,train]'
	touch $(STAMP)

install: $(STAMP)

format: install
	$(BIN)/ruff format $(SRC)
	$(BIN)/ruff check --fix $(SRC)

lint: install
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: install
	$(BIN)/mypy

test: install lint typecheck
	$(BIN)/python -m pytest

run: install
	$(BIN)/python -m verifier_service

bench: install
	$(BIN)/python bench/math_speed.py

all: format lint typecheck test

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
