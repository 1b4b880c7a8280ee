"""Fixtures of the native ORT kernel tests."""

from __future__ import annotations

import pytest

from tests.ort.support import native_library


@pytest.fixture(scope="module")
def native_kernels() -> str:
    """The kernel library, built (or found) once before a module's first test, so that no
    test pays for the build inside its own timing; its path."""
    return native_library()
