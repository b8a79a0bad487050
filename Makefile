# The task runner. `make fast` before a commit (lint, types, pure tests: under a minute);
# `make test` for everything but the slow suites; `make all` is what CI runs (.ci/run).
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST := $(BIN)/pytest -q -p no:cacheprovider -n 2

.PHONY: fast test all lint types imports

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types:
	$(BIN)/mypy

imports:
	$(BIN)/lint-imports

fast: lint types imports
	$(PYTEST) -m "not services and not slow"

test: lint types imports
	$(PYTEST) -m "not slow"

all:
	bash .ci/run
