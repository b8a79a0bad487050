# The task runner. `make fast` before a commit (lint, types, pure tests: under a minute);
# `make test` for everything but the slow suites; `make all` is what CI runs (.ci/run).
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST := $(BIN)/pytest -q -p no:cacheprovider
# Pure tests are CPU-bound: two workers on two cores; the database suites wait on I/O: four.

.PHONY: fast test all lint types imports

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types:
	$(BIN)/mypy

imports:
	$(BIN)/lint-imports

fast: lint types imports
	$(PYTEST) -n 2 -m "not services and not slow"

test: lint types imports
	$(PYTEST) -n 4 -m "not slow"

all:
	bash .ci/run
