"""Fixtures of the ONNX tests."""

from __future__ import annotations

import pytest

from lossgrad_compiler import onnx as lossgrad_onnx


@pytest.fixture
def registered_schemas() -> None:
    """The ai.lossgrad schemas registered with onnx for the test (a test may deregister
    them)."""
    lossgrad_onnx.ensure_schemas()
