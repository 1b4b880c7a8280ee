"""The ONNX frontend on the classification operators: their nodes are typed (an int64 or
int32 target) and validated by spec (errors name the node), grouped by signatures in which
every dimension is dynamic except those of the one-element inputs, and the level-1 IR of a
signature lowers (lower-lossgrad) to a level-2 function that verifies and computes the
reference, bit for bit, with its target check."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from xdsl.dialects.builtin import TensorType

from lossgrad_compiler import errors, spec
from lossgrad_compiler import onnx as lo
from lossgrad_compiler.frontend import import_model, lossgrad_module, lower_signatures
from lossgrad_compiler.frontend.ir import MLIR_ELEMENT_TYPES, argument_types
from lossgrad_compiler.frontend.signature import Signature
from lossgrad_compiler.interpreter import run_function
from lossgrad_compiler.level2 import analyze_function
from lossgrad_compiler.level2.verify import verify_level2
from tests.helpers.class_cases import (
    ClassCase,
    all_class_cases,
    every,
    inputs_in_order,
    make_class_case,
    out_of_range_case,
    signature_shape,
)
from tests.helpers.class_models import class_model
from tests.helpers.tolerances import bits

NLL, NLL2D = spec.NLL_LOSS_BACKWARD.name, spec.NLL_LOSS_2D_BACKWARD.name
CE = spec.CROSS_ENTROPY_LOSS_GRAD.name
F32, I64 = TensorProto.FLOAT, TensorProto.INT64
SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def signature(model: onnx.ModelProto) -> Signature:
    (site,) = import_model(model).sites
    return site.signature


# --------------------------------------------------------------------------- signatures


@pytest.mark.parametrize(
    ("op_type", "shape", "dtype", "options", "expected"),
    [
        (NLL, (6, 5), np.float32, {},
         "nll_loss_backward__f32_f32_i64_f32_none__0d_dxd_d_0d_none__mean_ignore_indexm100"),
        (NLL, (6, 5), np.float16,
         {"reduction": "none", "weighted": True, "ignore_index": 1, "target_dtype": np.int32},
         "nll_loss_backward__f16_f16_i32_f16_f16__d_dxd_d_0d_d__none_ignore_index1"),
        (NLL, (5,), np.float64, {"reduction": "none"},  # no batch: grad_output one element
         "nll_loss_backward__f64_f64_i64_f64_none__0d_d_0d_0d_none__none_ignore_indexm100"),
        (NLL, (6, 5), np.float32, {"grad_output_shape": (1,), "ignore_index": 100},
         "nll_loss_backward__f32_f32_i64_f32_none__1_dxd_d_0d_none__mean_ignore_index100"),
        (NLL2D, (2, 4, 3, 3), "bfloat16", {"reduction": "sum", "weighted": True},
         "nll_loss2d_backward__bf16_bf16_i64_bf16_bf16__0d_dxdxdxd_dxdxd_0d_d__sum_"
         "ignore_indexm100"),
        (NLL2D, (2, 4, 3, 3), np.float32, {"reduction": "none"},
         "nll_loss2d_backward__f32_f32_i64_f32_none__dxdxd_dxdxdxd_dxdxd_0d_none__none_"
         "ignore_indexm100"),
        (CE, (6, 5), np.float32, {},  # no total_weight; label_smoothing last
         "cross_entropy_loss_grad__f32_f32_i64_none__0d_dxd_d_none__mean_ignore_indexm100_"
         "label_smoothing0p0"),
        (CE, (6, 5), np.float32,
         {"reduction": "none", "weighted": True, "ignore_index": 1, "target_dtype": np.int32,
          "label_smoothing": 0.25},
         "cross_entropy_loss_grad__f32_f32_i32_f32__d_dxd_d_d__none_ignore_index1_"
         "label_smoothing0p25"),
        (CE, (6, 5), "bfloat16", {"reduction": "sum", "weighted": True, "label_smoothing": 1.0},
         "cross_entropy_loss_grad__bf16_bf16_i64_bf16__0d_dxd_d_d__sum_ignore_indexm100_"
         "label_smoothing1p0"),
    ],
)  # fmt: skip
def test_signature_ids(op_type, shape, dtype, options, expected):
    if dtype == "bfloat16":
        dtype = spec.BFLOAT16.dtype
    case = make_class_case(op_type, shape, dtype, **options)
    found = signature(class_model(case))
    assert found.id == expected
    assert SYMBOL.match(found.id)
    target = spec.index_type(case.inputs["target"].dtype)
    assert found.types[2] is target  # the class indices' type, beside the float types


def _sample() -> list[ClassCase]:
    cases = list(all_class_cases())
    int32 = [c for c in cases if c.inputs["target"].dtype == np.int32]
    return every(cases, 4) + every(int32, 6)  # both sides of weight and label smoothing


@pytest.mark.parametrize("case", _sample(), ids=lambda c: c.label)
def test_static_and_symbolic_models_share_one_signature(case: ClassCase):
    """Every dimension is dynamic but a one-element input's: the signature form of
    tests/helpers/class_cases.py (signature_shape)."""
    static = signature(class_model(case))
    symbolic = signature(class_model(case, symbolic=True))
    assert static == symbolic
    assert static.present == case.present
    expected = [
        TensorType(MLIR_ELEMENT_TYPES[_mlir(case.inputs[n].dtype)], signature_shape(case, n))
        for n in case.present
    ]
    assert argument_types(static) == expected


def _mlir(dtype: np.dtype) -> str:
    found = spec.float_type(dtype) or spec.index_type(dtype)
    assert found is not None
    return found.mlir


def one_element_vectors(case: ClassCase) -> ClassCase:
    """The case with a [1] total_weight, where the operator has one (CrossEntropyLossGrad
    computes its divisor), and a [1] grad_output where it is one element."""
    inputs = dict(case.inputs)
    if "total_weight" in inputs:
        inputs["total_weight"] = inputs["total_weight"].reshape(1)
    if inputs["grad_output"].ndim == 0:
        inputs["grad_output"] = inputs["grad_output"].reshape(1)
    return dataclasses.replace(case, inputs=inputs, label=f"{case.label}-vectors")


def test_a_symbolic_one_element_input_is_a_static_one():
    """total_weight and a reduced grad_output declared [k] hold one element: k is 1."""
    case = one_element_vectors(make_class_case(NLL, (6, 5), np.float32))
    model = class_model(case, symbolic=True)
    for value in model.graph.input:
        if value.name in ("go", "tw"):
            value.type.tensor_type.shape.dim[0].dim_param = f"k_{value.name}"
    found = signature(model)
    assert found.patterns[0] == found.patterns[3] == (1,)
    assert found.patterns[1] == (None, None)
    assert [str(t) for t in argument_types(found)] == [
        "tensor<1xf32>", "tensor<?x?xf32>", "tensor<?xi64>", "tensor<1xf32>",
    ]  # fmt: skip


def test_signature_ids_are_injective():
    """Distinct signatures (types, target type, weight, one-element shapes, reduction,
    ignore_index of either sign) have distinct ids, and equal ones equal ids."""
    cases = list(all_class_cases())
    for ignore in (-1, 0, 100, -100, 1):
        for target_dtype in (np.int64, np.int32):
            cases.append(
                make_class_case(NLL, (3, 4), np.float32, ignore_index=ignore,
                                target_dtype=target_dtype)
            )  # fmt: skip
    cases += [
        make_class_case(NLL, (3, 4), np.float32, grad_output_shape=shape) for shape in ((), (1,))
    ]
    signatures = {signature(class_model(c)) for c in cases}
    ids = {s.id for s in signatures}
    assert len(ids) == len(signatures) > 100
    assert all(SYMBOL.match(i) for i in ids)


def test_label_smoothing_values_give_distinct_signatures():
    """Each label_smoothing is its own signature (its value is built into the body), read
    as ONNX stores it: a float32 widened exactly (0.1 is 0.10000000149011612)."""
    found = {
        ls: signature(class_model(make_class_case(CE, (4, 3), np.float32, label_smoothing=ls)))
        for ls in (0.0, 0.1, 0.25, 1.0)
    }
    assert len({s.id for s in found.values()}) == 4
    assert found[0.1].attributes["label_smoothing"] == float(np.float32(0.1))
    assert found[0.1].id.endswith("_label_smoothing0p10000000149011612")
    assert [s.present for s in found.values()] == [("grad_output", "self", "target")] * 4


def test_class_and_elementwise_nodes_in_one_model():
    case = make_class_case(NLL, (6, 5), np.float32)
    model = class_model(case, symbolic=True)
    model.graph.node.append(lo.make_node("KlDivBackward", ["go", "x", "x"], "k", name="kl"))
    model.graph.output.append(helper.make_tensor_value_info("k", F32, ["N", "C"]))
    imported = import_model(model)
    assert [s.op_type for s in imported.signatures.values()] == [NLL, "KlDivBackward"]
    counts = imported.nodes_per_operator()
    assert (counts[NLL], counts["KlDivBackward"], counts[NLL2D]) == (1, 1, 0)


# --------------------------------------------------------------------------- errors


def raw_model(types: dict[str, int], shapes: dict[str, list], **attrs) -> onnx.ModelProto:
    """A NLLLossBackward node 'bad' on self [3, 5] unless `types` or `shapes` change it."""
    node = helper.make_node(
        NLL, ["go", "x", "t", "tw", "w"], ["y"], name="bad", domain=spec.DOMAIN, **attrs
    )
    base = {"go": (F32, []), "x": (F32, [3, 5]), "t": (I64, [3]), "tw": (F32, []), "w": (F32, [5])}
    inputs = [
        helper.make_tensor_value_info(v, types.get(v, e), shapes.get(v, s))
        for v, (e, s) in base.items()
    ]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", F32, None)])
    return helper.make_model(
        graph,
        ir_version=10,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(spec.DOMAIN, 4)],
    )


@pytest.mark.parametrize(
    ("types", "shapes", "attrs", "error", "words"),
    [
        ({"t": F32}, {}, {}, errors.ElementTypeError,
         "target: element type must be one of int64, int32, got float32"),
        ({"t": TensorProto.INT8}, {}, {}, errors.ElementTypeError, "got int8"),
        ({"w": TensorProto.DOUBLE}, {}, {}, errors.ElementTypeError,
         "weight: element type must be self's (float32), got float64"),
        ({}, {"t": [4]}, {}, errors.ClassShapeError, "target: shape [4] must be [3]"),
        ({}, {"x": [3, 5, 2]}, {}, errors.ClassShapeError, "must be rank 2 or rank 1"),
        ({}, {"go": []}, {"reduction": "none"}, errors.ClassShapeError,
         "grad_output: shape [] must be [3] (target's, for reduction none)"),
        ({}, {"tw": [3]}, {}, errors.ClassShapeError, "total_weight: shape [3] must be one"),
        ({}, {"w": [6]}, {}, errors.ClassShapeError, "weight: shape [6] must be [5]"),
        ({}, {}, {"ignore_index": 1.5}, errors.AttributeValueError, "must be an ONNX INT"),
    ],
)  # fmt: skip
def test_invalid_class_nodes_raise_spec_errors_naming_the_node(types, shapes, attrs, error, words):
    with pytest.raises(error) as info:
        import_model(raw_model(types, shapes, **attrs))
    message = str(info.value)
    assert message.startswith("NLLLossBackward node 'bad': ") and words in message
    assert info.value.code == errors.ACLNN_ERR_PARAM_INVALID


def test_an_untyped_target_is_reported_as_unknown_not_as_a_float():
    """The importer validates an untyped input as a stand-in of its kind (int64 for the
    class indices), so the error says what is missing."""
    model = raw_model({}, {})
    model.graph.node[0].input[2] = "u"
    model.graph.node.insert(0, helper.make_node("Unknown", ["t"], ["u"], domain="elsewhere"))
    model.opset_import.append(helper.make_opsetid("elsewhere", 1))
    with pytest.raises(errors.InvalidArgumentError, match=r"'bad': target: the element type of "):
        import_model(model)


# --------------------------------------------------------------------------- round trip


def _round_trip_cases() -> list[ClassCase]:
    cases = list(all_class_cases(dtypes=[np.float32, spec.BFLOAT16.dtype]))
    vectors = [one_element_vectors(c) for c in cases[3::29]]
    return [*cases[::7], *vectors, make_class_case(NLL, (0, 4), np.float16, reduction="none")]


@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
@pytest.mark.parametrize("case", _round_trip_cases(), ids=lambda c: c.label)
def test_model_to_level2_and_back_to_the_reference(case: ClassCase, symbolic: bool):
    """model → lossgrad dialect (verified) → lower-lossgrad → level 2 (verified, with the
    target check as its second result) → the interpreter: the reference, bit for bit."""
    imported = import_model(class_model(case, symbolic=symbolic))
    level1 = lossgrad_module(imported.signatures.values())
    level1.verify()
    module = lower_signatures(imported.signatures.values())
    module.verify()
    verify_level2(module)
    (function,) = module.ops
    analyzed = analyze_function(function)
    assert [check.rule for check in analyzed.checks] == ["target_range"]
    assert [o.name for o in analyzed.operands] == list(case.present)
    name = next(iter(imported.signatures))
    got, bad = run_function(module, name, *inputs_in_order(case))
    expected = case.expected()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(bits(got), bits(expected), err_msg=case.label)
    assert int(bad) == 0


@pytest.mark.parametrize("op_type", [NLL, NLL2D])
def test_the_lowered_target_check_counts_bad_targets(op_type: str):
    case = out_of_range_case(op_type)
    imported = import_model(class_model(case, symbolic=True))
    module = lower_signatures(imported.signatures.values())
    (name,) = imported.signatures
    _, bad = run_function(module, name, *inputs_in_order(case))
    assert int(bad) == 2
