"""The device check's table (Markdown, ratios) and its rows as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

COLUMNS = (
    "case", "check", "IREE ms", "PyTorch ms", "copy ms", "IREE/PyTorch", "IREE/copy", "IREE GB/s"
)  # fmt: skip


@dataclass
class Row:
    name: str
    function: str
    check: str  # "ok", "FAIL ...", "error ...", "not run ..."
    nbytes: int = 0  # what the kernel's tensors hold: the inputs it reads and its result
    iree_s: float | None = None
    torch_s: float | None = None
    copy_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.check == "ok"

    def cells(self) -> list[str]:
        def ms(s: float | None) -> str:
            return "—" if s is None else f"{s * 1e3:.4f}"

        def ratio(a: float | None, b: float | None) -> str:
            return "—" if a is None or b is None else f"{a / b:.2f}"

        rate = "—" if not self.iree_s else f"{self.nbytes / self.iree_s / 1e9:.1f}"
        check = self.check if self.passed else self.check.splitlines()[0][:60]
        return [
            self.name, check, ms(self.iree_s), ms(self.torch_s), ms(self.copy_s),
            ratio(self.iree_s, self.torch_s), ratio(self.iree_s, self.copy_s), rate,
        ]  # fmt: skip


def markdown(header: list[str], rows: list[Row]) -> str:
    lines = [*header, "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write(out: Path, header: list[str], rows: list[Row]) -> None:
    """table.md and results.json, rewritten after every case (a stopped run keeps its rows)."""
    (out / "table.md").write_text(markdown(header, rows))
    (out / "results.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
