"""Live tests run the embedded local model for real and assert invariants, never its wording."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.live)


@pytest.fixture
def http_client() -> Iterator[httpx.Client]:
    """An HTTP client for a framework model, closed after the test.

    ``OpenAILike`` builds an OpenAI client of its own per instance and never closes it; its
    pooled connection then warns (``ResourceWarning``) in whichever test collects it.
    """
    with httpx.Client() as client:
        yield client
