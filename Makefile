# Rebalance Planner: `make demo` and `make test` are all a fresh clone needs.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install java demo test lint bench clean

install: java $(STAMP)

# Re-install only when the pins or the project's metadata change.
$(STAMP): constraints.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt setuptools wheel
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-build-isolation -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

# Spark needs a JVM: install a headless Java 17 with apt when none is on PATH and we are root.
java:
	@command -v java >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	  else echo "java is missing: install a Java 17 runtime (openjdk-17-jre-headless)" >&2; exit 1; fi; }

demo: install
	$(BIN)/rebalance demo

lint: install
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest

bench: install
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .airflow lake .pytest_cache
