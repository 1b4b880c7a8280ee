"""The enum attributes of the HFusion form, spelled as AscendNPU IR spells them:
`#linalg.binary_fn<mul>`, `#linalg.unary_fn<exp>`, `#hfusion.round_mode<rint>`,
`#hfusion.compare_fn<vle>` and `#hacc.function_kind<HOST>`.

Each enum lists every case of its MLIR definition (LLVM 19's linalg, AscendNPU IR 1.2.0's
HFusionEnums.td and HACCAttrs.td), so the text bishengir prints parses here too; the ops say
which cases they can model."""

from __future__ import annotations

from typing import Any

from xdsl.dialects.utils import EnumAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum


class InAngles:
    """Mixin for an EnumAttribute printed as MLIR's enum attributes are, `#name<case>`
    (xDSL's EnumAttribute alone prints `#name case`)."""

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.data.value)  # type: ignore[attr-defined]

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Any:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(cls.enum_type)  # type: ignore[attr-defined]


class BinaryFn(StrEnum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    DIV_UNSIGNED = "div_unsigned"
    MAX_SIGNED = "max_signed"
    MIN_SIGNED = "min_signed"
    MAX_UNSIGNED = "max_unsigned"
    MIN_UNSIGNED = "min_unsigned"
    POWF = "powf"


class UnaryFn(StrEnum):
    EXP = "exp"
    LOG = "log"
    ABS = "abs"
    CEIL = "ceil"
    FLOOR = "floor"
    NEGF = "negf"
    RECIPROCAL = "reciprocal"
    ROUND = "round"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SQUARE = "square"
    TANH = "tanh"
    ERF = "erf"


class HfusionBinaryFn(StrEnum):
    """The cases of `#hfusion.binary_fn` the HFusion form uses (i1 logic of the
    classification masks); HFusionEnums.td has more (shifts, modulo, ...), not read here."""

    VOR = "vor"
    VAND = "vand"
    VXOR = "vxor"


class RoundMode(StrEnum):
    RINT = "rint"
    ROUND = "round"
    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    ODD = "odd"
    TRUNCWITHOVERFLOW = "truncwithoverflow"


class CompareFn(StrEnum):
    VEQ = "veq"
    VNE = "vne"
    VLE = "vle"
    VLT = "vlt"
    VGE = "vge"
    VGT = "vgt"
    VULE = "vule"
    VULT = "vult"
    VUGE = "vuge"
    VUGT = "vugt"


class FunctionKind(StrEnum):
    HOST = "HOST"
    DEVICE = "DEVICE"


class HostFuncType(StrEnum):
    """HACCAttrs.td's HostFuncType cases (AscendNPU IR's CPU runner starts from the one
    `host_entry` function of a module)."""

    HOST_ENTRY = "host_entry"
    TILING_FUNCTION = "tiling_function"
    INFER_OUTPUT_SHAPE_FUNCTION = "infer_output_shape_function"
    INFER_WORKSPACE_SHAPE_FUNCTION = "infer_workspace_shape_function"
    INFER_SYNC_BLOCK_LOCK_NUM_FUNCTION = "infer_sync_block_lock_num_function"
    INFER_SYNC_BLOCK_LOCK_INIT_FUNCTION = "infer_sync_block_lock_init_function"
    GET_TILING_STRUCT_SIZE_FUNCTION = "get_tiling_struct_size_function"
    INFER_TASK_TYPE_FUNCTION = "infer_task_type_function"


@irdl_attr_definition
class BinaryFnAttr(InAngles, EnumAttribute[BinaryFn]):
    name = "linalg.binary_fn"


@irdl_attr_definition
class UnaryFnAttr(InAngles, EnumAttribute[UnaryFn]):
    name = "linalg.unary_fn"


@irdl_attr_definition
class HfusionBinaryFnAttr(InAngles, EnumAttribute[HfusionBinaryFn]):
    name = "hfusion.binary_fn"


@irdl_attr_definition
class RoundModeAttr(InAngles, EnumAttribute[RoundMode]):
    name = "hfusion.round_mode"


@irdl_attr_definition
class CompareFnAttr(InAngles, EnumAttribute[CompareFn]):
    name = "hfusion.compare_fn"


@irdl_attr_definition
class FunctionKindAttr(InAngles, EnumAttribute[FunctionKind]):
    name = "hacc.function_kind"


@irdl_attr_definition
class HostFuncTypeAttr(InAngles, EnumAttribute[HostFuncType]):
    name = "hacc.host_func_type"
