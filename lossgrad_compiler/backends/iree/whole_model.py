"""A whole ONNX model (ai.lossgrad nodes and standard nodes) as one IREE module.

The route: IREE's own ONNX importer (`iree.compiler.extras.onnx_importer`, the one behind
`iree-import-onnx`) imports the model, in which each ai.lossgrad node has been renamed to
its signature's id. The importer writes such a node as `torch.operator "onnx.<id>"`, which
is then replaced by a call of the level-2 function of that signature, behind the size
checks of `guards.py`. IREE compiles the standard ops from its torch/ONNX input and the
level-2 functions as they are, so the lossgrad nodes reach IREE as level 2, never as
standard ONNX decompositions (inlining them first, then importing, works too but compiles
about five times slower and hides level 2 from IREE).

The module's main function carries its ONNX interface (input and output names, element
types and dimensions) in `iree.reflection`, so `runtime.iree.session` needs no side file.
A node whose level 2 has value checks (the classification operators' target check) adds
its counts, and the run-time dimensions their messages name, as 0-d i64 results of the main
function after the ONNX outputs (model_checks.py); the interface lists them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import onnx
import onnx.inliner
from onnx import ModelProto, ValueInfoProto
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler import spec
from lossgrad_compiler.backends.iree.checks import FunctionChecks, function_checks
from lossgrad_compiler.backends.iree.compiler import compile_text
from lossgrad_compiler.backends.iree.guards import add_guards
from lossgrad_compiler.backends.iree.model_checks import ModelCheck
from lossgrad_compiler.backends.iree.options import IreeOptions, iree_module
from lossgrad_compiler.backends.iree.rounding import keep_bf16_roundings
from lossgrad_compiler.frontend.importer import ImportedModel, import_model
from lossgrad_compiler.frontend.signature import Signature
from lossgrad_compiler.level2 import signature_functions, verify_level2
from lossgrad_compiler.onnx.schemas import ensure_schemas

INTERFACE_KEY = "lossgrad.interface"
"""The `iree.reflection` entry of the main function: its ONNX interface as JSON."""

_VTENSOR = re.compile(r"^!torch\.vtensor<\[(?P<dims>[^\]]*)\],(?P<element>[^>]+)>$")
_SIGNED = re.compile(r"^[su]i(\d+)$")


class WholeModelError(ValueError):
    """The model cannot become one IREE module (and why)."""


@dataclass(frozen=True)
class TensorInterface:
    """One input or output of the compiled model: its ONNX name, numpy element type name and
    dimensions (an int, a symbolic name, or None for an unnamed dynamic one)."""

    name: str
    dtype: str
    dims: tuple[int | str | None, ...]

    def text(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.dims)
        return f"{self.name}: {self.dtype}[{dims}]"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "dims": list(self.dims)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> TensorInterface:
        return TensorInterface(data["name"], data["dtype"], tuple(data["dims"]))


@dataclass(frozen=True)
class ModelInterface:
    """The exported function of a whole-model module and its ONNX-named tensors; `checks`:
    the value checks whose counts it returns after the outputs (model_checks.py)."""

    function: str
    inputs: tuple[TensorInterface, ...]
    outputs: tuple[TensorInterface, ...]
    checks: tuple[ModelCheck, ...] = ()
    extras: int = 0  # how many results follow the outputs

    def text(self) -> str:
        """`name(a: float32[N,10], ...) -> (out: float32[N,10], ...)`"""
        inputs = ", ".join(t.text() for t in self.inputs)
        outputs = ", ".join(t.text() for t in self.outputs)
        return f"{self.function}({inputs}) -> ({outputs})"

    def to_json(self) -> str:
        return json.dumps(
            {
                "function": self.function,
                "inputs": [t.to_json() for t in self.inputs],
                "outputs": [t.to_json() for t in self.outputs],
                "checks": [c.to_json() for c in self.checks],
                "extras": self.extras,
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str) -> ModelInterface:
        data = json.loads(text)
        return ModelInterface(
            data["function"],
            tuple(TensorInterface.from_json(t) for t in data["inputs"]),
            tuple(TensorInterface.from_json(t) for t in data["outputs"]),
            tuple(ModelCheck.from_json(c) for c in data.get("checks", ())),
            data.get("extras", 0),
        )


@dataclass(frozen=True)
class SplicedModel:
    """The MLIR module IREE compiles, the interface of its main function, and the model's
    ai.lossgrad nodes."""

    text: str
    interface: ModelInterface
    imported: ImportedModel


def prepare(model: ModelProto) -> ImportedModel:
    """The model ready for IREE's importer: user functions inlined (ai.lossgrad functions
    kept out, as they are replaced by level 2), every value typed, and each ai.lossgrad node
    renamed to its signature id."""
    ensure_schemas()
    ours = [(f.domain, f.name) for f in model.functions if f.domain == spec.DOMAIN]
    model = onnx.inliner.inline_selected_functions(model, ours, exclude=True)
    import_model(model)  # a bad node: the project's error naming it, not shape inference's
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as err:
        raise WholeModelError(f"ONNX shape inference failed: {err}") from None
    imported = import_model(model)
    for site in imported.sites:
        site.node.op_type = site.signature.id
    kept = [f for f in imported.model.functions if f.domain != spec.DOMAIN]
    del imported.model.functions[:]
    imported.model.functions.extend(kept)
    return imported


def interface_of(model: ModelProto, function: str) -> ModelInterface:
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    return ModelInterface(
        function,
        tuple(_tensor_interface(i) for i in inputs),
        tuple(_tensor_interface(o) for o in model.graph.output),
    )


def _tensor_interface(info: ValueInfoProto) -> TensorInterface:
    tensor = info.type.tensor_type
    if not info.type.HasField("tensor_type") or not tensor.HasField("shape"):
        raise WholeModelError(f"graph input or output '{info.name}' is not a ranked tensor")
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
    dims: list[int | str | None] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        else:
            dims.append(d.dim_param or None)
    return TensorInterface(info.name, dtype, tuple(dims))


Level2Of = Callable[[Iterable[Signature]], ModuleOp]
"""The pipeline's lowering, which the target hands down: the level-2 module of signatures."""


def splice(model: ModelProto, level2_of: Level2Of) -> SplicedModel:
    """The model as one MLIR module: IREE's ONNX import with the level-2 functions called
    where the ai.lossgrad nodes were. The model is imported again after IREE's preparation
    (inlining, shape inference), and `level2_of` gives the level 2 of its signatures."""
    imported = prepare(model)
    model = imported.model
    ir = iree_module("iree.compiler.ir")
    onnx_importer = iree_module("iree.compiler.extras.onnx_importer")
    context = ir.Context()
    info = onnx_importer.ModelInfo(model)
    module = info.create_module(context=context).operation
    onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
    level2 = level2_of(imported.signatures.values())
    verify_level2(level2)
    checks = {f.name: function_checks(f) for f in signature_functions(level2)}
    guards = add_guards(level2)
    keep_bf16_roundings(level2)
    functions = ir.Module.parse(str(level2), context)
    with context, ir.Location.unknown():
        body = module.regions[0].blocks[0]
        main = _main_function(ir, body)
        callees = _move_functions(ir, functions, body, _opset(model))
        extras: list[Any] = []
        model_checks: list[ModelCheck] = []
        for node in _lossgrad_operators(ir, module, guards):
            name = ir.StringAttr(node.attributes["name"]).value.removeprefix("onnx.")
            node_checks = checks[name]
            if node_checks is not None and node.operation.parent.name != "func.func":
                raise WholeModelError(
                    f"an {node_checks.op} node inside a control-flow region: its value check "
                    "cannot reach the host from there on the IREE target"
                )
            counted = _replace_with_call(ir, node, callees[guards[name]], node_checks)
            model_checks += _extra_results(node_checks, counted, extras)
        _return_extras(ir, main, extras)
        interface = interface_of(model, ir.StringAttr(main.attributes["sym_name"]).value)
        interface = ModelInterface(
            interface.function, interface.inputs, interface.outputs, tuple(model_checks),
            len(extras),
        )  # fmt: skip
        main.attributes["iree.reflection"] = ir.DictAttr.get(
            {INTERFACE_KEY: ir.StringAttr.get(interface.to_json())}
        )
    if not module.verify():
        raise WholeModelError("the spliced module does not verify")
    return SplicedModel(str(module), interface, imported)


def _opset(model: ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    raise WholeModelError("the model imports no version of the default ONNX domain")


def _main_function(ir: Any, body: Any) -> Any:
    functions = [op.operation for op in body.operations if op.operation.name == "func.func"]
    if len(functions) != 1:
        raise WholeModelError(f"IREE's importer wrote {len(functions)} functions, not one")
    return functions[0]


def _move_functions(ir: Any, functions: Any, body: Any, opset: int) -> dict[str, Any]:
    """Move the level-2 functions and their guards into the model's module, private, with
    the opset attribute that IREE's ONNX conversion wants on every function."""
    moved = {}
    first = body.operations[0]
    for op in list(functions.body.operations):
        function = op.operation
        function.attributes["sym_visibility"] = ir.StringAttr.get("private")
        function.attributes["torch.onnx_meta.opset_version"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signed(64), opset
        )
        function.move_before(first)
        moved[ir.StringAttr(function.attributes["sym_name"]).value] = function
    return moved


def _lossgrad_operators(ir: Any, module: Any, guards: dict[str, str]) -> list[Any]:
    found = []

    def visit(op: Any) -> Any:
        if op.name == "torch.operator":
            name = ir.StringAttr(op.attributes["name"]).value
            if name.removeprefix("onnx.") in guards:
                found.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def _replace_with_call(
    ir: Any, node: Any, callee: Any, checks: FunctionChecks | None
) -> tuple[list[Any], list[Any]]:
    """torch values → builtin tensors of the callee's types → call → back to torch. The
    call's check counts and the sizes its checks' messages name (0-d i64 builtin tensors,
    `_slot_sizes`), for `_extra_results`."""
    callee_type = ir.FunctionType(ir.TypeAttr(callee.attributes["function_type"]).value)
    result_type = node.results[0].type
    # An absent optional input ("" in the node) is imported as a none value: the level-2
    # function takes only the inputs given.
    given = [value for value in node.operands if str(value.type) != "!torch.none"]
    with ir.InsertionPoint(node), node.location:
        arguments = [
            _cast(ir, _to_builtin(ir, value), wanted)
            for value, wanted in zip(given, callee_type.inputs, strict=True)
        ]
        call = ir.Operation.create(
            "func.call",
            results=list(callee_type.results),
            operands=arguments,
            attributes={
                "callee": ir.FlatSymbolRefAttr.get(
                    ir.StringAttr(callee.attributes["sym_name"]).value
                )
            },
        )
        result = _cast(ir, call.results[0], _builtin_type(ir, result_type))
        back = ir.Operation.create(
            "torch_c.from_builtin_tensor", results=[result_type], operands=[result]
        )
        counts = list(call.results)[1:]
        sizes = _slot_sizes(ir, checks, arguments)
    node.results[0].replace_all_uses_with(back.results[0])
    node.erase()
    return counts, sizes


def _slot_sizes(ir: Any, checks: FunctionChecks | None, arguments: Sequence[Any]) -> list[Any]:
    """Per dimension slot of the checks, in order: that size as a 0-d i64 tensor."""
    sizes = []
    for check in checks.checks if checks is not None else ():
        for source in check.slots.values():
            if "input" not in source:
                continue
            axis = ir.Operation.create(
                "arith.constant",
                results=[ir.IndexType.get()],
                attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), source["axis"])},
            )
            dim = ir.Operation.create(
                "tensor.dim",
                results=[ir.IndexType.get()],
                operands=[arguments[source["input"]], axis.results[0]],
            )
            i64 = ir.IntegerType.get_signless(64)
            cast = ir.Operation.create("arith.index_cast", results=[i64], operands=[dim.results[0]])
            element = ir.Operation.create(
                "tensor.from_elements",
                results=[ir.RankedTensorType.get([], i64)],
                operands=[cast.results[0]],
            )
            sizes.append(element.results[0])
    return sizes


def _extra_results(
    checks: FunctionChecks | None, counted: tuple[list[Any], list[Any]], extras: list[Any]
) -> list[ModelCheck]:
    """The node's counts and slot sizes appended to `extras`; its checks by their places."""
    if checks is None:
        return []
    counts, sizes = counted
    found = []
    size_values = iter(sizes)
    for check in checks.checks:
        extras.append(counts[check.result - 1])
        count = len(extras) - 1
        slots: dict[str, dict[str, int]] = {}
        for slot, source in check.slots.items():
            if "input" in source:
                extras.append(next(size_values))
                slots[slot] = {"output": len(extras) - 1}
            else:
                slots[slot] = dict(source)
        found.append(ModelCheck(checks.op, check.rule, count, slots))
    return found


def _return_extras(ir: Any, main: Any, extras: Sequence[Any]) -> None:
    """Return `extras` (builtin 0-d i64 tensors) after the main function's results."""
    if not extras:
        return
    block = main.regions[0].blocks[0]
    ret = list(block.operations)[-1].operation
    torch_i64 = ir.Type.parse("!torch.vtensor<[],si64>")
    with ir.InsertionPoint(ret), ret.location:
        converted = [
            ir.Operation.create(
                "torch_c.from_builtin_tensor", results=[torch_i64], operands=[value]
            ).results[0]
            for value in extras
        ]
        ir.Operation.create("func.return", operands=[*ret.operands, *converted])
    ret.erase()
    old = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    new = ir.FunctionType.get(list(old.inputs), [*old.results, *[torch_i64] * len(extras)])
    main.attributes["function_type"] = ir.TypeAttr.get(new)


def _to_builtin(ir: Any, value: Any) -> Any:
    return ir.Operation.create(
        "torch_c.to_builtin_tensor", results=[_builtin_type(ir, value.type)], operands=[value]
    ).results[0]


def _cast(ir: Any, value: Any, wanted: Any) -> Any:
    if value.type == wanted:
        return value
    return ir.Operation.create("tensor.cast", results=[wanted], operands=[value]).results[0]


def _builtin_type(ir: Any, torch_type: Any) -> Any:
    """`!torch.vtensor<[?,10],f32>` → `tensor<?x10xf32>`."""
    match = _VTENSOR.match(str(torch_type))
    if match is None:
        raise WholeModelError(
            f"an ai.lossgrad node's value has the type {torch_type} after import; every "
            "value around the node needs a known element type and rank"
        )
    dims: Sequence[str] = [d for d in match["dims"].split(",") if d]
    element = _SIGNED.sub(r"i\1", match["element"])  # torch's si64 is a signless i64
    return ir.Type.parse("tensor<" + "".join(f"{d}x" for d in dims) + element + ">")


def compile_whole_model(
    model: ModelProto, options: IreeOptions, level2_of: Level2Of
) -> tuple[bytes, SplicedModel]:
    """The vmfb of a whole model (not cached: a model is compiled once, then loaded), and
    what was compiled."""
    spliced = splice(model, level2_of)
    for signature in spliced.imported.signatures.values():
        options.check_types(signature.op_type, signature.present_types)
    return compile_text(spliced.text, options), spliced
