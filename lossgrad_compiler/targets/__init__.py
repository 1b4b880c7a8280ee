"""Compilation targets: the `Target` interface (interface.py), the registry read from the
entry-point group `lossgrad_compiler.targets` (registry.py), and the five built-in targets,
one module each, registered in pyproject.toml like a third party's would be."""

from lossgrad_compiler.targets.interface import (
    Artifact,
    Compilation,
    Option,
    Produces,
    Target,
    TargetOptionError,
    TargetUnavailableError,
)
from lossgrad_compiler.targets.registry import (
    ENTRY_POINT_GROUP,
    Registered,
    UnknownTargetError,
    find,
    get_target,
    registered,
    target_names,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Artifact",
    "Compilation",
    "Option",
    "Produces",
    "Registered",
    "Target",
    "TargetOptionError",
    "TargetUnavailableError",
    "UnknownTargetError",
    "find",
    "get_target",
    "registered",
    "target_names",
]
