"""Test-wide settings.

Hypothesis's per-example deadline is a wall-clock assertion; tests here never assert on
time (speed lives in `make bench`), so it is off for every property test.
"""

from __future__ import annotations

import hypothesis

hypothesis.settings.register_profile("metricsched", deadline=None)
hypothesis.settings.load_profile("metricsched")
