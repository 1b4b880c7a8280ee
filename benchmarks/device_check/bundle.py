"""The bundle folder that travels to the device: its layout, its manifest, and arrays saved
by their bits (ml_dtypes' bfloat16 has no .npy form: np.save writes it as raw void)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
MODULES = "modules"
WHEELS = "wheels"
EXAMPLES = "examples"
DEFAULT_BUNDLE = Path("build") / "device-bundle"
LIMIT_BYTES = 64 * 1024 * 1024
"""What travels to the device, the working tree and the carried paths together."""


@dataclass(frozen=True)
class ModuleEntry:
    """One compiled module and what each of its functions takes."""

    file: str  # relative to the bundle
    functions: dict[str, list[str]]  # exported name -> its inputs, in call order


@dataclass(frozen=True)
class CaseEntry:
    """One call to check and time. `kind` "benchmark": inputs drawn from the seed on the
    device (cases.drawn_case: of 2^log2n elements, or [rows, classes] where classes is not
    0); "example": inputs and expected result carried in `data`."""

    name: str
    kind: str
    module: str  # key in Manifest.modules
    function: str
    op: str
    attrs: dict[str, Any]
    reads: list[str]  # the inputs the level-2 body reads (the bytes a kernel moves)
    type_name: str = ""
    log2n: int = 0
    rows: int = 0
    classes: int = 0
    seed: int = 0
    inputs_sha256: str = ""  # of the inputs prepare drew
    expected_sha256: str = ""  # of reference.py's result on them, on the preparing machine
    data: str = ""  # .npz relative to the bundle (examples)


@dataclass
class Manifest:
    backend: str  # IREE's: cuda or llvm-cpu
    arch: str  # sm_80, or the CPU
    iree_compiler: str
    iree_runtime: str  # the version of the carried (or expected) iree-base-runtime
    created: str
    modules: dict[str, ModuleEntry] = field(default_factory=dict)
    cases: list[CaseEntry] = field(default_factory=list)
    wheels: list[str] = field(default_factory=list)  # relative to the bundle
    notes: list[str] = field(default_factory=list)

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        raw = json.loads((folder / MANIFEST).read_text())
        raw["modules"] = {k: ModuleEntry(**v) for k, v in raw["modules"].items()}
        raw["cases"] = [CaseEntry(**c) for c in raw["cases"]]
        return cls(**raw)

    @property
    def iree_driver(self) -> str:
        """The IREE runtime device the modules run on."""
        return "cuda" if self.backend == "cuda" else "local-task"


_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Each array as its bits, with its element type's name beside it."""
    stored: dict[str, np.ndarray] = {}
    for name, array in arrays.items():
        a = np.require(array, requirements="C")  # ascontiguousarray makes 0-d 1-d
        stored[name] = a.view(_BITS[a.dtype.itemsize])
        stored[f"{name}.dtype"] = np.array(a.dtype.name)
    np.savez(path, **stored)


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    # imported here: spec imports ml_dtypes, which the device may only have once the bundle's
    # wheels are installed (install.py reads the manifest before that)
    from lossgrad_compiler import spec

    def element_type(name: str) -> np.dtype:
        """A float type by spec's name (bfloat16 is ml_dtypes'), else numpy's (int64)."""
        float_type = spec.float_type(name)
        return float_type.dtype if float_type is not None else np.dtype(name)

    with np.load(path) as stored:
        names = [k for k in stored.files if not k.endswith(".dtype")]
        return {n: stored[n].view(element_type(str(stored[f"{n}.dtype"]))) for n in names}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
