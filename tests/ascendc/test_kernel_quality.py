"""What the planned kernels look like, against CANN's own kernels (docs/ascend-c.md, "CANN's
kernels"): vector instructions per tile, UB use at the chosen tile length, the alignment of
the tile, and the passes' refusals. No compiler runs here: everything is read from the IR."""

from __future__ import annotations

import contextlib
import io

import pytest
from xdsl.utils.exceptions import DiagnosticException

from benchmarks.ascendc_cann import sample_in_half
from benchmarks.ascendc_report import (
    ORDER_EXCESS,
    arithmetic_excess,
    kernel_report,
    main,
    report_cases,
)
from lossgrad_compiler import level2, spec
from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.dialects.ascendc.soc import SOCS
from lossgrad_compiler.errors import UnsupportedByBackendError
from lossgrad_compiler.passes.ascendc_plan_buffers import AscendcPlanBuffersPass
from lossgrad_compiler.passes.convert_linalg_to_ascendc import ConvertLinalgToAscendcPass

REPORTS = [kernel_report(*case) for case in report_cases(("none", "mean", "sum", "batchmean"))]


def _label(r) -> str:
    return f"{r.op} {r.variant} {r.reduction} {r.dtype} {'scalar' if r.scalar_g else 'tensor'} g"


def _known_excess(r) -> int:
    """The arithmetic the contract's order costs beyond CANN's kernel (ORDER_EXCESS)."""
    return ORDER_EXCESS.get((r.op, r.variant), (0, ""))[0]


def test_no_more_vector_instructions_per_tile_than_cann() -> None:
    """Two known exceptions: float16 KlDivTargetBackward, which CANN's sample computes in
    half precision, where the contract computes half types in float32 (three input Casts and
    one output Cast; its bfloat16 column, the same math through Casts, is matched); and
    KlDivTargetBackward with log_target 1, whose PyTorch order has one product more than
    CANN's grouping. Beyond those no kernel has more instructions than CANN's."""
    worse = {_label(r) for r in REPORTS if r.vector_ops > (r.cann or 0)}
    allowed = {
        _label(r)
        for r in REPORTS
        if r.op == spec.KL_DIV_TARGET_BACKWARD.name
        and (r.dtype == "f16" or r.variant == "log_target=1")
    }
    assert worse <= allowed, sorted(worse - allowed)
    for r in REPORTS:
        assert r.cann_kernel is not None
        excess = (r.vector_ops - r.casts) - (r.cann_kernel.calls - r.cann_kernel.casts)
        assert excess <= _known_excess(r), _label(r)
    assert max(arithmetic_excess(r) for r in REPORTS if _known_excess(r)) == 1


def test_repeats_count_256_bytes_of_the_widest_element() -> None:
    """Per 128 elements a float32 instruction takes 2 repeats, and so does a Cast to or
    from float32 (docs/ascend-c.md); CANN's half-precision sample takes 1."""
    attrs = {"reduction": "none", "log_target": 1}
    f32 = kernel_report("KlDivBackward", attrs, "f32", False)
    f16 = kernel_report("KlDivBackward", attrs, "f16", False)
    assert (f32.instructions, f32.repeats_per_128) == (("exp", "mul", "muls"), 6)
    assert (f16.vector_ops, f16.repeats_per_128) == (6, 12)
    sample = kernel_report("KlDivTargetBackward", attrs, "f16", False).cann_kernel
    assert sample is not None and sample.repeats_per_128 == sample.calls == 5


def test_half_replay_of_the_cann_sample_differs_from_reference() -> None:
    """The measurement behind the report's reason: CANN's order in half precision is not
    contract's float32 result (if the replay computed in float32, nothing would differ)."""
    half = sample_in_half({"reduction": "none", "log_target": 0}, scalar_g=False, elements=4096)
    assert half.elements == 4096
    assert 0 < half.differing < half.elements
    assert half.max_ulps >= 1


def test_report_explains_every_excess() -> None:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(["--reductions", "none"])
    lines = [x for x in buffer.getvalue().splitlines() if x.startswith("  more than CANN:")]
    # KlDivTargetBackward: f16 log_target 0 (tensor, scalar g); log_target 1 in f32 and f16
    # (tensor, scalar g) and in bf16 with a tensor g (with a scalar g its Casts are fewer)
    assert len(lines) == 7
    casts = "the Casts of the contract's float32 compute"
    order = "PyTorch's order of autograd's two terms"
    for line in lines:
        assert "More arithmetic" not in line, line
        assert (order in line) == ("log_target=1" in line), line
        assert (casts in line) == (" f16 " in line), line
        if " f16 " in line:
            assert "% of results differ from reference.py" in line, line


@pytest.mark.parametrize("soc", ["ascend910b3", "ascend950"])
def test_at_least_90_percent_of_the_ub_is_used_on_other_socs(soc: str) -> None:
    reports = [kernel_report(*case, soc=soc) for case in report_cases(("none", "mean"))]
    assert min(r.ub_fraction for r in reports) >= 0.9
    assert {r.ub_capacity for r in reports} == {SOCS[soc].ub_bytes}


def test_at_least_90_percent_of_the_ub_is_used() -> None:
    assert min(r.ub_fraction for r in REPORTS) >= 0.9
    for r in REPORTS:
        assert r.ub_bytes <= r.ub_capacity
        assert r.tile_length % 64 == 0  # 256 bytes of float32: Compare's rule, and DataCopy's


def test_scalar_grad_output_is_a_scalar_multiply() -> None:
    r = kernel_report("KlDivBackward", {"reduction": "mean", "log_target": 0}, "f32", True)
    assert r.instructions == ("muls",)  # -(g * scale) computed once in Init
    assert (r.copies_in, r.copies_out) == (1, 1)  # grad_output is read with GetValue


def test_report_command_prints_the_table() -> None:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(["--elements", "100000", "--reductions", "mean", "--no-ascendnpu-ir"])
    text = buffer.getvalue()
    assert (
        "| operator | variant | reduction | type | grad_output | vector ops / tile | CANN |" in text
    )
    assert text.count("\n| KlDivBackward |") == 12
    assert "0 using less than 90% of the UB" in text


def test_the_report_sets_ascendnpu_irs_plan_beside_each_kernel() -> None:
    """With the extra `ascend`: the second table, one row per kernel. KlDivTargetBackward and
    SmoothL1LossBackward have the same vector ops and casts as AscendNPU IR's plan; the Ascend
    C KlDivBackward kernel has one op fewer (it folds the negation into the scale)."""
    pytest.importorskip("ascendnpuir", reason="needs AscendNPU IR: pip install -e '.[ascend]'")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main(["--elements", "1000000", "--reductions", "mean"])
    vendor = buffer.getvalue().split("Beside AscendNPU IR's plan")[1]
    rows = [line.split(" | ") for line in vendor.splitlines() if line.startswith("| Kl") or
            line.startswith("| Smooth")]  # fmt: skip
    assert len(rows) == 36
    for row in rows:
        ours, theirs = (int(x) for x in row[5].replace("(", "").replace(")", "").split())
        assert ours == theirs - (1 if row[0] == "| KlDivBackward" else 0), row
        casts, vendor_casts = (int(x) for x in row[6].replace("(", "").replace(")", "").split())
        assert casts == vendor_casts, row


LEVEL2_F64 = """
func.func @f(%g: tensor<f64>, %x: tensor<?xf64>, %t: tensor<?xf64>) -> tensor<?xf64> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?xf64>
  %e = tensor.empty(%d) : tensor<?xf64>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>,
      affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%g, %x, %t : tensor<f64>, tensor<?xf64>, tensor<?xf64>) outs(%e : tensor<?xf64>) {
  ^bb0(%a: f64, %b: f64, %c: f64, %o: f64):
    %m = arith.mulf %a, %c : f64
    linalg.yield %m : f64
  } -> tensor<?xf64>
  func.return %r : tensor<?xf64>
}
"""


def _convert(text: str) -> None:
    module = parse_module(text)
    ConvertLinalgToAscendcPass().apply(make_context(), module)
    AscendcPlanBuffersPass().apply(make_context(), module)


def test_float64_is_refused_naming_the_backends_that_can() -> None:
    with pytest.raises(UnsupportedByBackendError, match="use the onnx or ort target"):
        _convert(LEVEL2_F64)


def _with_body(body: str) -> str:
    return LEVEL2_F64.replace("f64", "f32").replace("%m = arith.mulf %a, %c : f32", body)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("%m = math.sqrt %a : f32", "'math.sqrt': is not a level-2 body op"),
        (
            "%k = arith.cmpf ueq, %a, %c : f32\n    %m = arith.select %k, %a, %c : f32",
            "predicate 'ueq' is not level 2",
        ),
    ],
)
def test_ops_outside_the_level2_list_are_errors(body: str, message: str) -> None:
    with pytest.raises(level2.Level2ContractError, match=message):
        _convert(_with_body(body))


@pytest.mark.parametrize("predicate", ["ult", "ule", "ugt", "uge"])
def test_a_level2_predicate_without_a_cmpmode_names_the_backends_that_can(predicate: str) -> None:
    """Unordered comparisons are level 2, but no CMPMODE is true on NaN except NE."""
    body = f"%k = arith.cmpf {predicate}, %a, %c : f32\n    %m = arith.select %k, %a, %c : f32"
    with pytest.raises(UnsupportedByBackendError, match=f"predicate {predicate} has no CMPMODE"):
        _convert(_with_body(body))


def test_plan_refuses_a_ub_too_small_for_one_tile() -> None:
    module = parse_module(LEVEL2_F64.replace("f64", "f32"))
    ConvertLinalgToAscendcPass().apply(make_context(), module)
    with pytest.raises(DiagnosticException, match="does not fit a UB of 1000 bytes"):
        AscendcPlanBuffersPass(ub_bytes=1000).apply(make_context(), module)
