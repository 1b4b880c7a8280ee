# Two entry points: `make demo` and `make test`. Both create the virtual
# environment on first use and redo the install only when pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint bench clean wheel system-tools

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.runtime-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

# The demo runs every backend, so it installs the extras that hold their toolchains.
$(VENV)/.demo-installed: pyproject.toml $(VENV)/.runtime-installed
	$(BIN)/pip install --quiet -e '.[torch,iree,ascend]'
	touch $@

$(VENV)/.test-installed: pyproject.toml $(VENV)/.runtime-installed
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# ONNX Runtime C headers (API 21) for the native kernel library, from Debian's package.
ORT_HEADERS := third_party/onnxruntime/include/onnxruntime_c_api.h
$(ORT_HEADERS):
	sh scripts/fetch_ort_headers.sh

# Debian's mlir-22-tools, for the AscendNPU IR CPU runner and the mlir-opt checks.
system-tools:
	@sh scripts/fetch_system_tools.sh

demo: $(VENV)/.demo-installed $(ORT_HEADERS) system-tools
	$(BIN)/lossgrad-demo

# worksteal: a worker that has run its share takes tests queued behind the other worker's
# long one (the IREE matrix, the wheel builds) instead of waiting for the run to end.
test: $(VENV)/.test-installed $(ORT_HEADERS) system-tools
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n 2 --dist worksteal -q

# dist/: the sdist, and the platform wheel built from it (the ORT headers and the prebuilt
# kernel libraries for x86-64-v2/v3/v4 inside; scripts/build_hooks.py), checked by twine.
# --no-isolation builds with the test environment's setuptools, xDSL and onnx (offline).
wheel: $(VENV)/.test-installed $(ORT_HEADERS)
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/twine check --strict dist/*

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .

clean:
	rm -rf build dist .pytest_cache .ruff_cache .hypothesis
