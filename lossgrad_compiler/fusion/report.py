"""What the fusion pass did, and why it left each recognised near-miss alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Fused:
    """One subgraph replaced by one ai.lossgrad node."""

    op_type: str
    attributes: dict[str, Any]
    inputs: tuple[str, ...]  # grad_output, self, target, then the optional inputs present
    output: str
    form: str  # which written form was recognised (e.g. "pytorch", "inline")
    removed_nodes: int
    # how the graph grouped operations the operator groups otherwise ("" when it rounds as
    # the operator does); only with fuse(model, reassociate=True)
    reassociated: str = ""
    # what the user must know about the graph the node keeps (a second report line)
    note: str = ""
    added: str = ""  # the nodes the fusion adds besides the node, and why


@dataclass(frozen=True)
class LeftAlone:
    """A subgraph that looks like a loss gradient but was not fused, and why."""

    op_type: str
    output: str
    reason: str


@dataclass
class FusionReport:
    fused: list[Fused] = field(default_factory=list)
    left: list[LeftAlone] = field(default_factory=list)

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for item in self.fused:
            counts[item.op_type] = counts.get(item.op_type, 0) + 1
        done = ", ".join(f"{n} {op}" for op, n in sorted(counts.items())) or "nothing"
        return f"fused {done}; left {len(self.left)} candidate(s) as they are"

    def lines(self) -> list[str]:
        """The report as a user reads it: one line per fusion and per candidate left."""
        out = [self.summary()]
        for item in self.fused:
            added = f", {item.added}" if item.added else ""
            attrs = ", ".join(f"{k}={v}" for k, v in item.attributes.items())
            regrouped = (
                f"; reassociated: the graph computed {item.reassociated}"
                if item.reassociated
                else ""
            )
            out.append(
                f"  fused {item.op_type}({attrs}) -> '{item.output}' from the {item.form} form "
                f"({item.removed_nodes} node(s) removed{added}{regrouped})"
            )
            if item.note:
                out.append(f"    note: {item.note}")
        for left in self.left:
            out.append(f"  left '{left.output}' ({left.op_type}?): {left.reason}")
        return out
