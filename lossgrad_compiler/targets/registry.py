"""Targets by name: the entry-point group `lossgrad_compiler.targets`.

Every target, the five built-in ones included, is an entry point of this group naming a
`Target` subclass (or instance), `name = "package.module:Class"` (pyproject.toml's
`[project.entry-points."lossgrad_compiler.targets"]`). A package outside this repository
adds a target by declaring one in its own metadata; nothing here changes. The group is
read when a target is looked up, so a package installed into a running process (or a
.dist-info put on sys.path) is seen."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from lossgrad_compiler.targets.interface import Target, TargetUnavailableError

ENTRY_POINT_GROUP = "lossgrad_compiler.targets"
OWN_DISTRIBUTION = "lossgrad_compiler"


class UnknownTargetError(ValueError):
    """A target name no installed package registers."""


@dataclass(frozen=True)
class Registered:
    """One entry point of the group: the target it names, or why it could not be loaded."""

    name: str
    reference: str
    distribution: str
    target: Target | None
    problem: str = ""


def entry_points() -> list[metadata.EntryPoint]:
    """The group's entry points: this distribution's first (in pyproject.toml's order),
    then the others by name. A name registered twice is an error (which one is meant?)."""
    found = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    own = [e for e in found if _distribution(e) == OWN_DISTRIBUTION]
    others = sorted((e for e in found if _distribution(e) != OWN_DISTRIBUTION), key=_sort_key)
    ordered: dict[str, metadata.EntryPoint] = {}
    for entry in own + others:
        if entry.name in ordered and ordered[entry.name].value != entry.value:
            raise UnknownTargetError(
                f"target '{entry.name}' is registered twice ({ordered[entry.name].value} by "
                f"{_distribution(ordered[entry.name])}, {entry.value} by {_distribution(entry)})"
            )
        ordered.setdefault(entry.name, entry)
    return list(ordered.values())


def _distribution(entry: metadata.EntryPoint) -> str:
    dist = entry.dist
    return dist.metadata["Name"] if dist is not None else ""


def _sort_key(entry: metadata.EntryPoint) -> tuple[str, str]:
    return (entry.name, _distribution(entry))


def target_names() -> list[str]:
    return [e.name for e in entry_points()]


def registered() -> list[Registered]:
    """Every registered target, loaded: what --help lists. A target whose module cannot be
    imported is listed with the reason (it gives that reason when chosen)."""
    result = []
    for entry in entry_points():
        try:
            target = _load(entry)
        except TargetUnavailableError as err:
            result.append(Registered(entry.name, entry.value, _distribution(entry), None, str(err)))
        else:
            result.append(Registered(entry.name, entry.value, _distribution(entry), target))
    return result


def get_target(name: str) -> Target:
    """The target registered as `name`: UnknownTargetError naming the known ones, or
    TargetUnavailableError when its module cannot be imported."""
    for entry in entry_points():
        if entry.name == name:
            return _load(entry)
    known = ", ".join(target_names()) or f"none: no package registers '{ENTRY_POINT_GROUP}'"
    raise UnknownTargetError(f"unknown target '{name}' (known targets: {known})")


def _load(entry: metadata.EntryPoint) -> Target:
    try:
        found = entry.load()
    except ImportError as err:
        raise TargetUnavailableError(
            f"target '{entry.name}' is unavailable in this installation ({err})"
        ) from None
    target = found() if isinstance(found, type) else found
    if not isinstance(target, Target):
        raise TargetUnavailableError(
            f"target '{entry.name}': {entry.value} is not a lossgrad_compiler Target"
        )
    if target.name != entry.name:
        raise TargetUnavailableError(
            f"target '{entry.name}': {entry.value} calls itself '{target.name}'"
        )
    return target
