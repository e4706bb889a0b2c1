# Two commands on a fresh machine: `make run` and `make test`. Both create .venv when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PORT ?= 8321

# The SAM CLI: the one on PATH, else one installed from PyPI into its own virtualenv (its pinned
# dependencies would clash with the project's).
SAM_VENV := $(VENV)/sam-cli
SAM ?= $(shell command -v sam 2>/dev/null || echo $(SAM_VENV)/bin/sam)

.PHONY: run invoke keys test lint format bench build docs

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The server prints its one-line banner (or one line saying what is wrong), not this command.
run: $(STAMP)
	@PORT=$(PORT) $(PY) functions/local/server.py

# One event through one function of template.yaml, against the AWS endpoint of `make run` on
# $(PORT) (or AWS_ENDPOINT_URL): make invoke EVENT=events/agents/get_agent.json
# [FUNCTION=AgentsFunction] [BUILD_DIR=.aws-sam/build] [LAYER_DIR=...]
invoke: $(STAMP)
	@$(PY) functions/local/invoke.py --port $(PORT) $(if $(FUNCTION),--function $(FUNCTION)) \
		$(if $(BUILD_DIR),--build-dir $(BUILD_DIR)) $(if $(LAYER_DIR),--layer-dir $(LAYER_DIR)) \
		$(EVENT)

# Callers' Bearer keys (README "Authentication"): make keys ARGS="--stack <stack> create acme",
# ARGS="--local list acme" (the server of LOCAL_AUTH=keys make run), ARGS="... revoke acme <key id>".
keys: $(STAMP)
	@$(PY) scripts/api_keys.py $(ARGS)

test: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache --no-logo
	$(PY) -m pytest -n 2 tests

# The documentation site (mkdocs.yml, docs/) into site/; a broken link or page fails it.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/cfn-lint template.yaml
	$(VENV)/bin/lint-imports --no-cache --no-logo

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(STAMP)
	$(PY) bench/cold_start.py
	$(PY) bench/turn_overhead.py
	$(PY) bench/session_read.py
	$(PY) bench/vectors.py
	$(PY) bench/cost.py
	$(PY) bench/stream_events.py
	$(PY) bench/cpu_profile.py
	$(PY) bench/instructions.py
	$(PY) bench/cpu_per_turn.py
	$(PY) bench/lambda_share.py --paced
	$(PY) bench/tls_context.py

$(SAM_VENV)/bin/sam:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet aws-sam-cli

# Every resource builds with BuildMethod makefile (template.yaml): the layer cross-builds for
# arm64/python3.12 with pip, so neither python3.12 nor a container is needed.
build: $(STAMP) $(SAM)
	PYTHON=$(abspath $(PY)) BUILD_LAYER=$(abspath layers/agents_core/build_layer.py) \
		SAM_CLI_TELEMETRY=$${SAM_CLI_TELEMETRY:-0} $(SAM) build
	$(PY) layers/agents_core/build_layer.py --report .aws-sam/build/AgentsCoreLayer
