"""One result against reference.py under the CPU tests' tolerance: tolerances.TIGHT with
each element's term magnitude (tests/helpers, importable without xDSL or pytest), as
tests/iree/test_iree_numerics.py checks IREE's llvm-cpu modules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tests.helpers.tolerances import TIGHT, assert_matches


def mismatch(
    got: np.ndarray,
    expected: np.ndarray,
    op: str,
    inputs: Mapping[str, np.ndarray],
    attrs: Mapping[str, Any],
) -> str | None:
    """None when every element agrees; else what differs (counts and the worst elements)."""
    try:
        assert_matches(got, expected, op, inputs, attrs, tolerance=TIGHT, context=op)
    except AssertionError as err:
        return str(err)
    return None
