"""Suite-wide pytest configuration: the hypothesis profile every property test runs under.

Tests choose their own `max_examples`; the profile only removes the per-example deadline
(the first example of a test pays for imports and kernel builds, which is not a failure).
Select another profile with HYPOTHESIS_PROFILE (e.g. `ci`: derandomized, reproducible)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "lossgrad",
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("ci", parent=settings.get_profile("lossgrad"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "lossgrad"))
