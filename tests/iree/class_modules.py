"""Classification cases (tests/helpers/class_cases.py) compiled by IREE in as few modules as
possible: the cases' lossgrad-level functions, deduplicated by what the lowering compiles
(operator, function type, attributes), lowered by lower-lossgrad into one module, compiled by
the IREE target (backends.iree.compile_module, cached) and loaded once. With dynamic dims one
function serves every shape of a rank."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler.backends.iree import compile_module
from lossgrad_compiler.context import make_context
from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
from lossgrad_compiler.runtime import iree as iree_runtime
from tests.helpers.class_cases import ClassCase, class_case_function, inputs_in_order


def _key(case: ClassCase, dynamic: bool) -> tuple[str, str, tuple]:
    function = class_case_function(case, dynamic=dynamic, name="key")
    return case.op_type, str(function.function_type), tuple(sorted(case.attrs.items()))


def lowered_module(cases: Sequence[ClassCase], *, dynamic: bool) -> tuple[ModuleOp, list[str]]:
    """The level-2 module of the cases' functions (each once) and each case's function."""
    names: dict[tuple[str, str, tuple], str] = {}
    functions = []
    for case in cases:
        key = _key(case, dynamic)
        if key not in names:
            names[key] = f"f{len(names)}"
            functions.append(class_case_function(case, dynamic=dynamic, name=names[key]))
    module = ModuleOp(functions)
    LowerLossgradPass().apply(make_context(), module)
    return module, [names[_key(c, dynamic)] for c in cases]


@dataclass
class CompiledCases:
    """One loaded IREE module and the function each case calls."""

    module: iree_runtime.LoadedModule
    functions: list[str]
    cases: list[ClassCase]

    def run(self, index: int, case: ClassCase | None = None):
        """Call case `index`'s function with `case`'s inputs (by default its own)."""
        return self.module(self.functions[index], *inputs_in_order(case or self.cases[index]))


def compiled(cases: Sequence[ClassCase], *, dynamic: bool = True) -> CompiledCases:
    module, functions = lowered_module(cases, dynamic=dynamic)
    loaded = iree_runtime.load(compile_module(module), device="local-sync")
    return CompiledCases(loaded, functions, list(cases))
