"""Targets by name: the entry-point group `lossgrad_compiler.targets`.

Every target, the five built-in ones included, is an entry point of this group naming a
`Target` subclass (or instance), `name = "package.module:Class"` (pyproject.toml's
`[project.entry-points."lossgrad_compiler.targets"]`). A package outside this repository
adds a target by declaring one in its own metadata; nothing here changes. The group is
read when a target is looked up, so a package installed into a running process (or a
.dist-info put on sys.path) is seen.

A broken package costs only its own target (loading.py): the others load, and the broken
one is listed with a one-line reason naming its package. A name is one package's: another
package registering a built-in name is refused (the built-in target keeps it), and a name
two other packages register is refused for both, each message naming both packages."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from lossgrad_compiler.targets.interface import Target, TargetUnavailableError
from lossgrad_compiler.targets.loading import load

ENTRY_POINT_GROUP = "lossgrad_compiler.targets"
OWN_DISTRIBUTION = "lossgrad_compiler"


class UnknownTargetError(ValueError):
    """A target name no installed package registers."""


@dataclass(frozen=True)
class Registered:
    """One entry point of the group: the target it names, or why it is not used."""

    name: str
    reference: str
    distribution: str
    target: Target | None
    problem: str = ""


@dataclass(frozen=True)
class Candidate:
    """An entry point and its package; `refusal` says why it is not used (its name is
    another package's too), empty when it is."""

    entry: metadata.EntryPoint
    distribution: str
    refusal: str = ""


def candidates() -> list[Candidate]:
    """The group's entry points: this distribution's first (in pyproject.toml's order),
    then the others by name, each name's duplicates refused."""
    found = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    own = [e for e in found if _distribution(e) == OWN_DISTRIBUTION]
    others = sorted((e for e in found if _distribution(e) != OWN_DISTRIBUTION), key=_sort_key)
    by_name: dict[str, list[metadata.EntryPoint]] = {}
    for entry in own + others:  # importlib reads a distribution once, however often it is seen
        by_name.setdefault(entry.name, []).append(entry)
    result = []
    for name, entries in by_name.items():
        result += _resolved(name, entries)
    return result


def _resolved(name: str, entries: list[metadata.EntryPoint]) -> list[Candidate]:
    """A name's registrations: one is used; a duplicate is refused, naming both packages."""
    first, *rest = entries
    if not rest:
        return [Candidate(first, _distribution(first))]
    if _distribution(first) == OWN_DISTRIBUTION:
        return [Candidate(first, OWN_DISTRIBUTION)] + [
            Candidate(
                other,
                _distribution(other),
                f"target '{name}' of package '{_distribution(other)}' ({other.value}) is "
                f"refused: '{name}' is a built-in target of package '{OWN_DISTRIBUTION}' "
                f"({first.value})",
            )
            for other in rest
        ]
    packages = " and ".join(f"package '{_distribution(e)}' ({e.value})" for e in entries)
    refusal = f"target '{name}' is refused: {packages} register it; uninstall all but one"
    return [Candidate(e, _distribution(e), refusal) for e in entries]


def _distribution(entry: metadata.EntryPoint) -> str:
    dist = entry.dist
    return dist.metadata["Name"] if dist is not None else ""


def _sort_key(entry: metadata.EntryPoint) -> tuple[str, str]:
    return (entry.name, _distribution(entry))


def target_names() -> list[str]:
    """Every registered name, once, in the registry's order."""
    return list(dict.fromkeys(c.entry.name for c in candidates()))


def registered() -> list[Registered]:
    """Every registered target, loaded: what --help lists. A target that cannot be loaded,
    or whose name is refused, is listed with the one-line reason (it gives that reason when
    chosen); a refusal two packages share is listed once."""
    result: list[Registered] = []
    for candidate in candidates():
        entry = _registered(candidate)
        if entry.problem and any(r.problem == entry.problem for r in result):
            continue
        result.append(entry)
    return result


def find(name: str) -> Registered:
    """The registration used for `name` (its target, or the problem that keeps it out);
    UnknownTargetError naming the known ones."""
    found = [c for c in candidates() if c.entry.name == name]
    if not found:
        known = ", ".join(target_names()) or f"none: no package registers '{ENTRY_POINT_GROUP}'"
        raise UnknownTargetError(f"unknown target '{name}' (known targets: {known})")
    used = [c for c in found if not c.refusal]
    return _registered(used[0] if used else found[0])


def get_target(name: str) -> Target:
    """The target registered as `name`: UnknownTargetError naming the known ones, or
    TargetUnavailableError with the one-line reason it cannot be used."""
    entry = find(name)
    if entry.target is None:
        raise TargetUnavailableError(entry.problem)
    return entry.target


def _registered(candidate: Candidate) -> Registered:
    entry, distribution = candidate.entry, candidate.distribution
    if candidate.refusal:
        return Registered(entry.name, entry.value, distribution, None, candidate.refusal)
    try:
        target = load(entry, distribution)
    except TargetUnavailableError as err:
        return Registered(entry.name, entry.value, distribution, None, str(err))
    return Registered(entry.name, entry.value, distribution, target)
