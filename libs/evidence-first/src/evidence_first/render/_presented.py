"""How an answer shows itself: ``str()`` and the notebook view, as the renderers set them.

:mod:`evidence_first.render` sets them on import, so the result's model holds no presentation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

__all__ = ["Presented", "set_presenters"]

_Presenter = Callable[[Any], str]  # a renderer of an EvidenceAnswer
_presenters: dict[Literal["text", "html"], _Presenter] = {}


class Presented:
    """A result that shows itself through the renderers :func:`set_presenters` was given."""

    def _repr_html_(self) -> str:
        # Notebooks show the rendered view: numbered citations, spans highlighted in context.
        return _presenters["html"](self)

    def __str__(self) -> str:
        # The plain-text report: status, answer, each cited span in its source, the verdict on
        # every citation, omissions and reason codes; never the raw response.
        return _presenters["text"](self)


def set_presenters(*, text: _Presenter, html: _Presenter) -> None:
    """Set the text report ``str()`` returns and the HTML view notebooks show.

    :mod:`evidence_first.render` sets its renderers when it is imported, and the package
    imports it: the rendering depends on the result's model, never the reverse.
    """
    _presenters["text"] = text
    _presenters["html"] = html
