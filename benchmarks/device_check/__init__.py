"""The device check: level 2 compiled by IREE here, run and timed on a GPU machine that has
no compiler, no xDSL and no package registry (docs/device-check.md).

Two phases, one bundle folder between them:

* `prepare` (this machine: xDSL, iree-base-compiler, pip) compiles the benchmark set and the
  example model's signatures, records what the numpy reference gives for every case, and
  downloads the IREE runtime wheel (prepare.py);
* `run` (the device: numpy, torch, the working tree, the carried wheels) installs the wheel
  into a scratch folder, checks every case against reference.py under the CPU tests'
  tolerance and times it beside PyTorch's autograd backward and a device copy (run.py).

The modules that `run` imports need neither xDSL nor IREE's compiler: only numpy,
ml_dtypes, `lossgrad_compiler.spec` / `reference`, the tests' tolerance helpers, and
(imported when it runs) iree.runtime and torch."""
