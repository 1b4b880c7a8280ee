"""`lossgrad-opt`: xdsl-opt with the project's dialects, passes and targets.

Everything upstream xdsl-opt offers (`-p canonicalize,cse`, `--split-input-file`,
`--verify-diagnostics`, `-t mlir`, ...) works unchanged. The project's constructs come from
the one table in lossgrad_compiler/universe.py. When the package is installed, xdsl-opt's
own `xdsl.universe` discovery has already registered them; registering is then skipped
(a second dialect registration would raise AlreadyRegisteredConstructException).

    lossgrad-opt model.mlir -p lower-lossgrad,canonicalize,cse
    python -m lossgrad_compiler.opt model.mlir -p lower-lossgrad
"""

from __future__ import annotations

import gc
from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain

from lossgrad_compiler.universe import DIALECTS, PASSES, TARGETS, factories


class LossgradOptMain(xDSLOptMain):
    """xDSLOptMain plus the lossgrad_compiler registration table."""

    version_format = "lossgrad-opt (xdsl {xdsl_version})"

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        registered = set(self.ctx.registered_dialect_names)
        for name, factory in factories(DIALECTS).items():
            if name not in registered:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in factories(PASSES).items():
            self.available_passes.setdefault(name, factory)

    def register_all_targets(self) -> None:
        """`-t ascendc` and any later target: registered from universe.TARGETS."""
        super().register_all_targets()
        for name, factory in factories(TARGETS).items():
            self.available_targets.setdefault(name, factory)


def main(args: Sequence[str] | None = None) -> None:
    """Entry point of the `lossgrad-opt` console script.

    The cyclic GC is switched off for this short-lived process: IR is one big graph of
    cycles that stays alive until exit, and collecting it repeatedly made large modules
    superlinear (xdsl.md §7)."""
    gc.disable()
    LossgradOptMain(description="lossgrad_compiler modular optimizer driver", args=args).run()


if __name__ == "__main__":
    main()
