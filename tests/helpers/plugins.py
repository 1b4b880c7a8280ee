"""Third-party target packages as `pip install` leaves them: a module and a .dist-info with
METADATA and entry_points.txt in a folder put on sys.path (PYTHONPATH for a subprocess).
The broken ones, one per kind of breakage, show that a plugin costs only itself."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from lossgrad_compiler.targets import ENTRY_POINT_GROUP

BIN = Path(sys.executable).parent

_MODULE = """
from lossgrad_compiler.targets import Artifact, Compilation, Produces, Target
from lossgrad_compiler.errors import InvalidArgumentError


class Working(Target):
    name = "{name}"
    produces = Produces.MODULE
    suffix = ".txt"
    description = "a target that works"

    def compile(self, compilation: Compilation) -> Artifact:
        {body}
"""
_WORKS = 'return Artifact(Produces.MODULE, data=b"ok")'


@dataclass(frozen=True)
class Plugin:
    """One distribution: its name, the target name it registers, the entry point's object
    reference and its module's source."""

    distribution: str
    target: str
    reference: str
    source: str


def target_package(distribution: str, target: str, body: str = _WORKS) -> Plugin:
    """A package whose class `Working` registers as `target`, its compile doing `body`."""
    source = _MODULE.format(name=target, body=body)
    return Plugin(distribution, target, f"{distribution}:Working", source)


_RAISING_INIT = "\n    def __init__(self) -> None:\n        raise KeyError('no configuration')\n"

PLUGINS: dict[str, Plugin] = {
    "import raises": Plugin(
        "boom_on_import", "boom-import", "boom_on_import:Boom",
        'raise RuntimeError("the plugin cannot start")\n',
    ),
    "missing attribute": Plugin("no_such_class", "no-class", "no_such_class:Absent", "VALUE = 1\n"),
    "constructor raises": Plugin(
        "init_raises", "init-raises", "init_raises:Working",
        _MODULE.format(name="init-raises", body=_WORKS) + _RAISING_INIT,
    ),
    "duplicate onnx": target_package("fake_onnx_target", "onnx"),
    "compile returns None": target_package("returns_none", "returns-none", "return None"),
    "compile raises": target_package(
        "compile_raises", "compile-raises", 'raise ZeroDivisionError("the plugin divided by zero")'
    ),
}  # fmt: skip
"""One package per kind of breakage, by kind."""


def install(folder: Path, plugin: Plugin) -> None:
    """Write `plugin`'s module and .dist-info into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    module = plugin.reference.partition(":")[0]
    (folder / f"{module}.py").write_text(plugin.source)
    info = folder / f"{plugin.distribution}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {plugin.distribution}\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n{plugin.target} = {plugin.reference}\n"
    )


def environment(folder: Path) -> dict[str, str]:
    """os.environ with `folder` first on PYTHONPATH and the venv's scripts on PATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    return env


def lossgrad_compile(folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`lossgrad-compile ARGUMENTS` in a fresh process that sees the packages of `folder`."""
    return subprocess.run(
        [str(BIN / "lossgrad-compile"), *arguments],
        env=environment(folder),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
