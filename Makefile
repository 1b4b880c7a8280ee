# Two entry points: `make demo` and `make test`. Both create the virtual
# environment on first use and redo the install only when pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.runtime-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml $(VENV)/.runtime-installed
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.runtime-installed
	$(BIN)/lossgrad-demo

test: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 -q

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .

clean:
	rm -rf build .pytest_cache .ruff_cache .hypothesis
