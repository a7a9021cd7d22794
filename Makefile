# Two commands for a fresh machine: `make run` and `make test` (see README.md).
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

RUN_STAMP  := $(VENV)/.run-installed
TEST_STAMP := $(VENV)/.test-installed

.PHONY: install install-dev run serve test test-fast lint browser clean soak

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(RUN_STAMP): requirements.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(TEST_STAMP): requirements.txt requirements-dev.txt $(RUN_STAMP)
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

install: $(RUN_STAMP)
install-dev: $(TEST_STAMP)

## make run: install, migrate, seed demo worlds + an admin, serve on http://$(HOST):$(PORT)
run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0
	$(BIN)/python manage.py seed_demo --site-url http://$(HOST):$(PORT)
	@echo "Serving Worldsite on http://$(HOST):$(PORT)/  (Ctrl-C to stop)"
	$(BIN)/daphne -b $(HOST) -p $(PORT) worldsite.asgi:application

## make test: install everything the suite needs and run it (the checks first: they are fast)
test: install-dev browser lint
	$(BIN)/python -m pytest

## make test-fast: the checks and every test that needs no browser and starts no server process
test-fast: install-dev lint
	$(BIN)/python -m pytest -m "not browser and not play"

## make soak: players come and go at random for 4 minutes, then the checks; prints JSON
soak: install-dev
	$(BIN)/python -m tools.soak --json

## make lint: style, formatting, import contracts and types (also the pre-commit hooks)
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

## Debian's chromium for the browser tests (never a browser download by a tool)
browser:
	@{ command -v chromium && command -v ip; } >/dev/null 2>&1 || { \
	  echo "Installing Debian chromium and iproute2 for the browser and WebRTC tests..."; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    chromium fonts-dejavu-core iproute2; }

clean:
	rm -rf $(VENV) var test-artifacts .pytest_cache .ruff_cache .mypy_cache .import_linter_cache
