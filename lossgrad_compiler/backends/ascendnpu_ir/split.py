"""One function per result, for AscendNPU IR: a signature function that returns its
gradient and the counts of its value checks (docs/level2.md, "Beyond elementwise") is
written as one function per result, each holding only what that result needs.

AscendNPU IR 1.2.0's HFusion pipeline fuses a function into a single kernel and fails
("outline single kernel failed") on the gradient and the target check's count together,
two iteration spaces with no producer in common; each alone compiles. Its
`enable-multi-kernel` option outlines both, but computes the class position
(`hfusion.arange`) on the host, outside every kernel. The gradient keeps the function's
name; a check's function is named `<name>_<rule>` (e.g. `f0_target_range`).

A sum the gradient reads (CrossEntropyLossGrad's kept and class weights: the op the pass
marks with `lossgrad.reduction`) is a function of its own too, `<name>_<reduction>`
returning the 0-d sum, and the gradient's function takes each sum as one more argument
after the inputs (`tensor<f32>`, in `lossgrad.reductions` order): AscendNPU IR 1.2.0
cannot outline a sum and the gradient that reads it as one kernel ("outline single kernel
failed", or "could not find next producer to fuse into container"). The functions come
in the order gradient, checks, reductions."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from lossgrad_compiler import level2
from lossgrad_compiler.passes.convert_linalg_to_hfusion import REDUCTION_ATTR


def check_function_name(function: str, rule: str) -> str:
    """The function of a check's count, or of a reduction's sum (`rule`: its name)."""
    return f"{function}_{rule}"


def marked_reductions(function: func.FuncOp) -> list[tuple[str, Operation]]:
    """The ops marked as reductions' sums, with their names, in program order."""
    marked = []
    for op in function.walk():
        name = op.attributes.get(REDUCTION_ATTR)
        if isinstance(name, StringAttr):
            marked.append((name.data, op))
    return marked


def split_results(module: ModuleOp) -> ModuleOp:
    """A copy of the module (functions in the HFusion form) with every function of several
    results split into one function per result."""
    functions: list[func.FuncOp] = []
    for op in module.ops:
        assert isinstance(op, func.FuncOp)
        results = len(op.function_type.outputs.data)
        reductions = [name for name, _ in marked_reductions(op)]
        if results == 1 and not reductions:
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
        for k, reduction in enumerate(reductions):
            functions.append(_only_sum(op, k, check_function_name(op.sym_name.data, reduction)))
    return ModuleOp(functions)


def _only_sum(function: func.FuncOp, k: int, name: str) -> func.FuncOp:
    """A function returning the k-th reduction's sum alone."""
    copy = function.clone()
    _, op = marked_reductions(copy)[k]
    return _returning(copy, op.results[0], name)


def _only_result(function: func.FuncOp, k: int, name: str) -> func.FuncOp:
    """A function returning the k-th result alone; the gradient's (k = 0) takes each
    reduction's sum as an argument (a check reads none)."""
    copy = function.clone()
    block = copy.body.block
    for _, op in marked_reductions(copy) if k == 0 else []:
        argument = block.insert_arg(op.results[0].type, len(block.args))
        op.results[0].replace_all_uses_with(argument)
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    return _returning(copy, ret.operands[k], name)


def _returning(copy: func.FuncOp, kept: SSAValue, name: str) -> func.FuncOp:
    """`copy` returning `kept` alone, what it does not need erased, no op marked."""
    block = copy.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    new_return = func.ReturnOp(kept)
    block.insert_op_before(new_return, ret)
    block.erase_op(ret)
    for op in reversed(list(block.ops)):
        if op is not new_return and op.results and all(not r.uses for r in op.results):
            block.erase_op(op)
    copy.sym_name = StringAttr(name)
    for op in copy.walk():
        op.attributes.pop(REDUCTION_ATTR, None)
    copy.function_type = func.FunctionType.from_lists([a.type for a in block.args], [kept.type])
    return copy
