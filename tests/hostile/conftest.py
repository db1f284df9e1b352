"""The hostile suite's size and tally (the option and the summary live in tests/conftest.py).

The fuzz runs ``--hostile-cases`` seeded ledgers per citation mode (400 by default, a few
seconds); ``uv run pytest tests/hostile --hostile-cases 20000`` is the larger run.
"""

from __future__ import annotations

from collections import Counter

import pytest


@pytest.fixture
def hostile_cases(request: pytest.FixtureRequest) -> int:
    cases: int = request.config.getoption("--hostile-cases")
    return cases


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Counter[str]:
    """Counts reported at the end of the run: cases, citations returned, false accepts."""
    counter: Counter[str] = request.config.hostile_tally
    return counter
