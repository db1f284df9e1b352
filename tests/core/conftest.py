"""Fixtures for the core tests: a model that abstains, scripted like every folder's models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _support import ScriptedModel


@pytest.fixture
def model(scripted: Callable[..., ScriptedModel], make_ledger: Callable[..., str]) -> Any:
    """A scripted model that abstains, for tests of what happens before or around the call."""
    return scripted(make_ledger(answer=None, missing_evidence=["more evidence"]))
