"""The lossgrad dialect's Python API (make_op, OP_CLASSES, onnx_attributes), its verifier
(spec.validate's messages, word for word), its custom form, and lossgrad_compiler.context."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BoolAttr,
    FloatAttr,
    ModuleOp,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i32,
)
from xdsl.ir import Attribute, Block
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from lossgrad_compiler import spec
from lossgrad_compiler.context import make_context, parse_module
from lossgrad_compiler.dialects.lossgrad import (
    OP_CLASSES,
    KlDivBackwardOp,
    KlDivTargetBackwardOp,
    Lossgrad,
    LossGradOp,
    ReductionAttr,
    SmoothL1LossBackwardOp,
    make_op,
)
from lossgrad_compiler.errors import (
    AttributeValueError,
    BroadcastError,
    InvalidArgumentError,
    LossGradError,
)

DYN = DYNAMIC_INDEX


def args_block(*types: Attribute) -> Block:
    return Block(arg_types=list(types))


def build(op_type: str, types: tuple[Attribute, ...], attrs: dict[str, Any]) -> LossGradOp:
    block = args_block(*types)
    checked = spec.check_attributes(spec.operator(op_type), attrs)
    return make_op(op_type, list(block.args), checked)


def text_of(module: ModuleOp, *, generic: bool = False) -> str:
    stream = io.StringIO()
    Printer(stream=stream, print_generic_format=generic).print_op(module)
    return stream.getvalue()


# --------------------------------------------------------------------------- python API


def test_op_classes_cover_the_spec() -> None:
    assert set(OP_CLASSES) == set(spec.OPERATORS)
    for op_type, cls in OP_CLASSES.items():
        assert cls.SPEC is spec.OPERATORS[op_type]
        assert cls.name == f"lossgrad.{spec.OPERATORS[op_type].mnemonic}"
    assert {op.name for op in Lossgrad.operations} == {c.name for c in OP_CLASSES.values()}
    assert ReductionAttr in list(Lossgrad.attributes)


@pytest.mark.parametrize(
    ("op_type", "types", "result"),
    [
        (
            "KlDivBackward",
            (TensorType(f32, []), TensorType(f16, [4, 1]), TensorType(f64, [3])),
            TensorType(f16, [4, 1]),
        ),
        (
            "KlDivTargetBackward",
            (TensorType(f32, []), TensorType(bf16, [DYN, 3]), TensorType(f32, [3])),
            TensorType(f32, [3]),
        ),
        (
            "SmoothL1LossBackward",
            (TensorType(f16, [5, 1]), TensorType(f16, [DYN]), TensorType(bf16, [1])),
            TensorType(f32, [5, DYN]),
        ),
        (
            "SmoothL1LossBackward",
            (TensorType(f64, []), TensorType(f32, [DYN]), TensorType(f32, [4])),
            TensorType(f64, [4]),
        ),
    ],
)
def test_make_op_derives_the_result_type(
    op_type: str, types: tuple[Attribute, ...], result: TensorType
) -> None:
    op = build(op_type, types, {})
    assert isinstance(op, OP_CLASSES[op_type])
    assert op.result.type == result
    op.verify()


@pytest.mark.parametrize(
    ("op_type", "attrs"),
    [
        ("KlDivBackward", {"reduction": "batchmean", "log_target": 1}),
        ("KlDivTargetBackward", {"reduction": "none", "log_target": 0}),
        ("SmoothL1LossBackward", {"reduction": "sum", "beta": 0.1}),
        ("SmoothL1LossBackward", {"reduction": "mean", "beta": math.inf}),
        ("SmoothL1LossBackward", {}),
    ],
)
def test_onnx_attributes_round_trip(op_type: str, attrs: dict[str, Any]) -> None:
    checked = spec.check_attributes(spec.operator(op_type), attrs)
    t = TensorType(f32, [2, 3])
    op = build(op_type, (t, t, t), attrs)
    assert op.onnx_attributes() == checked


def test_beta_is_held_in_double_precision() -> None:
    t = TensorType(f64, [3])
    op = build("SmoothL1LossBackward", (t, t, t), {"beta": 0.1})
    assert isinstance(op, SmoothL1LossBackwardOp)
    assert op.onnx_attributes()["beta"] == 0.1  # an f32 attribute would hold 0.1000000014...
    assert op.beta == FloatAttr(0.1, f64)


def test_defaults_come_from_the_spec() -> None:
    kl = KlDivBackwardOp.get_irdl_definition().properties
    sl1 = SmoothL1LossBackwardOp.get_irdl_definition().properties
    assert kl["reduction"].default_value == ReductionAttr(spec.Reduction("mean"))
    assert spec.KL_DIV_BACKWARD.defaults["reduction"] == "mean"
    assert kl["log_target"].default_value == BoolAttr.from_bool(False)
    assert sl1["beta"].default_value == FloatAttr(spec.BETA.default, f64)
    assert [r.value for r in spec.Reduction] == ["none", "mean", "sum", "batchmean"]


def test_make_op_rejects_what_the_spec_rejects() -> None:
    t = TensorType(f32, [4])
    with pytest.raises(AttributeValueError) as err:
        build("SmoothL1LossBackward", (t, t, t), {"reduction": "batchmean"})
    assert err.value.code == 161002
    with pytest.raises(BroadcastError):
        build("KlDivBackward", (t, t, TensorType(f32, [3])), {})
    with pytest.raises(InvalidArgumentError, match="op_type"):
        make_op("Nope", list(args_block(t, t, t).args), {})
    with pytest.raises(LossGradError, match="element type"):
        build("KlDivBackward", (t, TensorType(i32, [4]), t), {})


# --------------------------------------------------------------------------- verifier


def raw_op(
    cls: type[LossGradOp], types: tuple[Attribute, ...], result: Attribute, **props: Attribute
) -> LossGradOp:
    """An op built without make_op's checks, as a parser would build it."""
    block = args_block(*types)
    op = cls.create(operands=list(block.args), result_types=[result], properties=props)
    block.add_op(op)
    return op


@pytest.mark.parametrize(
    ("cls", "types", "result", "props"),
    [
        (
            KlDivBackwardOp,
            (TensorType(f32, []), TensorType(i32, [4]), TensorType(f32, [4])),
            TensorType(i32, [4]),
            {},
        ),
        (
            KlDivTargetBackwardOp,
            (TensorType(f32, [2, 4]), TensorType(f32, [4]), TensorType(f32, [4])),
            TensorType(f32, [4]),
            {},
        ),
        (
            SmoothL1LossBackwardOp,
            (TensorType(f32, []), TensorType(f32, [4]), TensorType(f32, [4])),
            TensorType(f32, [4]),
            {"beta": FloatAttr(-1.0, f64)},
        ),
        (
            SmoothL1LossBackwardOp,
            (TensorType(f32, []), TensorType(f32, [4]), TensorType(f32, [4])),
            TensorType(f32, [4]),
            {"reduction": ReductionAttr(spec.Reduction.BATCHMEAN)},
        ),
    ],
)
def test_verifier_message_is_the_spec_message(
    cls: type[LossGradOp],
    types: tuple[Attribute, ...],
    result: Attribute,
    props: dict[str, Attribute],
) -> None:
    op = raw_op(cls, types, result, **props)
    with pytest.raises(LossGradError) as expected:
        op.check()
    with pytest.raises(VerifyException) as err:
        op.verify()
    assert str(err.value) == str(expected.value)
    assert "[aclnn 161002 ACLNN_ERR_PARAM_INVALID]" in str(err.value)


def test_verifier_checks_the_declared_result_type() -> None:
    t = TensorType(f32, [4])
    op = raw_op(KlDivBackwardOp, (t, t, t), TensorType(f32, [DYN]))
    with pytest.raises(VerifyException, match=r"KlDivBackward: result: type must be tensor<4xf32>"):
        op.verify()


def test_verifier_rejects_nan_beta() -> None:
    t = TensorType(f32, [4])
    op = raw_op(SmoothL1LossBackwardOp, (t, t, t), t, beta=FloatAttr(math.nan, f64))
    with pytest.raises(VerifyException, match="not NaN"):
        op.verify()


# --------------------------------------------------------------------------- custom form

HEADER = "func.func @f(%a: tensor<f32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {\n"


def one_op(line: str) -> str:
    return HEADER + f"  %r = {line}\n  func.return %r : tensor<4xf32>\n}}\n"


TYPES = ": tensor<f32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>"


@pytest.mark.parametrize(
    "props",
    [
        "",
        "reduction = sum",
        "beta = 2.500000e-01",
        "reduction = none beta = 0.000000e+00",
        "beta = 0x7ff0000000000000",
    ],
)
def test_custom_form_round_trips(props: str) -> None:
    text = one_op(f"lossgrad.smooth_l1_loss_backward %a, %b, %c {props} {TYPES}")
    module = parse_module(text)
    printed = text_of(module)
    assert f"%b, %c {props} :" in printed if props else "%b, %c :" in printed
    again = parse_module(printed)
    assert again.is_structurally_equivalent(module)
    generic = parse_module(text_of(module, generic=True))
    assert generic.is_structurally_equivalent(module)


def test_properties_in_any_order_and_attribute_dictionary() -> None:
    text = one_op(
        f"lossgrad.kl_div_backward %a, %b, %c log_target = true reduction = sum {{tag = 1}} {TYPES}"
    )
    op = next(o for o in parse_module(text).walk() if isinstance(o, KlDivBackwardOp))
    assert op.onnx_attributes() == {"reduction": "sum", "log_target": 1}
    assert "tag" in op.attributes
    assert "reduction = sum log_target = true {tag = 1 : i64} :" in str(op)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("lossgrad.kl_div_backward %a, %b, %c reduction = average", "Expected `none`"),
        ("lossgrad.kl_div_backward %a, %b, %c reduction = sum reduction = sum", "given twice"),
        ("lossgrad.smooth_l1_loss_backward %a, %b, %c beta = 1", "float literal"),
        ("lossgrad.kl_div_backward %a, %b, %c log_target = 1", "true or false"),
        ("lossgrad.kl_div_backward %a, %b, %c beta = 1.0", "Expected ':'"),
    ],
)
def test_custom_form_parse_errors(line: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_module(one_op(f"{line} {TYPES}"))


def test_context_loads_the_level2_dialects() -> None:
    ctx = make_context()
    names = set(ctx.registered_dialect_names)
    assert {"builtin", "func", "arith", "math", "tensor", "linalg", "lossgrad"} <= names
    with pytest.raises(VerifyException, match="aclnn 161002"):
        parse_module(one_op(f"lossgrad.smooth_l1_loss_backward %a, %b, %c beta = -1.0 {TYPES}"))
    unverified = parse_module(
        one_op(f"lossgrad.smooth_l1_loss_backward %a, %b, %c beta = -1.0 {TYPES}"), verify=False
    )
    assert isinstance(unverified, ModuleOp)
