#!/bin/sh
# Debian's mlir-22-tools: mlir-opt-22 checks that level-2 IR parses in upstream MLIR, and
# mlir-translate-22 builds the CPU runner of AscendNPU IR's kernels. Installed with apt-get
# when this user may (root, or sudo without a password); otherwise one line says what is
# missing and the steps that need it say so when they run.
if command -v mlir-opt-22 >/dev/null 2>&1 && command -v mlir-translate-22 >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get: install MLIR 22's mlir-opt and mlir-translate for the AscendNPU IR CPU runner"
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  as_root=""
elif sudo -n true >/dev/null 2>&1; then
  as_root="sudo -n"
else
  echo "mlir-22-tools is not installed and apt-get needs root: run 'sudo apt-get install mlir-22-tools' for the AscendNPU IR CPU runner"
  exit 0
fi
if $as_root apt-get update -qq && $as_root apt-get install -y -qq mlir-22-tools >/dev/null; then
  echo "installed mlir-22-tools"
else
  echo "could not install mlir-22-tools: the AscendNPU IR CPU runner and the mlir-opt checks need it"
fi
