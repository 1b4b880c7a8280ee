"""Loading one entry point of the target group into a checked `Target`.

Loading runs a package's code (its module's import, its constructor), and `--help` loads
every registered target, so whatever one package does wrong must surface here as one
TargetUnavailableError naming the target and its package, never as an exception that ends
the command for every target."""

from __future__ import annotations

import re
from importlib import metadata

from lossgrad_compiler.targets.interface import (
    COMMAND_FLAGS,
    Option,
    Produces,
    Target,
    TargetUnavailableError,
)

_FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*")


def one_line(err: BaseException) -> str:
    """`Type: message` on one line, for a problem a package's code raised."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def unavailable(name: str, distribution: str, why: str) -> TargetUnavailableError:
    return TargetUnavailableError(f"target '{name}' of package '{distribution}' {why}")


def load(entry: metadata.EntryPoint, distribution: str) -> Target:
    """The target `entry` names, instantiated and checked; TargetUnavailableError (one line,
    naming the target and `distribution`) for any failure of the package's code."""
    try:
        found = entry.load()
    except ImportError as err:
        raise unavailable(
            entry.name, distribution, f"is unavailable in this installation ({one_line(err)})"
        ) from None
    except Exception as err:  # a package's import may raise anything
        raise unavailable(
            entry.name, distribution, f"cannot be loaded: {entry.value} raised {one_line(err)}"
        ) from None
    try:
        target = found() if isinstance(found, type) else found
    except Exception as err:  # a package's constructor may raise anything
        raise unavailable(
            entry.name, distribution, f"cannot be created: {entry.value}() raised {one_line(err)}"
        ) from None
    if not isinstance(target, Target):
        raise unavailable(
            entry.name, distribution, f"is broken: {entry.value} is not a lossgrad_compiler Target"
        )
    problem = declaration_problem(target, entry.name)
    if problem is not None:
        raise unavailable(entry.name, distribution, f"is broken: {entry.value} {problem}")
    return target


def declaration_problem(target: Target, name: str) -> str | None:
    """What is wrong with the class attributes `--help` and the driver read, or None."""
    declared = {
        key: getattr(target, key, None)
        for key in ("name", "produces", "description", "options")
    }
    if declared["name"] != name:
        return f"calls itself {declared['name']!r}, not '{name}'"
    if not isinstance(declared["produces"], Produces):
        return f"declares produces = {declared['produces']!r}, not a Produces"
    if not isinstance(declared["description"], str):
        return "declares no description (one line for --help)"
    options = declared["options"]
    if not isinstance(options, tuple) or not all(isinstance(o, Option) for o in options):
        return "declares options that are not a tuple of Option"
    for option in options:
        problem = option_problem(option)
        if problem is not None:
            return f"declares option '{option.name}' {problem}"
    return None


def option_problem(option: Option) -> str | None:
    """Why the command line cannot take `option` as a flag, or None."""
    flag = option.cli_flag
    if not _FLAG.fullmatch(flag):
        return f"with the flag {flag!r}, not a --long-flag"
    if flag in COMMAND_FLAGS:
        return f"with the flag {flag}, which is lossgrad-compile's own"
    if not callable(option.type):
        return f"with a type that is not callable ({option.type!r})"
    return None
