# Two commands on a fresh machine: `make run` and `make test`. Both create .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PORT ?= 8321

.PHONY: run test lint format bench build

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	PORT=$(PORT) $(PY) functions/local/server.py

test: $(STAMP)
	$(PY) -m pytest -n 2 tests

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/cfn-lint template.yaml

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(STAMP)
	$(PY) bench/cold_start.py
	$(PY) bench/turn_overhead.py
	$(PY) bench/cost.py

build:
	sam build
