"""What `bishengir-opt` made of the HFusion form, read from the HIVM IR it prints: the
device kernels it outlined (fusion kind, block dim), the HIVM vector ops of each by kind,
its loads and stores, the Unified Buffer buffers the auto-schedule annotated
(`annotation.mark {buffer_size_in_byte = N}`), and any linalg/hfusion compute op that was
not converted.

The text is bishengir's own (hivm, annotation, scf, llvm and affine ops in custom syntax,
which xDSL does not parse), so it is read line by line: a function starts at
`func.func @name(` and ends at the `}` of its indentation; ops are `= dialect.op` or a line
that starts with one."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

_FUNCTION = re.compile(r"^(\s*)func\.func @([\w$.]+)\(")
_OP = re.compile(r"(?:^\s*|=\s*)\"?([a-z_]+)\.([a-z_.]+)\b")
_BUFFER = re.compile(r"annotation\.mark .*buffer_size_in_byte = (\d+) : i64\}\s*:\s*(\S+)")
_KIND = re.compile(r"hacc\.function_kind = #hacc\.function_kind<(\w+)>")
_BLOCK_DIM = re.compile(r"hacc\.block_dim = (\d+)")
_FUSION = re.compile(r"hfusion\.fusion_kind = #hfusion\.fusion_kind<(\w+)>")
_ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i1": 0, "i8": 1, "i16": 2, "i32": 4, "i64": 8}

COMPUTE_DIALECTS = ("linalg", "hfusion")
"""Dialects whose ops are computation to be converted; their attributes (such as
`hfusion.fusion_kind`) are not ops and do not count."""


@dataclass
class Buffer:
    bytes: int
    type: str

    @property
    def element(self) -> str:
        return self.type.rsplit("x", 1)[-1].rstrip(">").removeprefix("tensor<")


@dataclass
class Function:
    name: str
    header: str
    body: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str | None:
        found = _KIND.search(self.header)
        return found.group(1) if found else None

    def ops(self) -> list[str]:
        return [f"{m.group(1)}.{m.group(2)}" for line in self.body for m in _OP.finditer(line)]


@dataclass(frozen=True)
class Kernel:
    """One device kernel the HFusion pipeline outlined."""

    name: str
    fusion_kind: str | None
    block_dim: int | None
    vector_ops: dict[str, int]  # hivm.hir.vsub -> 1, ...
    loads: int
    stores: int
    buffers: tuple[Buffer, ...]

    @property
    def vector_op_count(self) -> int:
        return sum(self.vector_ops.values())

    @property
    def tile_elements(self) -> int | None:
        """Elements of the largest tile buffer (masks excluded): what one loop step holds."""
        sizes = [
            b.bytes // _ELEMENT_BYTES[b.element]
            for b in self.buffers
            if _ELEMENT_BYTES.get(b.element)
        ]
        return max(sizes, default=None)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fusion_kind": self.fusion_kind,
            "block_dim": self.block_dim,
            "vector_ops": dict(sorted(self.vector_ops.items())),
            "vector_op_count": self.vector_op_count,
            "loads": self.loads,
            "stores": self.stores,
            "tile_elements": self.tile_elements,
            "ub_buffers": [{"bytes": b.bytes, "type": b.type} for b in self.buffers],
            "ub_buffer_bytes": sum(b.bytes for b in self.buffers),
        }


@dataclass(frozen=True)
class HivmSummary:
    kernels: tuple[Kernel, ...]
    leftover_compute_ops: dict[str, int]  # linalg/hfusion ops still in the module

    def kernels_of(self, function: str) -> list[Kernel]:
        """The device kernels outlined from a host function (named after it)."""
        return [k for k in self.kernels if k.name.startswith(f"{function}_")]

    def as_json(self) -> dict[str, Any]:
        return {
            "kernels": [k.as_json() for k in self.kernels],
            "leftover_compute_ops": self.leftover_compute_ops,
        }


def functions(text: str) -> list[Function]:
    found: list[Function] = []
    current: Function | None = None
    indent = ""
    for line in text.splitlines():
        if current is None:
            start = _FUNCTION.match(line)
            if start:
                indent, current = start.group(1), Function(start.group(2), line)
            continue
        if line == f"{indent}}}":
            found.append(current)
            current = None
        else:
            current.body.append(line)
    return found


def summarize(text: str) -> HivmSummary:
    """The device kernels of HIVM text and the compute ops it still holds."""
    kernels = []
    leftover: Counter[str] = Counter()
    for function in functions(text):
        ops = function.ops()
        leftover.update(o for o in ops if o.split(".")[0] in COMPUTE_DIALECTS)
        if function.kind != "DEVICE":
            continue
        fusion = _FUSION.search(function.header)
        block_dim = _BLOCK_DIM.search(function.header)
        hivm = Counter(o for o in ops if o.startswith("hivm.hir."))
        kernels.append(
            Kernel(
                name=function.name,
                fusion_kind=fusion.group(1) if fusion else None,
                block_dim=int(block_dim.group(1)) if block_dim else None,
                vector_ops={k: v for k, v in hivm.items() if k.startswith("hivm.hir.v")},
                loads=hivm["hivm.hir.load"],
                stores=hivm["hivm.hir.store"],
                buffers=tuple(
                    Buffer(int(m.group(1)), m.group(2))
                    for line in function.body
                    if (m := _BUFFER.search(line))
                ),
            )
        )
    return HivmSummary(tuple(kernels), dict(sorted(leftover.items())))
