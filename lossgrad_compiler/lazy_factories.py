"""Lazy `module:attribute` factories, xDSL's registry style: each table of dialects, passes
and lossgrad-opt outputs names its entries by reference, so a name is imported only when it
is first used."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy(reference: str) -> Callable[[], Any]:
    """A factory that imports `module:attribute` when called."""
    module_name, _, attribute = reference.partition(":")

    def load() -> Any:
        return getattr(importlib.import_module(module_name), attribute)

    load.__qualname__ = load.__name__ = f"load_{attribute}"
    return load


def factories(table: dict[str, str]) -> dict[str, Callable[[], Any]]:
    """name → lazy factory, for a table of name → `module:attribute`."""
    return {name: lazy(reference) for name, reference in table.items()}
