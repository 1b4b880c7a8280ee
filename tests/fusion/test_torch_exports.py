"""Real exports: training steps over F.kl_div, F.smooth_l1_loss and the loss family
(F.mse_loss onwards, F.l1_loss among them), exported by PyTorch
2.13's own exporter through lossgrad_compiler.torch, fused, and run in ONNX Runtime with the
native kernels against torch.autograd.grad and against the exporter's unfused model."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch: pip install -e '.[torch]'")
pytest.importorskip("onnxscript", reason="needs onnxscript: pip install -e '.[torch]'")

from lossgrad_compiler import fuse, spec  # noqa: E402
from lossgrad_compiler.evaluation.ort import session  # noqa: E402
from lossgrad_compiler.runtime.ort_io import run_session  # noqa: E402
from lossgrad_compiler.targets.ort_library import library_path  # noqa: E402
from lossgrad_compiler.torch import export_training_step  # noqa: E402
from tests.fusion.steps import (  # noqa: E402
    loss_gradient_step,
    two_losses_step,
    weighted_step,
)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "float64": torch.float64}
KL_REDUCTIONS = ("none", "mean", "sum", "batchmean")
SL1_REDUCTIONS = ("none", "mean", "sum")
# a folded scale can always travel in grad_output instead (reduction none)
EQUIVALENT = {"none": {"none", "sum"}, "sum": {"sum", "none"}}


# Where the exporter's own graph is less precise than eager autograd, the fused model keeps
# the exported graph's numbers: f64 SmoothL1 mean multiplies by 1/n rounded to float32.
EXPORTER_ROUNDS_IN = {("smooth_l1", "mean", "float64"): "float32"}


def _configs() -> list[tuple[str, str, str, dict[str, Any], str, bool]]:
    configs = []
    for wrt, reduction, log_target, dtype in itertools.product(
        ("input", "target"), KL_REDUCTIONS, (0, 1), DTYPES
    ):
        for dynamic in (False, True) if dtype == "float32" else (False,):
            configs.append(("kl_div", wrt, reduction, {"log_target": log_target}, dtype, dynamic))
    for reduction, beta, dtype in itertools.product(SL1_REDUCTIONS, (1.0, 0.5, 0.0), DTYPES):
        for dynamic in (False, True) if dtype == "float32" else (False,):
            configs.append(("smooth_l1", "input", reduction, {"beta": beta}, dtype, dynamic))
    return configs


CONFIGS = _configs()


def _label(config: tuple[str, str, str, dict[str, Any], str, bool]) -> str:
    loss, wrt, reduction, attrs, dtype, dynamic = config
    extra = ",".join(f"{k}={v}" for k, v in attrs.items())
    return f"{loss}-wrt_{wrt}-{reduction}-{extra}-{dtype}" + ("-dynamic" if dynamic else "")


def _inputs(loss: str, attrs: dict[str, Any], dtype: str, shapes: tuple[tuple, tuple]) -> tuple:
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(*shapes[0], generator=gen, dtype=torch.float64)
    if loss == "kl_div" and not attrs["log_target"]:
        t = torch.rand(*shapes[1], generator=gen, dtype=torch.float64) + 0.05
        t.view(-1)[0] = 0.0  # t == 0: the KL target gradient's edge value
    else:
        t = torch.randn(*shapes[1], generator=gen, dtype=torch.float64) - 1.0
    if loss == "smooth_l1" and shapes[0] == shapes[1]:
        t.view(-1)[:3] = x.view(-1)[:3]  # d == 0: the sign's edge value
    return x.to(DTYPES[dtype]), t.to(DTYPES[dtype])


def _expected(
    loss: str,
    wrt: str,
    reduction: str,
    attrs: dict[str, Any],
    dtype: str,
    dynamic: bool,
) -> str | None:
    """The ai.lossgrad op the fused model must hold, or None where the gradient is left."""
    if loss == "smooth_l1" and attrs["beta"] == 0.0:
        # F.smooth_l1_loss with beta 0 is F.l1_loss: the exporter writes g*sign(x - t),
        # L1LossBackward's gradient
        return "L1LossBackward"
    if loss == "smooth_l1":
        return "SmoothL1LossBackward"
    if wrt == "target":
        # log_target 0: the exporter's decomposition gives NaN at t == 0 where the operator
        # gives 0. log_target 1: (s*(t - x))*exp(t) + s*exp(t), the operator's own order,
        # but computed in float16 for float16 (the operator computes half types in float32)
        if not attrs["log_target"] or dtype == "float16":
            return None
        return "KlDivTargetBackward"
    if not attrs["log_target"] and not dynamic:
        return None  # folded by the exporter into one Mul by a constant
    if attrs["log_target"] and dtype == "float16":
        return None  # Exp, Mul, Neg computed in float16, rounded after each
    return "KlDivBackward"


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    """Within the oracle tolerance: 16 eps of the compute type relative to the largest
    magnitude (the gradients' terms), plus 4 eps of float16 of it for half results
    (PyTorch rounds every half op, and cancels in half; the operators round once)."""
    assert actual.shape == expected.shape
    compute = np.float64 if dtype == "float64" else np.float32
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    assert np.array_equal(np.isnan(a), np.isnan(e))
    finite = ~np.isnan(e)
    scale = np.max(np.abs(e[finite]), initial=0.0)
    tolerance = 16 * np.finfo(compute).eps * scale
    if dtype == "float16":
        tolerance += 4 * np.finfo(np.float16).eps * scale
    np.testing.assert_array_less(np.abs(a[finite] - e[finite]), tolerance + 1e-300)


def _feeds(model: onnx.ModelProto, tensors: tuple) -> dict[str, np.ndarray]:
    return {i.name: t.numpy() for i, t in zip(model.graph.input, tensors, strict=True)}


def _reassociating(config: tuple) -> bool:
    """Configs run with reassociate=True as well (it must not change what fuses there)."""
    loss, wrt, reduction, attrs, _dtype, _dynamic = config
    return loss == "kl_div" and wrt == "target" and attrs["log_target"] and reduction == "mean"


RUNS = [(c, False) for c in CONFIGS] + [(c, True) for c in CONFIGS if _reassociating(c)]


@pytest.mark.parametrize(
    ("config", "reassociate"),
    RUNS,
    ids=[_label(c) + ("-reassociate" if r else "") for c, r in RUNS],
)
def test_exported_step_is_fused_and_matches_autograd(config: tuple, reassociate: bool) -> None:
    loss, wrt, reduction, attrs, dtype, dynamic = config
    library_path()  # the native kernels must be there: no silent fallback to functions
    step = loss_gradient_step(loss, wrt, reduction, **attrs)
    x, t = _inputs(loss, attrs, dtype, ((4, 5), (4, 5)))
    shapes = {"x": {0: "batch"}, "t": {0: "batch"}} if dynamic else None
    fused, report = export_training_step(
        step, (x, t), dynamic_shapes=shapes, reassociate=reassociate
    )
    exported, _ = export_training_step(step, (x, t), dynamic_shapes=shapes, fuse_gradients=False)
    ours = [n for n in fused.graph.node if n.domain == spec.DOMAIN]
    expected = _expected(loss, wrt, reduction, attrs, dtype, dynamic)
    if expected is None:
        assert ours == [], report.lines()
        assert report.left, "a gradient left as written must be in the report"
    else:
        assert [n.op_type for n in ours] == [expected], report.lines()
        assert not any(f.reassociated for f in report.fused), report.lines()
        got = {a.name: onnx.helper.get_attribute_value(a) for a in ours[0].attribute}
        for name, value in attrs.items():
            assert got.get(name, value) == value  # L1LossBackward has no beta
        assert got["reduction"].decode() in EQUIVALENT.get(reduction, {reduction, "none"})
    want = step(x, t).detach().numpy()
    result = run_session(session(fused), _feeds(fused, (x, t)))[0]
    unfused = run_session(session(exported, native=False), _feeds(exported, (x, t)))[0]
    assert_close(result, unfused, dtype)  # the exported graph is what is compiled
    assert_close(result, want, EXPORTER_ROUNDS_IN.get((loss, reduction, dtype), dtype))
    if dynamic:  # another batch size through the same model
        x2, t2 = _inputs(loss, attrs, dtype, ((7, 5), (7, 5)))
        result = run_session(session(fused), _feeds(fused, (x2, t2)))[0]
        assert_close(result, step(x2, t2).detach().numpy(), dtype)


@pytest.mark.parametrize(
    ("loss", "wrt", "attrs", "op_type", "reassociate"),
    [
        ("kl_div", "input", {"log_target": 1}, "KlDivBackward", False),
        # the exporter sums s*(t-x) and s*exp(t) over the batch, then multiplies by exp(t):
        # another order than the operator's
        ("kl_div", "target", {"log_target": 1}, None, False),
        ("kl_div", "target", {"log_target": 1}, "KlDivTargetBackward", True),
        ("smooth_l1", "input", {"beta": 0.5}, "SmoothL1LossBackward", False),
    ],
)
def test_broadcast_target(
    loss: str, wrt: str, attrs: dict[str, Any], op_type: str | None, reassociate: bool
) -> None:
    step = loss_gradient_step(loss, wrt, "mean", **attrs)
    x, t = _inputs(loss, attrs, "float32", ((4, 5), (5,)))
    fused, report = export_training_step(step, (x, t), reassociate=reassociate)
    ops = [n.op_type for n in fused.graph.node if n.domain == spec.DOMAIN]
    assert ops == ([op_type] if op_type else []), report.lines()
    result = run_session(session(fused), _feeds(fused, (x, t)))[0]
    assert_close(result, step(x, t).detach().numpy(), "float32")


KL_TARGET_EXPORTS = [(r, False) for r in KL_REDUCTIONS] + [("mean", True), ("batchmean", True)]


@pytest.mark.parametrize(
    ("reduction", "dynamic"),
    KL_TARGET_EXPORTS,
    ids=[f"{r}{'-dynamic' * d}" for r, d in KL_TARGET_EXPORTS],
)
def test_kl_target_export_fuses_in_its_own_order(reduction: str, dynamic: bool) -> None:
    """PyTorch's export of F.kl_div(..., log_target=True) differentiated with respect to the
    target, (s*(t - x))*exp(t) + s*exp(t), is the operator's own order (issue 44): fused by
    default, not reassociated, and the fused model keeps docs/fusion.md's contract against
    the exported graph on random values and specials."""
    step = loss_gradient_step("kl_div", "target", reduction, log_target=1)
    x, t = _inputs("kl_div", {"log_target": 1}, "float32", ((4, 5), (4, 5)))
    shapes = {"x": {0: "batch"}, "t": {0: "batch"}} if dynamic else None
    exported, _ = export_training_step(step, (x, t), dynamic_shapes=shapes, fuse_gradients=False)
    fused, report = fuse(exported)
    ours = [n.op_type for n in fused.graph.node if n.domain == spec.DOMAIN]
    assert ours == ["KlDivTargetBackward"], report.lines()
    assert not report.left and not report.fused[0].reassociated, report.lines()
    _contract(
        exported, fused, "KlDivTargetBackward", {"log_target": 1}, reduction, "float32", dynamic
    )
    result = run_session(session(fused), _feeds(fused, (x, t)))[0]
    assert_close(result, step(x, t).detach().numpy(), "float32")


@pytest.mark.parametrize(
    ("self_shape", "after"), [((5,), ["Reshape"]), ((1, 5), []), ((4, 1), [])], ids=str
)
def test_broadcast_self_summed_back(self_shape: tuple[int, ...], after: list[str]) -> None:
    """self broadcast against target: the exporter sums the gradient back to self's shape
    with ReduceSum(keepdims=1), then a Reshape where self has fewer dimensions. That sum is
    the operator's own: the whole gradient is one KlDivBackward."""
    step = loss_gradient_step("kl_div", "input", "mean", log_target=1)
    x, t = _inputs("kl_div", {"log_target": 1}, "float32", (self_shape, (4, 5)))
    exported, _ = export_training_step(step, (x, t), fuse_gradients=False)
    ops = [n.op_type for n in exported.graph.node]
    summed = ops.index("ReduceSum")
    assert ops[summed + 1 :] == after, ops  # the spelling this test is about
    [reduce] = [n for n in exported.graph.node if n.op_type == "ReduceSum"]
    assert {a.name: a.i for a in reduce.attribute}.get("keepdims", 1) == 1
    fused, report = export_training_step(step, (x, t))
    assert [n.op_type for n in fused.graph.node] == ["KlDivBackward"], report.lines()
    result = run_session(session(fused), _feeds(fused, (x, t)))[0]
    assert result.shape == self_shape
    assert_close(result, step(x, t).detach().numpy(), "float32")


def test_step_summing_two_losses() -> None:
    gen = torch.Generator().manual_seed(3)
    inputs = (
        torch.log_softmax(torch.randn(6, 10, generator=gen), -1),
        torch.log_softmax(torch.randn(6, 10, generator=gen), -1),
        torch.randn(6, 4, generator=gen),
        torch.randn(6, 4, generator=gen),
    )
    dynamic = {"logits": {0: "batch"}, "teacher": {0: "batch"}}
    dynamic |= {"boxes": {0: "batch"}, "anchors": {0: "batch"}}
    fused, report = export_training_step(two_losses_step, inputs, dynamic_shapes=dynamic)
    ops = sorted(n.op_type for n in fused.graph.node if n.domain == spec.DOMAIN)
    assert ops == ["KlDivBackward", "SmoothL1LossBackward"], report.lines()
    results = run_session(session(fused), _feeds(fused, inputs))
    for got, want in zip(results, two_losses_step(*inputs), strict=True):
        assert_close(got, want.detach().numpy(), "float32")


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_aten_smooth_l1_backward_with_beta_zero(reduction: int) -> None:
    """aten.smooth_l1_loss_backward called with beta 0 exports where(|d| < 0, (s*d)/0,
    s*sign(d)): the division is never selected, so it is SmoothL1LossBackward with beta 0."""

    def step(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        grad = torch.full((), 0.75, dtype=x.dtype)
        return torch.ops.aten.smooth_l1_loss_backward(grad, x, t, reduction, 0.0)

    x, t = _inputs("smooth_l1", {"beta": 0.0}, "float32", ((4, 5), (4, 5)))
    x.view(-1)[:3] += 1.0  # no d == 0, where eager aten gives -grad and the export 0
    fused, report = export_training_step(step, (x, t))
    ours = [n for n in fused.graph.node if n.domain == spec.DOMAIN]
    assert [n.op_type for n in ours] == ["SmoothL1LossBackward"], report.lines()
    got = {a.name: onnx.helper.get_attribute_value(a) for a in ours[0].attribute}
    assert got["beta"] == 0.0
    exported, _ = export_training_step(step, (x, t), fuse_gradients=False)
    result = run_session(session(fused), _feeds(fused, (x, t)))[0]
    unfused = run_session(session(exported, native=False), _feeds(exported, (x, t)))[0]
    np.testing.assert_array_equal(result, unfused)
    assert_close(result, step(x, t).numpy(), "float32")


def test_export_writes_the_file(tmp_path: Any) -> None:
    step = loss_gradient_step("smooth_l1", "input", "mean", beta=1.0)
    path = tmp_path / "step.onnx"  # a Path, as users pass it
    fused, _ = export_training_step(step, (torch.randn(3, 2), torch.randn(3, 2)), path)
    assert onnx.load(str(path)) == fused


def test_dynamic_shapes_name_unknown_inputs() -> None:
    step = loss_gradient_step("smooth_l1", "input", "mean", beta=1.0)
    with pytest.raises(ValueError, match="not inputs"):
        export_training_step(step, (torch.randn(3, 2), torch.randn(3, 2)), dynamic_shapes={"y": {}})
    with pytest.raises(ValueError, match="entries"):
        export_training_step(step, (torch.randn(3, 2), torch.randn(3, 2)), dynamic_shapes=[{}])


# --------------------------------------------------------------------------- the loss family

FAMILY_OPS = {
    "mse": "MseLossBackward",
    "huber": "HuberLossBackward",
    "soft_margin": "SoftMarginLossBackward",
    "bce": "BinaryCrossEntropyBackward",
    "bce_weight": "BinaryCrossEntropyBackward",
    "bce_logits": "BinaryCrossEntropyWithLogitsBackward",
    "bce_logits_weight": "BinaryCrossEntropyWithLogitsBackward",  # weight and pos_weight
    "l1": "L1LossBackward",
}
# the first attributes run every reduction, dtype and batch; the others float32 mean
FAMILY_ATTRS: dict[str, list[dict[str, Any]]] = {
    "mse": [{}],
    "huber": [{"delta": 0.5}, {"delta": 1.0}, {"delta": 2.0}],
    "soft_margin": [{}],
    "bce": [{}],
    "bce_weight": [{}],
    "bce_logits": [{}],
    "bce_logits_weight": [{}],
    "l1": [{}],
}
# where the exporter computes the mean's 1/n in float32 for float64 inputs, a float64 node
# takes it as grad_output (reduction none, the same arithmetic)
FAMILY_REDUCTIONS = {("huber", "mean", "float64", d): {"none"} for d in (False, True)}
# a static l1 mean's seed is folded into the constant 1/n: grad_output, reduction none
FAMILY_REDUCTIONS |= {("l1", "mean", dtype, False): {"none"} for dtype in DTYPES}
EXPORTER_ROUNDS_IN[("huber", "mean", "float64")] = "float32"
# (loss, reduction, dtype) -> why the exporter's graph is left: it computes the scale in
# float32 for float64 inputs (2/n rounded to float32), which no float64 node computes
FAMILY_LEFT = {("mse", "mean", "float64"): "is neither 2 nor 2/n"}
# autograd's BCE-with-logits backward computes float16 inputs in float16, op by op
FAMILY_LEFT |= {
    (loss, reduction, "float16"): "computes in float16"
    for loss in ("bce_logits", "bce_logits_weight")
    for reduction in SL1_REDUCTIONS
}
EXPORTER_ROUNDS_IN[("mse", "mean", "float64")] = "float32"
# a dynamic float16 l1 mean divides the seed by n in float16 (the node would round once)
FAMILY_LEFT[("l1", "mean", "float16", True)] = "float16"
# the decomposition's t*g*(sigmoid(t*x) - 1) cancels where SoftMarginLossBackward does not
SOFT_MARGIN_LEFT = "which cancels"
FAMILY_LEFT |= {
    ("soft_margin", reduction, dtype): SOFT_MARGIN_LEFT
    for reduction in SL1_REDUCTIONS
    for dtype in DTYPES
}


def _family_configs() -> list[tuple[str, str, dict[str, Any], str, bool]]:
    configs = []
    for loss in FAMILY_OPS:
        first, *others = FAMILY_ATTRS[loss]
        for reduction, dtype, dynamic in itertools.product(SL1_REDUCTIONS, DTYPES, (False, True)):
            configs.append((loss, reduction, first, dtype, dynamic))
        for attrs, dynamic in itertools.product(others, (False, True)):
            configs.append((loss, "mean", attrs, "float32", dynamic))
    return configs


def _family_inputs(loss: str, dtype: str, shapes: tuple[tuple, tuple], seed: int = 11) -> tuple:
    """x, t (and a weight of the last dimension's size); probabilities for BCE."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shapes[0], generator=gen, dtype=torch.float64) * 2
    t = torch.randn(*shapes[1], generator=gen, dtype=torch.float64)
    if loss.startswith("bce"):
        t = torch.rand(*shapes[1], generator=gen, dtype=torch.float64)
        x = x if loss.startswith("bce_logits") else torch.sigmoid(x)
    if shapes[0] == shapes[1]:
        t.view(-1)[:2] = x.view(-1)[:2]  # d == 0
    tensors = [x, t]
    if loss.endswith("_weight"):
        tensors.append(torch.rand(shapes[0][-1], generator=gen, dtype=torch.float64) + 0.5)
    return tuple(a.to(DTYPES[dtype]) for a in tensors)


def _batch_shapes(loss: str) -> dict[str, dict[int, str]]:
    shapes: dict[str, dict[int, str]] = {"x": {0: "batch"}, "t": {0: "batch"}}
    return shapes | ({"w": {}} if loss.endswith("_weight") else {})


def _family_step(loss: str, reduction: str, attrs: dict[str, Any]) -> Any:
    if loss.endswith("_weight"):
        return weighted_step(loss, reduction)
    return loss_gradient_step(loss, "input", reduction, **attrs)


FAMILY = _family_configs()


@pytest.mark.parametrize(
    "config",
    FAMILY,
    ids=[
        f"{c[0]}-{c[1]}-{','.join(f'{k}={v}' for k, v in c[2].items())}-{c[3]}"
        + ("-dynamic" if c[4] else "")
        for c in FAMILY
    ],
)
def test_family_step_is_fused_and_matches(config: tuple) -> None:
    """Every reduction, dtype and static or dynamic batch of each loss of the family fuses
    to its node with its attributes (or is left with the reason), runs in ONNX Runtime
    with the native kernels as the exported graph and autograd do, and keeps the fusion
    contract on special values; another batch size runs through the dynamic model."""
    loss, reduction, attrs, dtype, dynamic = config
    library_path()
    step = _family_step(loss, reduction, attrs)
    args = _family_inputs(loss, dtype, ((4, 5), (4, 5)))
    shapes = _batch_shapes(loss) if dynamic else None
    exported, _ = export_training_step(step, args, dynamic_shapes=shapes, fuse_gradients=False)
    fused, report = fuse(exported)  # what export_training_step does (the round trip below)
    ours = [n for n in fused.graph.node if n.domain == spec.DOMAIN]
    left = FAMILY_LEFT.get((loss, reduction, dtype, dynamic)) or FAMILY_LEFT.get(
        (loss, reduction, dtype)
    )
    if left:
        # nothing of this loss is fused; a dynamic soft margin step with reduction none keeps
        # its forward (the seed of ones takes the loss's shape), whose (-x)*t is a
        # KlDivBackward's arithmetic and may be fused as one (the contract below holds it)
        assert FAMILY_OPS[loss] not in [n.op_type for n in ours], report.lines()
        assert left in report.left[-1].reason, report.lines()
    else:
        assert [n.op_type for n in ours] == [FAMILY_OPS[loss]], report.lines()
        got = {a.name: onnx.helper.get_attribute_value(a) for a in ours[0].attribute}
        for name, value in attrs.items():
            assert got[name] == value
        allowed = FAMILY_REDUCTIONS.get((loss, reduction, dtype, dynamic))
        assert got["reduction"].decode() in (allowed or EQUIVALENT.get(reduction, {reduction}))
    onnx.checker.check_model(fused, full_check=True)
    result = run_session(session(fused), _feeds(fused, args))[0]
    unfused = run_session(session(exported, native=False), _feeds(exported, args))[0]
    assert_close(result, unfused, dtype)
    want = step(*args).detach().numpy()
    assert_close(result, want, EXPORTER_ROUNDS_IN.get((loss, reduction, dtype), dtype))
    _contract(exported, fused, FAMILY_OPS[loss], attrs, reduction, dtype, dynamic, loss)
    if dynamic:
        args2 = _family_inputs(loss, dtype, ((7, 5), (7, 5)), seed=5)
        result = run_session(session(fused), _feeds(fused, args2))[0]
        assert_close(
            result,
            step(*args2).detach().numpy(),
            EXPORTER_ROUNDS_IN.get((loss, reduction, dtype), dtype),
        )


def _contract(
    exported: onnx.ModelProto,
    fused: onnx.ModelProto,
    op_type: str,
    attrs: dict[str, Any],
    reduction: str,
    dtype: str,
    dynamic: bool,
    loss: str = "",
    grad_output: str | None = None,
) -> None:
    """The fused model against the exported one under docs/fusion.md's contract, on
    random values mixed with NaN, infinities, zeros, subnormals and values near overflow.
    `grad_output` names the graph input that holds it (0-d unless the reduction is none);
    without one the step seeds its own."""
    from tests.fusion.contract import Subject, check_fusion
    from tests.fusion.graphs import special_values

    rng = np.random.default_rng(3)
    np_dtype = np.dtype(dtype)
    compute = np.float64 if dtype == "float64" else np.float32
    shape = (6 if dynamic else 4, 5)
    specials = special_values(np_dtype, compute, float(attrs.get("delta", 0.0)))
    inputs = {}
    for i in exported.graph.input:
        size = () if i.name == grad_output and reduction != "none" else shape
        values = rng.normal(0.0, 3.0, size)
        values = np.where(rng.random(size) < 0.3, rng.choice(specials, size), values)
        with np.errstate(all="ignore"):
            inputs[i.name] = values.astype(np_dtype)
    names = [i.name for i in exported.graph.input if i.name != grad_output]
    terms = {"grad_output": grad_output, "self": names[0], "target": names[1]}
    terms |= {"weight": names[2]} if len(names) > 2 else {}
    if loss == "bce_logits_weight":  # pos_weight is w + 0.5, computed in the graph
        pos = [n for n in exported.graph.node if n.op_type == "Add" and names[2] in n.input]
        terms["pos_weight"] = pos[0].output[0]
    output = exported.graph.output[0].name
    subject = Subject(exported, op_type, {**attrs, "reduction": reduction}, terms, compute, output)
    problems = check_fusion(subject, fused, inputs)
    assert not problems, "\n".join(problems)


def _family_ops(loss: str) -> list[str]:
    """The ai.lossgrad nodes a float32 mean step of `loss` fuses to (none for soft margin)."""
    return [] if loss == "soft_margin" else [FAMILY_OPS[loss]]


@pytest.mark.parametrize("loss", sorted(FAMILY_OPS))
def test_family_export_round_trip(loss: str, tmp_path: Any) -> None:
    """export_training_step writes the fused model: one node, the file it saved, and the
    gradient of autograd for another batch size."""
    attrs = FAMILY_ATTRS[loss][-1]
    step = _family_step(loss, "mean", attrs)
    args = _family_inputs(loss, "float32", ((4, 5), (4, 5)))
    path = tmp_path / "step.onnx"
    shapes = _batch_shapes(loss)
    fused, report = export_training_step(step, args, path, dynamic_shapes=shapes)
    ours = [n.op_type for n in fused.graph.node if n.domain == spec.DOMAIN]
    assert ours == _family_ops(loss), report.lines()
    assert onnx.load(str(path)) == fused
    args2 = _family_inputs(loss, "float32", ((9, 5), (9, 5)), seed=2)
    result = run_session(session(str(path)), _feeds(fused, args2))[0]
    assert_close(result, step(*args2).detach().numpy(), "float32")


# F.binary_cross_entropy refuses a target of another size than the input's
@pytest.mark.parametrize("loss", sorted(n for n in FAMILY_OPS if not n.startswith("bce")))
def test_family_broadcast_target(loss: str) -> None:
    """A target of shape [5] against self [4, 5], as PyTorch allows it (with a warning)."""
    attrs = FAMILY_ATTRS[loss][-1]
    step = _family_step(loss, "mean", attrs)
    args = _family_inputs(loss, "float32", ((4, 5), (5,)))
    fused, report = export_training_step(step, args)
    ops = [n.op_type for n in fused.graph.node if n.domain == spec.DOMAIN]
    assert ops == _family_ops(loss), report.lines()
    result = run_session(session(fused), _feeds(fused, args))[0]
    assert_close(result, step(*args).detach().numpy(), "float32")


# --------------------------------------------------------------------------- F.l1_loss

L1_EXPORTS = [
    (reduction, dtype, dynamic)
    for reduction in SL1_REDUCTIONS
    for dtype in DTYPES
    for dynamic in (False, True)
]


def _l1_step(reduction: str) -> Any:
    """The gradient of F.l1_loss with grad_output as a graph input, as a training step that
    receives the loss's gradient from the layer above writes it."""

    def step(x: torch.Tensor, t: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x = x.detach().requires_grad_(True)
        loss = torch.nn.functional.l1_loss(x, t, reduction=reduction)
        return torch.autograd.grad(loss, x, g)[0]

    return step


@pytest.mark.parametrize(
    ("reduction", "dtype", "dynamic"),
    L1_EXPORTS,
    ids=[f"{r}-{d}{'-dynamic' * y}" for r, d, y in L1_EXPORTS],
)
def test_l1_export_is_one_l1_loss_backward(reduction: str, dtype: str, dynamic: bool) -> None:
    """The exporter writes (g/n)*sign(x - t) (Sub Expand Div Sign Mul for mean): one
    L1LossBackward with the graph's own reduction, grad_output the graph's g, under the
    fusion contract. In float16 the mean's division rounds to float16, which the operator
    (float32, one rounding) does not: left, with the reason."""
    library_path()
    step = _l1_step(reduction)
    x, t = _inputs("smooth_l1", {"beta": 0.0}, dtype, ((4, 5), (4, 5)))
    g = (torch.randn(4, 5) if reduction == "none" else torch.tensor(1.5)).to(DTYPES[dtype])
    batch = {0: "batch"}
    shapes = (batch, batch, batch if reduction == "none" else None) if dynamic else None
    exported, _ = export_training_step(step, (x, t, g), dynamic_shapes=shapes, fuse_gradients=False)
    fused, report = fuse(exported)
    ours = [n for n in fused.graph.node if n.domain == spec.DOMAIN]
    if (dtype, reduction) == ("float16", "mean"):
        assert ours == [] and "computes in float16" in report.left[0].reason, report.lines()
        return
    assert [n.op_type for n in fused.graph.node] == ["L1LossBackward"], report.lines()
    got = onnx.helper.get_attribute_value(ours[0].attribute[0]).decode()
    assert got in ({"mean"} if reduction == "mean" else {"none", "sum"}), report.lines()
    assert list(ours[0].input) == [
        i.name for i in (exported.graph.input[2], *exported.graph.input[:2])
    ]
    g_name = exported.graph.input[2].name
    _contract(exported, fused, "L1LossBackward", {}, reduction, dtype, dynamic, grad_output=g_name)
    want = step(x, t, g).detach().numpy()
    result = run_session(session(fused), _feeds(fused, (x, t, g)))[0]
    assert_close(result, want, dtype)
