"""Running emitted Ascend C projects on the CPU: projects of level-2 functions, compiled
against the emulation (cached) into a runner executable, which calls the aclnn two-phase
API exactly as a host program would. The emulation checks the hardware rules as the kernel
runs; a violation raises EmulatorViolation with the emulator's message.

`evaluation.ascendc.emulate` is the entry with reference.evaluate's call shape: the pipeline
checks each call and hands the level 2 of its signature down to `signature_project`."""

from __future__ import annotations

import dataclasses
import operator
import signal
import struct
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from lossgrad_compiler import spec
from lossgrad_compiler.backends.ascendc.build import build_runner
from lossgrad_compiler.backends.ascendc.cxx import ACL_DTYPES
from lossgrad_compiler.backends.ascendc.kernel_printer import TILING_FIELDS, extra_tiling_fields
from lossgrad_compiler.backends.ascendc.project import Project, lower_to_ascendc, print_projects
from lossgrad_compiler.dialects.ascendc.soc import DEFAULT_SOC, Soc
from lossgrad_compiler.dialects.ascendc.soc import soc as soc_named
from lossgrad_compiler.errors import (
    InvalidArgumentError,
    LossGradError,
    UnsupportedByBackendError,
)

MAGIC = b"LGASC05\0"
VIOLATION_EXIT = 86
UNTOUCHED = 0x5A  # the runner fills every output with this byte before the call
FLAG_NULL_WORKSPACE_SIZE = 1
FLAG_NULL_EXECUTOR = 2
MAX_INPUTS = 8  # lossgrad_emu/runner.h's kMaxInputs
MAX_ATTRIBUTES = 8  # lossgrad_emu/runner.h's kMaxAttributes
FLAG_NULL_OUT = 1 << (2 + MAX_INPUTS)


def flag_null_input(k: int) -> int:
    return 1 << (2 + k)


class EmulatorViolation(RuntimeError):
    """A kernel broke a rule of the hardware (the emulator's one-line message)."""


class EmulatorRunnerError(RuntimeError):
    """The runner process did not start or did not finish (a signal, an exit status)."""


class AclnnError(LossGradError):
    """An aclnn call that returned an error status: `code` and the wrapper's message."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        self.op, self.argument, self.rule = "", "", message
        ValueError.__init__(self, message)


# --------------------------------------------------------------------------- signatures


@dataclass(frozen=True)
class CompiledSignature:
    """One signature inside a runner executable (which may hold several)."""

    project: Project
    runner: Path
    index: int
    soc: Soc


_RUNNERS: dict[tuple[str, ...], tuple[Path, dict[str, int]]] = {}


def signature_project(level2: ModuleOp, soc: str = DEFAULT_SOC) -> Project:
    """The printed project of the one function of a level-2 module."""
    (project,) = print_projects(lower_to_ascendc(level2, soc), soc)
    return project


def compile_projects(
    projects: Sequence[Project], soc: str = DEFAULT_SOC
) -> list[CompiledSignature]:
    """One runner for all the projects (one entry per project, in order)."""
    needed = {p.info.op_type for p in projects}
    for key, (runner, index) in _RUNNERS.items():  # a runner built before may hold them all
        if key[0] == soc and needed <= index.keys():
            return [CompiledSignature(p, runner, index[p.info.op_type], soc_named(soc))
                    for p in projects]  # fmt: skip
    unique = list({p.info.op_type: p for p in projects}.values())
    key = (soc, *sorted(needed))
    index = {p.info.op_type: k for k, p in enumerate(unique)}
    _RUNNERS[key] = (build_runner(unique), index)
    return [CompiledSignature(p, _RUNNERS[key][0], index[p.info.op_type], soc_named(soc))
            for p in projects]  # fmt: skip


def refuse_float64(checked: spec.CheckedCall) -> None:
    if checked.compute is spec.FLOAT64:
        raise UnsupportedByBackendError(
            checked.op.name,
            "element type",
            "float64 is not supported by the Ascend C backend (Atlas vector units have no "
            "fp64 arithmetic); use the onnx or ort target",
        )


# --------------------------------------------------------------------------- raw cases


@dataclass
class RawCase:
    """One aclnn call as the runner sees it (arrays of any dtype; nothing validated)."""

    inputs: Sequence[np.ndarray]
    out_dtype: Any
    out_shape: tuple[int, ...]
    attributes: Sequence[int | float] = ()  # aclnn values, in the operator's attribute order
    flags: int = 0
    signature: int = 0
    cores: int = 48
    ub_bytes: int = 196608


@dataclass(frozen=True)
class CoreCost:
    """One core's counters in the emulator's cost model (emulator/lossgrad_emu/cost.h, where
    the cycle weights are): scalar GM and UB accesses, DataCopy(Pad)s and their GM bytes,
    all GM bytes, vector instructions and their 256-byte repeats, SyncAlls and the cycles
    waited in them, and the cycles these add up to."""

    gm_scalar: int
    ub_scalar: int
    copies: int
    copy_bytes: int
    gm_bytes: int
    vector_instructions: int
    vector_repeats: int
    sync_alls: int
    sync_wait_cycles: int
    cycles: int


@dataclass(frozen=True)
class RawLaunch:
    """One AI-core launch of a call: the OpType, the block dim and the tiling data that the
    op_host tiling function chose (raw bytes; `decode_tiling` reads them), and each core's
    cost counters."""

    op_type: str
    block_dim: int
    tiling: bytes = field(repr=False)
    costs: tuple[CoreCost, ...] = field(default=(), repr=False)

    @property
    def cycles(self) -> int:
        """The launch's cycles in the cost model: its slowest core's."""
        return max((c.cycles for c in self.costs), default=0)


@dataclass
class RawResult:
    status: int
    message: str
    output: np.ndarray = field(repr=False)
    launches: list[RawLaunch] = field(default_factory=list)


def _acl_dtype(dtype: Any) -> int:
    name = str(np.dtype(dtype))
    if name not in ACL_DTYPES:
        raise InvalidArgumentError("ascendc", "dtype", f"{name} has no aclDataType")
    return ACL_DTYPES[name]


def _tensor_bytes(array: np.ndarray | None, dtype: Any, shape: Sequence[int]) -> bytes:
    header = struct.pack("<iI", _acl_dtype(dtype), len(shape))
    header += struct.pack(f"<{len(shape)}q", *shape)
    if array is None:
        return header
    data = np.ascontiguousarray(array).tobytes()
    return header + struct.pack("<Q", len(data)) + data


def _attribute_bytes(value: int | float) -> bytes:
    """A kind byte (0 integer, 1 double) and the value, as runner.h's AttributeValue."""
    if isinstance(value, float):
        return struct.pack("<Bd", 1, value)
    return struct.pack("<Bq", 0, int(value))


def run_raw(runner: Path, cases: Sequence[RawCase]) -> list[RawResult]:
    """Run the cases in one process of a runner executable."""
    for c in cases:
        if len(c.inputs) > MAX_INPUTS or len(c.attributes) > MAX_ATTRIBUTES:
            raise InvalidArgumentError(
                "ascendc", "case", f"at most {MAX_INPUTS} inputs and {MAX_ATTRIBUTES} attributes"
            )
    with tempfile.TemporaryDirectory(prefix="lossgrad-ascendc-") as tmp:
        case_file, result_file = Path(tmp) / "cases.bin", Path(tmp) / "results.bin"
        with case_file.open("wb") as f:
            f.write(MAGIC + struct.pack("<I", len(cases)))
            for c in cases:
                f.write(struct.pack("<III", c.signature, c.flags, len(c.inputs)))
                for a in c.inputs:
                    f.write(_tensor_bytes(a, a.dtype, a.shape))
                f.write(_tensor_bytes(None, c.out_dtype, c.out_shape))
                f.write(struct.pack("<I", len(c.attributes)))
                for value in c.attributes:
                    f.write(_attribute_bytes(value))
                f.write(struct.pack("<IQ", c.cores, c.ub_bytes))
        try:
            done = subprocess.run(
                [str(runner), str(case_file), str(result_file)],
                capture_output=True, text=True, errors="replace", timeout=1800, check=False,
            )  # fmt: skip
        except OSError as err:
            raise EmulatorRunnerError(
                f"the Ascend C emulation runner {runner} could not start: {err.strerror or err}"
            ) from None
        if done.returncode == VIOLATION_EXIT:
            raise EmulatorViolation(done.stderr.strip())
        if done.returncode != 0:
            raise EmulatorRunnerError(
                f"the Ascend C emulation runner {runner} failed: "
                f"{how_it_ended(done.returncode)}; {stderr_tail(done.stderr)}"
            )
        return _read_results(result_file.read_bytes(), cases)


def how_it_ended(returncode: int) -> str:
    """How a process ended, e.g. "killed by SIGSEGV (Segmentation fault)" or "exit status 3"."""
    if returncode < 0:
        try:
            number = signal.Signals(-returncode)
        except ValueError:
            return f"killed by signal {-returncode}"
        return f"killed by {number.name} ({signal.strsignal(number)})"
    return f"exit status {returncode}"


def stderr_tail(stderr: str, limit: int = 2000) -> str:
    text = stderr.strip()
    if not text:
        return "nothing on stderr"
    return "stderr: " + (text if len(text) <= limit else "..." + text[-limit:])


def _read_results(data: bytes, cases: Sequence[RawCase]) -> list[RawResult]:
    results, pos = [], 0
    for c in cases:
        status, length = struct.unpack_from("<iI", data, pos)
        pos += 8
        message = data[pos : pos + length].decode("utf-8", "replace")
        pos += length
        (nbytes,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        out = np.frombuffer(data[pos : pos + nbytes], dtype=np.dtype(c.out_dtype)).copy()
        pos += nbytes
        launches, pos = _read_launches(data, pos)
        results.append(RawResult(status, message, out.reshape(c.out_shape), launches))
    return results


# The C types of the tiling struct's fields (kernel_printer.print_tiling_header), as struct
# codes; native alignment, because the runner is built for this machine.
_TILING_CODES = {"uint64_t": "Q", "uint32_t": "I", "float": "f", "int64_t": "q"}


def decode_tiling(project: Project, data: bytes) -> dict[str, int | float]:
    """The tiling data a project's tiling function wrote, by field name, as the project's
    op_kernel/<name>_tiling.h declares the struct."""
    fields = [(name, ctype) for ctype, name, _ in TILING_FIELDS]
    fields += [(name, ctype) for ctype, name in extra_tiling_fields(project.graph.kernel)]
    layout = "@" + "".join(_TILING_CODES[ctype] for _, ctype in fields)
    if len(data) < struct.calcsize(layout):
        raise EmulatorRunnerError(
            f"the tiling data of {project.info.op_type} has {len(data)} bytes, its struct "
            f"{struct.calcsize(layout)}"
        )
    values = struct.unpack_from(layout, data)
    return {name: value for (name, _), value in zip(fields, values, strict=True)}


def _read_launches(data: bytes, pos: int) -> tuple[list[RawLaunch], int]:
    (count,) = struct.unpack_from("<I", data, pos)
    pos += 4
    launches = []
    for _ in range(count):
        (length,) = struct.unpack_from("<I", data, pos)
        op_type = data[pos + 4 : pos + 4 + length].decode("utf-8", "replace")
        pos += 4 + length
        block_dim, size = struct.unpack_from("<II", data, pos)
        pos += 8
        tiling = data[pos : pos + size]
        pos += size
        (cores,) = struct.unpack_from("<I", data, pos)
        pos += 4
        fields = len(dataclasses.fields(CoreCost))
        costs = []
        for _ in range(cores):
            costs.append(CoreCost(*struct.unpack_from(f"<{fields}Q", data, pos)))
            pos += 8 * fields
        launches.append(RawLaunch(op_type, block_dim, tiling, tuple(costs)))
    return launches, pos


# --------------------------------------------------------------------------- cases


def raw_case(
    checked: spec.CheckedCall,
    arrays: Mapping[str, np.ndarray],
    compiled: CompiledSignature,
    cores: int | None,
) -> RawCase:
    absent = [k for k, n in enumerate(checked.op.input_names) if n not in checked.present]
    return RawCase(
        # an absent optional input is passed as null (the runner's flag), its array a stand-in
        inputs=[
            arrays[n] if n in checked.present else np.zeros((), np.float32)
            for n in checked.op.input_names
        ],
        flags=sum(flag_null_input(k) for k in absent),
        out_dtype=checked.result_type.dtype,
        out_shape=tuple(int(d) for d in checked.result_shape or ()),
        attributes=aclnn_attributes(checked.op, checked.attrs),
        signature=compiled.index,
        cores=compiled.soc.vector_cores if cores is None else cores,
        ub_bytes=compiled.soc.ub_bytes,
    )


def aclnn_attributes(op: spec.OperatorSpec, attrs: Mapping[str, Any]) -> tuple[int | float, ...]:
    """The aclnn values of a call's attributes, in the operator's attribute order (spec's
    table: the runner passes them to the aclnn API in that order)."""
    return tuple(a.aclnn_value(attrs[a.name]) for a in op.attributes)


def checked_block_dim(op_type: str, block_dim: object, soc: Soc) -> int | None:
    """`block_dim`, the vector cores the call may use (the core count its tiling function
    sees): None for all of the SoC's, else an integer from 1 to that count. A launch on 0
    cores is invalid in CANN, so 0 is refused like any other value outside the range."""
    if block_dim is None:
        return None
    rule = (
        f"must be an integer from 1 to {soc.vector_cores} (the vector cores of {soc.name}), "
        "or None for all of them"
    )
    if isinstance(block_dim, bool) or not hasattr(type(block_dim), "__index__"):
        raise InvalidArgumentError(
            op_type, "block_dim", f"{rule}; got {block_dim!r} ({type(block_dim).__name__})"
        )
    value = operator.index(block_dim)
    if not 1 <= value <= soc.vector_cores:
        raise InvalidArgumentError(op_type, "block_dim", f"{rule}; got {value}")
    return value
