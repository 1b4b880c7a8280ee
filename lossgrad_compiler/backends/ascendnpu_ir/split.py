"""One function per result, for AscendNPU IR: a signature function that returns its
gradient and the counts of its value checks (docs/level2.md, "Beyond elementwise") is
written as one function per result, each holding only what that result needs.

AscendNPU IR 1.2.0's HFusion pipeline fuses a function into a single kernel and fails
("outline single kernel failed") on the gradient and the target check's count together,
two iteration spaces with no producer in common; each alone compiles. Its
`enable-multi-kernel` option outlines both, but computes the class position
(`hfusion.arange`) on the host, outside every kernel. The gradient keeps the function's
name; a check's function is named `<name>_<rule>` (e.g. `f0_target_range`)."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr

from lossgrad_compiler import level2


def check_function_name(function: str, rule: str) -> str:
    return f"{function}_{rule}"


def split_results(module: ModuleOp) -> ModuleOp:
    """A copy of the module (functions in the HFusion form) with every function of several
    results split into one function per result."""
    functions: list[func.FuncOp] = []
    for op in module.ops:
        assert isinstance(op, func.FuncOp)
        results = len(op.function_type.outputs.data)
        if results == 1:
            functions.append(op.clone())
            continue
        rules = op.attributes.get(level2.CHECKS_ATTR)
        assert isinstance(rules, ArrayAttr) and len(rules.data) == results - 1
        for k in range(results):
            name = op.sym_name.data
            if k:
                rule = rules.data[k - 1]
                assert isinstance(rule, StringAttr)
                name = check_function_name(name, rule.data)
            functions.append(_only_result(op, k, name))
    return ModuleOp(functions)


def _only_result(function: func.FuncOp, k: int, name: str) -> func.FuncOp:
    copy = function.clone()
    block = copy.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    kept = ret.operands[k]
    new_return = func.ReturnOp(kept)
    block.insert_op_before(new_return, ret)
    block.erase_op(ret)
    for op in reversed(list(block.ops)):
        if op is not new_return and op.results and all(not r.uses for r in op.results):
            block.erase_op(op)
    copy.sym_name = StringAttr(name)
    copy.function_type = func.FunctionType.from_lists(
        list(copy.function_type.inputs.data), [kept.type]
    )
    return copy
