# The two commands of the README. Each sets up what it needs on first use: the venv and packages (again whenever
# pyproject.toml changes) and, for the broker, the Kafka jars from Maven Central (cached in ~/.cache/ctxbudget).
# `make test` also installs the pinned Claude Code and Codex CLI from npm into that cache (tests/realtools/tools.py).
# `make test` also installs the system packages the tests need where missing (deploy/local/setup.sh: JVM, Maven,
# Chromium and a CJK font for the browser tests, Node.js and npm for the agent tools).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint schemas system

$(BIN)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

## run: the pipeline on embedded defaults (local Apache Kafka + embedded ClickHouse under ./var), until Ctrl-C
run: $(BIN)/.installed
	$(BIN)/ctxbudget run

## test: lint, then every test against the real local Apache Kafka and embedded ClickHouse
test: system $(BIN)/.installed
	$(BIN)/ctxbudget kafka fetch
	$(BIN)/python -m tests.realtools.tools
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

system:
	@deploy/local/setup.sh

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## schemas: regenerate schemas/json/ after changing a model
schemas: $(BIN)/.installed
	$(BIN)/python -m schemas.export
