"""One-time warnings, from any thread: each key warns once per process."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Hashable

from evidence_first._shapes.errors import UnenforcedSettingsWarning

__all__ = ["warn_once"]

_warned: set[Hashable] = set()
_warned_lock = threading.Lock()


def warn_once(
    key: Hashable,
    message: str,
    *,
    stacklevel: int,
    category: type[UnenforcedSettingsWarning] = UnenforcedSettingsWarning,
) -> None:
    """Issue ``message`` as one warning of ``category`` per ``key``, from any thread.

    ``stacklevel`` is as for :func:`warnings.warn`, counted from the caller of this function.
    """
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, category, stacklevel=stacklevel + 1)
