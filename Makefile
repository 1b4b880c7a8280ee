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

# ONNX Runtime C headers (API 21) for the native kernel library, from Debian's package.
ORT_HEADERS := third_party/onnxruntime/include/onnxruntime_c_api.h
$(ORT_HEADERS):
	sh scripts/fetch_ort_headers.sh

demo: $(VENV)/.runtime-installed $(ORT_HEADERS)
	$(BIN)/lossgrad-demo

test: $(VENV)/.test-installed $(ORT_HEADERS)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 -q

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .

clean:
	rm -rf build .pytest_cache .ruff_cache .hypothesis
