"""Raw models loaded straight into ONNX Runtime with the kernel library registered (no
prepare_model, no session()): the kernels apply the compiler's attribute rules to every
attribute ORT lets a custom-op kernel see, with the compiler's messages and aclnn codes.

ONNX Runtime hides three things from a custom-op kernel (see cxx/glue.h): the model's
ai.lossgrad opset version, the names of attributes the kernel does not ask for, and the type
of an attribute no kernel getter reads (STRINGS, GRAPH, ...). These tests pin down everything
else, and what the kernels do about the three."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import AttributeProto, ModelProto, TensorProto, helper

from lossgrad_compiler import reference, spec
from lossgrad_compiler.backends.ort.glue_printer import foreign_attribute_names
from lossgrad_compiler.errors import ACLNN_ERR_PARAM_INVALID, InvalidArgumentError, LossGradError
from lossgrad_compiler.evaluation.ort import session
from lossgrad_compiler.onnx.attributes import attributes_from_protos
from lossgrad_compiler.onnx.opsets import check_opset_imports
from lossgrad_compiler.targets.ort_library import kernel_library_source as library_source
from tests.ort.support import native_library, node_model

F32 = np.float32
SHAPES = ((), (3,), (3,))
TENSOR = helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])


pytestmark = pytest.mark.usefixtures("native_kernels")


def raw_model(op_type: str, attributes: list[AttributeProto]) -> ModelProto:
    """One node carrying exactly `attributes` (no builder checks, no defaults written)."""
    model = node_model(op_type, {}, (F32,) * 3, SHAPES, write_attributes=False)
    del model.graph.node[0].attribute[:]
    model.graph.node[0].attribute.extend(attributes)
    return model


def raw_session(model: ModelProto) -> ort.InferenceSession:
    """What a user does without the project's helpers: register the library, load the model."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.register_custom_ops_library(native_library())
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def compiler_message(op_type: str, attributes: list[AttributeProto]) -> str | None:
    """The compiler's error for these attributes (None when it accepts them)."""
    try:
        attributes_from_protos(op_type, attributes)
    except LossGradError as err:
        return str(err)
    return None


def kernel_message(op_type: str, attributes: list[AttributeProto]) -> str | None:
    """The kernel library's error at session creation (None when the session runs)."""
    try:
        sess = raw_session(raw_model(op_type, attributes))
    except Exception as err:  # onnxruntime's Fail/RuntimeException: the status's text
        text = str(err)
        match = re.search(r"Exception during initialization: (.*)$", text, re.S)
        assert match, text
        return match.group(1).strip()
    feeds = {"go": np.ones((), F32), "x": np.ones(3, F32), "t": np.full(3, 0.5, F32)}
    sess.run(None, feeds)
    return None


def assert_same_verdict(op_type: str, attributes: list[AttributeProto]) -> None:
    expected = compiler_message(op_type, attributes)
    assert kernel_message(op_type, attributes) == expected
    if expected is not None:
        assert "[aclnn 161002 ACLNN_ERR_PARAM_INVALID]" in expected


def attr(name: str, value: object, attr_type: int | None = None) -> AttributeProto:
    return helper.make_attribute(name, value, attr_type=attr_type)


# ------------------------------------------------------------------ string values, whole


@pytest.mark.parametrize(
    "value", [b"none\x00x", b"mean\x00", b"\x00sum", b"none\x00", b"sum\x00\x00"]
)
def test_string_with_nul_is_read_whole(value: bytes) -> None:
    """The value is the attribute's bytes (ORT returns their length), not a C string that
    stops at the first NUL: "none\\0x" is not "none"."""
    assert_same_verdict("KlDivBackward", [attr("reduction", value)])


@settings(max_examples=60)
@given(value=st.binary(max_size=12))
def test_any_reduction_bytes_same_verdict_as_compiler(value: bytes) -> None:
    """Arbitrary bytes, malformed UTF-8 included: accepted exactly when the compiler accepts
    them, else the compiler's message (Python's repr of the replace-decoded text)."""
    assert_same_verdict("SmoothL1LossBackward", [attr("reduction", value)])


@settings(max_examples=60)
@given(value=st.text(max_size=6))
def test_any_reduction_text_same_verdict_as_compiler(value: str) -> None:
    """Any Unicode text, unprintable and unassigned code points included: the message shows
    it as Python's repr does (\\x, \\u, \\U escapes)."""
    assert_same_verdict("KlDivTargetBackward", [attr("reduction", value.encode("utf-8"))])


# ------------------------------------------------------------------ attribute types


@pytest.mark.parametrize(
    "op_type,attribute",
    [
        ("KlDivBackward", attr("reduction", [1, 2])),
        ("KlDivBackward", attr("reduction", [0.5, 1.0])),
        ("KlDivBackward", attr("log_target", [1])),
        ("KlDivBackward", attr("log_target", [1.0])),
        ("SmoothL1LossBackward", attr("beta", [0.5])),
        ("SmoothL1LossBackward", attr("beta", [1, 2])),
        ("SmoothL1LossBackward", attr("beta", "0.5")),
        ("SmoothL1LossBackward", attr("beta", 1)),
        ("KlDivTargetBackward", attr("reduction", 2)),
        ("KlDivTargetBackward", attr("reduction", 2.0)),
        ("KlDivTargetBackward", attr("log_target", "1")),
        (
            "KlDivTargetBackward",
            attr("log_target", helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else AttributeProto.AttributeType.Name(v.type),
)
def test_wrong_type_named_exactly(op_type: str, attribute: AttributeProto) -> None:
    """Every type ORT lets a kernel read is named as the compiler names it: INT, FLOAT,
    STRING, TENSOR, and non-empty INTS and FLOATS (ORT's loader rejects an attribute whose
    data is not of its declared type, so a non-empty list is of that list's type)."""
    assert_same_verdict(op_type, [attribute])


@pytest.mark.parametrize(
    "attribute",
    [
        attr("reduction", ["mean"]),
        attr("reduction", ["mean", "sum"]),
        attr("reduction", [], attr_type=AttributeProto.STRINGS),
        attr("reduction", [], attr_type=AttributeProto.INTS),
        attr("reduction", [TENSOR]),
    ],
    ids=["strings", "two_strings", "empty_strings", "empty_ints", "tensors"],
)
def test_unreadable_list_type_is_not_misnamed(attribute: AttributeProto) -> None:
    """ORT gives kernels no getter for STRINGS (nor TENSORS, GRAPH, ...) and reads every
    present attribute as an empty INTS; the kernel rejects it with the compiler's rule and
    says it is STRINGS or another type it cannot see, never a wrong type such as INTS."""
    expected = compiler_message("KlDivBackward", [attribute])
    assert expected is not None
    rule = expected.split(", got ")[0]
    got = kernel_message("KlDivBackward", [attribute])
    assert got is not None
    assert got.startswith(rule + ", got STRINGS or another list or graph type"), got
    assert got.endswith("[aclnn 161002 ACLNN_ERR_PARAM_INVALID]"), got


# ------------------------------------------------------------------ unknown attributes


def foreign(op_type: str) -> list[str]:
    return foreign_attribute_names(spec.operator(op_type))


@pytest.mark.parametrize(
    "op_type,name,value",
    [
        ("KlDivBackward", "beta", 0.5),
        ("KlDivTargetBackward", "beta", 1.0),
        ("SmoothL1LossBackward", "log_target", 1),
        ("KlDivBackward", "logTarget", 1),
        ("KlDivBackward", "LogTarget", 1),
        ("KlDivBackward", "logtarget", 1),
        ("KlDivBackward", "log-target", 1),
        ("KlDivBackward", "LOG_TARGET", 1),
        ("SmoothL1LossBackward", "Beta", 0.5),
        ("SmoothL1LossBackward", "Reduction", "sum"),
        ("SmoothL1LossBackward", "REDUCTION", "sum"),
    ],
)
def test_foreign_attribute_rejected(op_type: str, name: str, value: object) -> None:
    """Another operator's attribute, or a respelling of any spec attribute, would otherwise
    be ignored and the kernel would run with the default: rejected with the compiler's
    message."""
    assert name in foreign(op_type)
    assert_same_verdict(op_type, [attr("reduction", "sum"), attr(name, value)])


def test_foreign_names_are_every_spelling_of_every_spec_attribute() -> None:
    names = {a.name for op in spec.OPERATORS.values() for a in op.attributes}
    for op in spec.OPERATORS.values():
        probed = set(foreign_attribute_names(op))
        own = {a.name for a in op.attributes}
        assert not probed & own
        assert names - own <= probed
        assert probed == set(sorted(probed))


@pytest.mark.parametrize(
    "op_type,attributes",
    [
        # A wrong type is reported before an unknown name, an unknown name before a value.
        ("KlDivBackward", [attr("reduction", "bad"), attr("log_target", 1.0)]),
        ("KlDivBackward", [attr("beta", 1.0), attr("log_target", 1.0)]),
        ("KlDivBackward", [attr("reduction", "bad"), attr("beta", 1.0)]),
        ("SmoothL1LossBackward", [attr("beta", -1.0), attr("log_target", 1), attr("Beta", 1.0)]),
        ("SmoothL1LossBackward", [attr("reduction", "batchmean"), attr("beta", float("nan"))]),
    ],
)
def test_several_errors_reported_in_the_compilers_order(
    op_type: str, attributes: list[AttributeProto]
) -> None:
    assert_same_verdict(op_type, attributes)


@settings(max_examples=40)
@given(
    op_type=st.sampled_from(list(spec.BROADCAST_OPERATORS)),
    reduction=st.sampled_from(["none", "mean", "sum", "batchmean", "avg", None]),
    log_target=st.sampled_from([0, 1, 2, 1.0, None]),
    beta=st.sampled_from([0.0, 0.5, -1.0, 2, None]),
    extra=st.sampled_from([None, "Beta", "logTarget", "REDUCTION", "beta", "log_target"]),
)
def test_attribute_combinations_same_verdict_as_compiler(
    op_type: str, reduction: object, log_target: object, beta: object, extra: str | None
) -> None:
    """Valid and invalid combinations, in spec's order on the node: the kernel accepts what
    the compiler accepts and otherwise says what it says."""
    attributes = []
    for name, value in (("reduction", reduction), ("log_target", log_target), ("beta", beta)):
        if value is not None:
            attributes.append(attr(name, value))
    if extra is not None and extra not in {a.name for a in attributes}:
        attributes.append(attr(extra, 1))
    assert_same_verdict(op_type, attributes)


# ------------------------------------------------------------------ opset version


def with_lossgrad_import(model: ModelProto, version: int) -> ModelProto:
    for opset in model.opset_import:
        if opset.domain == spec.DOMAIN:
            opset.version = version
    return model


FEEDS = {
    "go": np.full((), 0.5, F32),
    "x": np.array([0.1, 0.7, 1.3], F32),
    "t": np.full(3, 0.5, F32),
}


@pytest.mark.parametrize("op_type", list(spec.BROADCAST_OPERATORS))
def test_opset_version_1_runs_every_operator(op_type: str) -> None:
    """The one ai.lossgrad version: each operator runs raw, with the default attributes, and matches
    the reference."""
    model = with_lossgrad_import(raw_model(op_type, []), spec.OPSET_VERSION)
    (got,) = raw_session(model).run(None, FEEDS)
    inputs = dict(zip(spec.INPUT_NAMES, FEEDS.values(), strict=True))
    np.testing.assert_allclose(got, reference.evaluate(op_type, inputs), rtol=1e-6)


@pytest.mark.parametrize("op_type", list(spec.BROADCAST_OPERATORS))
def test_opset_version_0_is_refused_by_onnx_runtime_with_a_clear_error(op_type: str) -> None:
    """No schema ORT builds for a custom op starts below version 1, so ORT itself refuses
    an import of version 0 at session creation: one line naming the domain and operator."""
    model = with_lossgrad_import(raw_model(op_type, []), 0)
    with pytest.raises(Exception, match=r"is not a registered function/op") as raised:
        raw_session(model)
    text = str(raised.value)
    assert f"{spec.DOMAIN}:{op_type}" in text
    assert "\n" not in text.strip()


def test_registration_declares_each_operators_versions() -> None:
    """Each custom op claims versions [its since_version, the current version] of
    ai.lossgrad: 1 to 2 for the first three operators, 2 to 2 for the loss family. ONNX
    Runtime builds one schema per op name and matches kernels against its since-version, not
    against the model's import, so this does not by itself reject a model's import; the
    declaration says what the kernels implement."""
    source = library_source()
    assert f"constexpr int kOpsetVersion = {spec.OPSET_VERSION};" in source
    assert (
        "op.GetStartVersion = [](const OrtCustomOp* o) { return self_of(o).since_version; };"
        in (source)
    )
    assert "op.GetEndVersion = [](const OrtCustomOp*) { return kOpsetVersion; };" in source
    assert {op.since_version for op in spec.OPERATORS.values()} == {1, 2, 3, 4, 5}


@pytest.mark.parametrize("version", [2, 3, 1000])
def test_raw_models_import_version_is_not_seen_by_the_kernels(version: int) -> None:
    """The limitation README states: ORT resolves any ai.lossgrad import from 1 to 1000 to
    the same version-1 schema and tells kernels only that since-version, so a raw model that
    imports another version runs as version 1. If this fails, a runtime now lets the kernels
    see the import: make them reject it with the compiler's message and update README."""
    model = with_lossgrad_import(raw_model("KlDivBackward", []), version)
    (got,) = raw_session(model).run(None, FEEDS)
    (want,) = raw_session(raw_model("KlDivBackward", [])).run(None, FEEDS)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("version", [0, spec.OPSET_VERSION + 1, 1000])
def test_session_rejects_other_opset_versions_with_the_compilers_message(version: int) -> None:
    """What a raw model's kernels cannot see, session() (prepare_model) reads from the whole
    model: another import is rejected with the compiler's 161002 message."""
    model = with_lossgrad_import(raw_model("SmoothL1LossBackward", []), version)
    with pytest.raises(InvalidArgumentError) as expected:
        check_opset_imports(model)
    with pytest.raises(InvalidArgumentError) as raised:
        session(model)
    assert str(raised.value) == str(expected.value)
    assert raised.value.code == ACLNN_ERR_PARAM_INVALID
    exist = f"versions 1 to {spec.OPSET_VERSION} exist"
    assert f"imports {spec.DOMAIN} version {version}; {exist}" in str(raised.value)


def test_valid_raw_model_runs() -> None:
    model = raw_model("KlDivBackward", [attr("reduction", "sum"), attr("log_target", 0)])
    out = raw_session(model).run(
        None, {"go": np.ones((), F32), "x": np.ones(3, F32), "t": np.full(3, 0.5, F32)}
    )[0]
    np.testing.assert_array_equal(out, np.full(3, -0.5, F32))
