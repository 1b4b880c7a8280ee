"""Running what IREE compiled: `load` for a module on disk (the modules of signatures that
evaluation/iree.py builds included), and `session` for a whole model compiled by
`lossgrad-compile --target iree`.

IREE checks static sizes and ranks but not that dynamic sizes agree, so every function the
IREE target exports compares them before it computes (backends/iree/guards.py): a module
run through `load` or `session` refuses a mismatch with the same error instead of reading
past a buffer.
A target outside [0, C) of a classification node raises TARGET_RANGE (161002) the same way:
the compiled module returns the count, which both `load` and `session` read.
IREE's CPU runtime flushes subnormal inputs and results to zero (its worker threads set
FTZ/DAZ); everything else follows docs/operators.md."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lossgrad_compiler import spec
from lossgrad_compiler.backends.iree.checks import CHECKS_KEY, FunctionChecks
from lossgrad_compiler.backends.iree.model_checks import raise_failed
from lossgrad_compiler.backends.iree.options import iree_module
from lossgrad_compiler.backends.iree.whole_model import INTERFACE_KEY, ModelInterface
from lossgrad_compiler.errors import BroadcastError

DEVICES = ("local-task", "local-sync")


class LoadedModule:
    """A compiled module in its own IREE context: its functions by exported name."""

    def __init__(self, path: str | Path, device: str = "local-task") -> None:
        if device not in DEVICES:
            raise ValueError(f"unknown IREE CPU device '{device}' (one of {', '.join(DEVICES)})")
        rt = iree_module("iree.runtime")
        self.config = rt.Config(device)
        self.context = rt.SystemContext(config=self.config)
        self.context.add_vm_module(rt.VmModule.mmap(self.config.vm_instance, str(path)))
        self.functions = self.context.modules.module
        self._checks: dict[str, FunctionChecks | None] = {}

    @property
    def names(self) -> list[str]:
        return [n for n in self.functions.vm_module.function_names if not n.startswith("__")]

    def reflection(self, name: str) -> dict[str, str]:
        """The function's `iree.reflection` entries."""
        return dict(self.functions[name].vm_function.reflection)

    def checks(self, name: str) -> FunctionChecks | None:
        """The value checks whose counts the function returns after its gradient (None:
        none; backends/iree/checks.py)."""
        if name not in self._checks:
            text = self.reflection(name).get(CHECKS_KEY)
            self._checks[name] = None if text is None else FunctionChecks.from_json(text)
        return self._checks[name]

    def __call__(self, name: str, *arrays: np.ndarray) -> Any:
        """One result as a numpy array, several as a tuple of them. Every function the IREE
        target exports checks its dynamic sizes first (backends/iree/guards.py); a failed
        check is raised as the project's error with its aclnn code. A function with value
        checks gives the gradient alone, or raises its check's error (e.g. TARGET_RANGE,
        161002) when a count is not 0."""
        try:
            results = self.functions[name](*arrays)
        except RuntimeError as err:
            raise _check_failure(err) from None
        checks = self.checks(name)
        if checks is not None:
            values = list(results) if isinstance(results, (tuple, list)) else [results]
            if len(values) != checks.results:
                raise RuntimeError(
                    f"'{name}' returned {len(values)} results, its checks say {checks.results}"
                )
            checks.raise_failed(arrays, values[1:])
            return np.asarray(values[0])
        if isinstance(results, (tuple, list)):
            return tuple(np.asarray(r) for r in results)
        return np.asarray(results)


def load(path: str | Path, device: str = "local-task") -> LoadedModule:
    """A module written by the IREE target (or by iree-compile from level 2)."""
    return LoadedModule(path, device)


class SessionInputError(ValueError):
    """Feeds that do not fit the compiled model's inputs (checked before IREE runs)."""


_FAILED_CHECK = re.compile(
    rf"(?P<op>{'|'.join(spec.OPERATORS)}): (?P<argument>[^:]+): (?P<rule>.*?) \[aclnn \d+ \w+\]"
)


class IreeSession:
    """A whole model compiled to one IREE module, run like an onnxruntime InferenceSession:
    inputs and outputs by their ONNX names. The interface comes from the module itself."""

    def __init__(self, path: str | Path, device: str = "local-task") -> None:
        self.module = load(path, device)
        # the importer also exports `<name>$async`, with the same reflection
        interfaces = [
            interface
            for name in self.module.names
            if (text := self.module.reflection(name).get(INTERFACE_KEY)) is not None
            and (interface := ModelInterface.from_json(text)).function == name
        ]
        if len(interfaces) != 1:
            raise ValueError(
                f"'{path}' is not a whole-model module of lossgrad-compile --target iree "
                f"({len(interfaces)} functions carry an ONNX interface)"
            )
        self.interface = interfaces[0]

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.interface.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.interface.outputs]

    def run(self, output_names: Sequence[str] | None, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """The outputs named (all when None), computed from the feeds by their names."""
        wanted = list(output_names or self.output_names)
        unknown = [n for n in wanted if n not in self.output_names]
        if unknown:
            raise SessionInputError(
                f"unknown output(s) {unknown}; the model has {self.output_names}"
            )
        arrays = self._checked_feeds(feeds)
        results = self.module(self.interface.function, *arrays)
        values = results if isinstance(results, tuple) else (results,)
        outputs = len(self.output_names)
        if len(values) != outputs + self.interface.extras:
            raise RuntimeError(
                f"'{self.interface.function}' returned {len(values)} results, its interface "
                f"says {outputs} outputs and {self.interface.extras} check results"
            )
        # the nodes' value checks (backends/iree/model_checks.py), e.g. TARGET_RANGE
        raise_failed(self.interface.checks, values[outputs:])
        by_name = dict(zip(self.output_names, values[:outputs], strict=True))
        return [by_name[n] for n in wanted]

    def _checked_feeds(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        extra = sorted(set(feeds) - set(self.input_names))
        missing = [n for n in self.input_names if n not in feeds]
        if extra or missing:
            raise SessionInputError(
                f"the model's inputs are {self.input_names}; "
                + (f"missing {missing}" if missing else "")
                + ("; " if extra and missing else "")
                + (f"unknown {extra}" if extra else "")
            )
        symbols: dict[str, tuple[str, int]] = {}
        arrays = []
        for declared in self.interface.inputs:
            array = np.asarray(feeds[declared.name])
            if array.dtype.name != declared.dtype:
                raise SessionInputError(
                    f"input '{declared.name}' is {array.dtype.name}, "
                    f"the model wants {declared.dtype}"
                )
            if array.ndim != len(declared.dims):
                raise SessionInputError(
                    f"input '{declared.name}' has rank {array.ndim}, the model wants "
                    f"{len(declared.dims)} ({declared.text()})"
                )
            for axis, (size, dim) in enumerate(zip(array.shape, declared.dims, strict=True)):
                if isinstance(dim, int) and size != dim:
                    raise SessionInputError(
                        f"input '{declared.name}' dimension {axis} is {size}, the model "
                        f"wants {dim} ({declared.text()})"
                    )
                if isinstance(dim, str):
                    seen = symbols.setdefault(dim, (declared.name, size))
                    if seen[1] != size:
                        raise SessionInputError(
                            f"dimension '{dim}' is {seen[1]} in input '{seen[0]}' and {size} "
                            f"in input '{declared.name}'"
                        )
            arrays.append(np.asarray(array, order="C"))  # ascontiguousarray makes 0-d 1-d
        return arrays


def session(path: str | Path, device: str = "local-task") -> IreeSession:
    """Run a module written by `lossgrad-compile --target iree` (`str` or `Path`)."""
    return IreeSession(path, device)


def _check_failure(err: RuntimeError) -> Exception:
    """A failed run-time size check as the project's error (with its aclnn code)."""
    match = _FAILED_CHECK.search(str(err))
    if match is None:
        return err
    return BroadcastError(match["op"], match["argument"], match["rule"])
