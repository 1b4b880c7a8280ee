"""CrossEntropyLossGrad's new level-2 constructs in the HFusion form: the gather without an
address (select by the class position and a sum over the classes), the reductions as
`linalg.reduce` into 0-d sums marked for a kernel of their own, and the forms AscendNPU IR
1.2.0 cannot take, pinned. The case matrix itself runs in test_hfusion_classes_form.py
(interpreter) and test_hfusion_classes_bishengir.py (bishengir, the CPU runner)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import FloatAttr, ModuleOp
from xdsl.dialects.linalg.ops import ReduceOp

from lossgrad_compiler.interpreter import run_function
from lossgrad_compiler.passes import convert_linalg_to_hfusion as pass_module
from tests.helpers.class_cases import inputs_in_order, make_class_case
from tests.helpers.tolerances import bits
from tests.hfusion import F16, F32
from tests.hfusion.test_hfusion_classes_form import converted

CE = "CrossEntropyLossGrad"


def weighted_mean(dtype: np.dtype = F32, **kw: object) -> object:
    return make_class_case(
        CE, (6, 5), dtype, reduction="mean", weighted=True, label_smoothing=0.25,
        ignore_index=1, seed=9, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def reduces(module: ModuleOp) -> list[ReduceOp]:
    return [op for op in module.walk() if isinstance(op, ReduceOp)]


def test_the_gather_is_a_select_by_class_and_a_sum_from_minus_zero() -> None:
    """No hfusion.gather and no address: the main kernel's gather sums over its class loop
    (dimension 1) from -0.0 and broadcasts back; the kept weight's sum runs over the lifted
    class loop too (two dimensions into 0-d); both sums are marked for split.py."""
    module = converted(weighted_mean(), dynamic=True)
    assert "hfusion.gather" not in str(module)
    dims = [list(op.dimensions.get_values()) for op in reduces(module)]
    assert dims == [[0, 1], [0], [1], [0]]  # kept weight, class weight, the gather, the count
    gather = reduces(module)[2]
    init = gather.operands[1].owner.operands[0].owner  # type: ignore[union-attr]
    assert isinstance(init.value, FloatAttr) and str(init.value.value.data) == "-0.0"
    marks = [op.attributes[pass_module.REDUCTION_ATTR].data for op in module.walk()  # type: ignore[attr-defined]
             if pass_module.REDUCTION_ATTR in op.attributes]  # fmt: skip
    assert marks == ["kept_weight", "class_weight"]


def test_the_gather_is_exact_for_signed_zeros_and_nan_elsewhere() -> None:
    """A weight of -0.0 at a target keeps its sign, and a NaN weight at a class no row
    targets reaches only that class's own term: the sum adds -0.0 to one element."""
    case = make_class_case(CE, (4, 3), F32, reduction="sum", weighted=True, seed=3,
                           targets=np.array([0, 0, 2, 0]))  # fmt: skip
    case.inputs["weight"][:] = [-0.0, np.nan, 1.5]
    got, _ = run_function(converted(case, dynamic=True), "f", *inputs_in_order(case))
    assert (bits(got) == bits(case.expected())).all()


@pytest.mark.parametrize("dtype", [F32, F16], ids=["float32", "float16"])
def test_mutated_gathers_and_sums_fail(monkeypatch: pytest.MonkeyPatch, dtype: np.dtype) -> None:
    """The gather read at class 0, and the kept weight summed without its class loop,
    change the numbers: compared with level 2 run by the same interpreter, which the pass
    must reproduce bit for bit."""
    from lossgrad_compiler.context import make_context
    from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
    from tests.helpers.class_cases import class_case_module

    case = weighted_mean(dtype)
    level2 = class_case_module(case, dynamic=True)
    LowerLossgradPass().apply(make_context(), level2)
    wanted = bits(run_function(level2, "f", *inputs_in_order(case))[0])

    def run() -> np.ndarray:
        got, _ = run_function(converted(case, dynamic=True), "f", *inputs_in_order(case))
        return bits(got)

    assert (run() == wanted).all()
    original = pass_module.Shapes.gather

    def at_class_zero(self, op, source, index):  # type: ignore[no-untyped-def]
        zero = self.builder.insert(pass_module.arith.ConstantOp.from_int_and_width(0, 64))
        return original(self, op, source, self.fill(zero.result, index.type.element_type))

    monkeypatch.setattr(pass_module.Shapes, "gather", at_class_zero)
    assert not (run() == wanted).all()
    monkeypatch.undo()
    monkeypatch.setattr(pass_module, "_lifted_class_loop", lambda generic: None)
    with pytest.raises(Exception, match="along a loop"):
        run()  # without the lifted loop the kept weight's gather has no class loop


def test_a_sum_not_linear_in_its_gather_is_refused() -> None:
    """The lifted class loop is exact only for a sum linear in the gathered value."""
    module = converted(weighted_mean(), dynamic=True)  # the real one converts
    assert module
    from xdsl.dialects import arith, tensor

    from lossgrad_compiler.context import make_context
    from lossgrad_compiler.level2 import Level2ContractError, analyze_function
    from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
    from tests.helpers.class_cases import class_case_module

    level2 = class_case_module(weighted_mean(), dynamic=True)
    LowerLossgradPass().apply(make_context(), level2)
    function = analyze_function(next(iter(level2.ops)))  # type: ignore[arg-type]
    kept = function.reductions[0].generic
    gathered = next(op for op in kept.body_ops if isinstance(op, tensor.ExtractOp))
    square = arith.MulfOp(gathered.result, gathered.result)  # float32: no extf after it
    kept.body.insert_op_after(square, gathered)
    for use in list(gathered.result.uses):
        if use.operation is not square:
            use.operation.operands[use.index] = square.result
    with pytest.raises(Level2ContractError, match="only through extf and selects"):
        pass_module.ConvertLinalgToHfusionPass().apply(make_context(), level2)


bishengir = pytest.importorskip("ascendnpuir", reason="needs AscendNPU IR")


def test_bishengir_1_2_cannot_outline_a_gather_before_a_cast() -> None:
    """Why the gather is not hfusion.gather. When this fails, it can be."""
    from lossgrad_compiler.backends.ascendnpu_ir import AscendNpuIrSoc, BishengirError, hivm_text

    text = (Path(__file__).parent / "data" / "gather_cast.mlir").read_text()
    with pytest.raises(BishengirError, match="outline single kernel failed"):
        hivm_text(text, AscendNpuIrSoc())


def test_bishengir_1_2_cannot_outline_a_sum_with_the_gradient_that_reads_it() -> None:
    """Why split.py gives each reduction a function: the gradient with its sums inside it
    fails, the split functions compile. When the first part fails, the split can go."""
    from lossgrad_compiler.backends.ascendnpu_ir import (
        AscendNpuIrSoc,
        BishengirError,
        hivm_text,
        summarize,
    )
    from lossgrad_compiler.backends.ascendnpu_ir.split import split_results

    module = converted(weighted_mean(F16), dynamic=True)
    gradient, _, *sums = split_results(module).ops
    assert [f.sym_name.data for f in sums] == ["f_kept_weight", "f_class_weight"]  # type: ignore[attr-defined]
    assert len(gradient.body.block.args) == 4 + 2  # type: ignore[attr-defined]  # the sums
    whole = gradient.clone()
    block = whole.body.block  # type: ignore[attr-defined]
    anchor = block.first_op
    for function, argument in zip(sums, list(block.args[4:]), strict=True):
        inner = function.clone()
        value = inner.body.block.last_op.operands[0]  # type: ignore[attr-defined]
        ops = list(inner.body.block.ops)[:-1]  # type: ignore[attr-defined]
        for old, new in zip(inner.body.block.args, block.args[:4], strict=True):  # type: ignore[attr-defined]
            old.replace_all_uses_with(new)
        for op in ops:
            op.detach()
            block.insert_op_before(op, anchor)
        argument.replace_all_uses_with(value)
    for argument in reversed(block.args[4:]):
        block.erase_arg(argument)
    whole.function_type = type(whole.function_type).from_lists(  # type: ignore[attr-defined]
        [a.type for a in block.args],
        list(whole.function_type.outputs.data),  # type: ignore[attr-defined]
    )
    soc = AscendNpuIrSoc()
    with pytest.raises(BishengirError, match=r"outline single kernel failed|next producer"):
        hivm_text(str(ModuleOp([whole])), soc)
    for function in (gradient, *sums):
        summary = summarize(hivm_text(str(ModuleOp([function.clone()])), soc))
        assert summary.kernels and summary.leftover_compute_ops == {}


def test_static_size_1_rows_beside_the_gather_are_refused() -> None:
    """The lifted and the main class positions broadcast over a static 1 (bishengir drops
    it): refused as for NLL; the dynamic signature is taken."""
    from lossgrad_compiler.backends.ascendnpu_ir import hfusion_module
    from lossgrad_compiler.context import make_context
    from lossgrad_compiler.errors import UnsupportedByBackendError
    from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
    from tests.helpers.class_cases import class_case_module

    case = make_class_case(CE, (1, 3), F32, reduction="mean", weighted=True)
    for dynamic in (False, True):
        level2 = class_case_module(case, dynamic=dynamic)
        LowerLossgradPass().apply(make_context(), level2)
        if dynamic:
            hfusion_module(level2)
        else:
            with pytest.raises(UnsupportedByBackendError, match="static size-1"):
                hfusion_module(level2)


def test_the_target_writes_the_sums_kernels(tmp_path: Path) -> None:
    """Each sum has its own HFusion and HIVM files and a summary."""
    from lossgrad_compiler.backends.ascendnpu_ir import AscendNpuIrSoc, signature_outputs
    from lossgrad_compiler.context import make_context
    from lossgrad_compiler.passes.lower_lossgrad import LowerLossgradPass
    from tests.helpers.class_cases import class_case_module

    level2 = class_case_module(weighted_mean(F16), dynamic=True)
    LowerLossgradPass().apply(make_context(), level2)
    outputs = signature_outputs(level2, AscendNpuIrSoc())
    (summary,) = outputs.summaries
    assert set(summary["reductions"]) == {"kept_weight", "class_weight"}
    assert all(s["kernels"] for s in summary["reductions"].values())
    name = summary["signature"]
    assert f"{name}/reduction_kept_weight.hivm.mlir" in outputs.files
    assert "hivm.hir.vreduce" in outputs.files[f"{name}/reduction_class_weight.hivm.mlir"].decode()
