"""The one pipeline every consumer of level 2 goes through: a model (loaded, checked,
imported) or calls from Python (each checked once into a typed call) → their signatures →
level 2 from the per-signature cache (frontend.lowering): the static form every target
takes, or the run-time-parameter form the native ORT library is printed from.

`compile_model` (driver.py), the native ORT library (targets/ort_library.py) and the
evaluate and session paths of IREE, Ascend C and AscendNPU IR (evaluation/) all get their
level 2 here; runtime/ only loads and runs what a target made from it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import ModelProto
from onnx.checker import ValidationError
from onnx.external_data_helper import load_external_data_for_tensor
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler import spec
from lossgrad_compiler.calls import Call, CheckedArrays, checked_call
from lossgrad_compiler.errors import CompileError
from lossgrad_compiler.frontend import ImportedModel, import_model
from lossgrad_compiler.frontend.lowering import Lowered, LoweringForm, clear_lowering_cache, lower
from lossgrad_compiler.frontend.signature import Signature, signature_of
from lossgrad_compiler.onnx.structure import structural_problem
from lossgrad_compiler.onnx.tensors import external_tensors

ModelSource = ModelProto | bytes | str | Path
"""A model as a ModelProto, serialized bytes or a file path."""


def load_model(source: ModelSource, *, external_data: bool = True) -> ModelProto:
    """A private copy of a model given as a ModelProto, serialized bytes or a file path.

    A model read from a path gets its external data loaded from the model's folder, as
    `onnx.load` does, so the compiled model can be saved anywhere; onnx's reader refuses a
    location outside that folder. `external_data=False` keeps the references (the CLI
    writes the data beside its output itself)."""
    if isinstance(source, ModelProto):
        model = ModelProto()
        model.CopyFrom(source)
        return model
    path = None
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as err:
            raise CompileError(f"cannot read '{path}': {err.strerror or err}") from None
        where = f"'{path}'"
    else:
        data, where = bytes(source), "the input"
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise CompileError(f"{where} is not an ONNX model ({type(err).__name__})") from None
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise CompileError(f"{where} is not an ONNX model (no IR version or no graph)")
    if path is not None and external_data:
        _load_external_data(model, path)
    return model


def _load_external_data(model: ModelProto, path: Path) -> None:
    for tensor in external_tensors(model):
        try:
            load_external_data_for_tensor(tensor, str(path.parent))
        except (ValidationError, ValueError, OSError) as err:
            text = " ".join(str(err).split())
            raise CompileError(
                f"'{path}': external data of tensor '{tensor.name}': {text}"
            ) from None


def check_structure(model: ModelProto) -> None:
    """Raise CompileError if the model is not structurally valid ONNX (a cycle, a name
    produced twice, an undefined input, ...): the frontend and backends assume it is."""
    problem = structural_problem(model)
    if problem is not None:
        raise CompileError(f"the model is not valid ONNX: {problem}")


def imported_model(
    model: ModelProto, progress: Callable[[int], None] | None = None
) -> ImportedModel:
    """A loaded model, checked for structure, with its ai.lossgrad nodes checked and grouped
    by signature (`progress(done)` after each node)."""
    check_structure(model)
    return import_model(model, progress)


def import_checked(model: ModelSource) -> ImportedModel:
    """A model loaded (a private copy) and imported: its checked nodes and signatures."""
    return imported_model(load_model(model))


def lowered_model(model: ModelSource) -> tuple[ImportedModel, ModuleOp]:
    """A model imported, and the level 2 (static form) of its signatures."""
    imported = import_checked(model)
    return imported, level2(imported.signatures.values())


def checked_calls(calls: Sequence[Call]) -> list[CheckedArrays]:
    """Every call checked once (all of them before anything is compiled)."""
    return [checked_call(c.op_type, c.inputs, c.attrs) for c in calls]


def signature(checked: spec.CheckedCall) -> Signature:
    """The signature a checked call is compiled by."""
    return signature_of(checked)


def lowered(
    signatures: Iterable[Signature], form: LoweringForm | str = LoweringForm.STATIC
) -> Lowered:
    """Level 2 of the signatures (each once) in `form`, and which of them this request
    lowered and which came from the per-signature cache."""
    return lower(signatures, LoweringForm(form))


def level2(
    signatures: Iterable[Signature], form: LoweringForm | str = LoweringForm.STATIC
) -> ModuleOp:
    """The level-2 module of the signatures in `form` (see `lowered`)."""
    return lowered(signatures, form).module


def calls_level2(checked: Iterable[spec.CheckedCall]) -> ModuleOp:
    """The level-2 module (static form) of the signatures of checked calls."""
    return level2(signature(c) for c in checked)


def clear_level2_cache() -> None:
    """Forget every lowered signature (for tests and benchmarks of cold compiles)."""
    clear_lowering_cache()
