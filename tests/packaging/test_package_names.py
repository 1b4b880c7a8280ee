"""No package of the project has a public name that a submodule import can replace.

Importing `pkg.name` sets the attribute `name` of `pkg` to the submodule, so a function or
class of the same name bound in `pkg/__init__.py` (eagerly, or lazily inside a function)
stops being callable once anything imports the submodule. Every installed package is
checked in a fresh interpreter: the names it exports before and after importing all of its
submodules, and the names its submodules take."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: records each package's public names, imports every
# submodule of every package, then reports what changed and which names clash.
PROBE = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys, types

    packages = json.loads(sys.argv[1])
    before, clashes = {}, []
    for name in packages:
        package = importlib.import_module(name)
        public = getattr(package, "__all__", None)
        if public is None:
            public = [n for n in vars(package) if not n.startswith("_")]
        before[name] = {n: getattr(package, n) for n in public}
        for sub in pkgutil.iter_modules(package.__path__):
            value = before[name].get(sub.name, vars(package).get(sub.name))
            if value is not None and not isinstance(value, types.ModuleType):
                clashes.append(f"{name}.{sub.name}: a submodule and a {type(value).__name__}")
    for name in packages:
        for sub in pkgutil.iter_modules(importlib.import_module(name).__path__):
            importlib.import_module(f"{name}.{sub.name}")
    replaced = [
        f"{name}.{n}: was {type(v).__name__}, now {type(getattr(sys.modules[name], n)).__name__}"
        for name, names in before.items()
        for n, v in names.items()
        if getattr(sys.modules[name], n) is not v
    ]
    print(json.dumps({"clashes": clashes, "replaced": replaced, "checked": before and
                      {k: sorted(v) for k, v in before.items()}}))
    """
)


def installed_packages() -> list[str]:
    """The packages pyproject.toml installs (dialects/ and passes/ included)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["setuptools"]["packages"])


@pytest.fixture(scope="module")
def probe() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(installed_packages())],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_package_was_checked(probe: dict) -> None:
    assert set(probe["checked"]) == set(installed_packages())
    assert "emit_project" in probe["checked"]["lossgrad_compiler.backends.ascendc"]


def test_no_submodule_shares_a_name_with_a_function_or_class(probe: dict) -> None:
    assert probe["clashes"] == []


def test_public_names_survive_importing_every_submodule(probe: dict) -> None:
    assert probe["replaced"] == []
