"""The provider table's shape: how an integration recognises a model and calls it strictly.

Each integration keeps its own entries, one module per provider; the shape is shared and knows
no framework. A model's class is recognised without importing any provider package.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from evidence_first._models.profiles import (
    ModelProfile,
    ProviderFamily,
    profile_for_name,
    profile_of,
)

__all__ = ["Provider", "is_instance_of"]

PrepareT = TypeVar("PrepareT")


def _nothing_to_refuse(model: Any) -> None:
    return None


def _nothing_to_announce(model: Any, stacklevel: int) -> None:
    return None


def _as_found(model: Any, profile: ModelProfile) -> ModelProfile:
    return profile


def _model_field(model: Any) -> str:
    return str(getattr(model, "model", None) or getattr(model, "model_name", None) or "")


def is_instance_of(model: object, class_name: str, package: str | None = None) -> bool:
    """Whether ``model`` is an instance of the class ``class_name``, or of a subclass.

    With ``package`` (such as ``"llama_index.llms.ollama"``), the class is the one that package
    exports, looked up only if the package is already imported (a model of it exists only if it
    is); without, any class of that name in ``model``'s class hierarchy.
    """
    if package is not None:
        cls = getattr(sys.modules.get(package), class_name, None)
        return isinstance(cls, type) and isinstance(model, cls)
    return any(cls.__name__ == class_name for cls in type(model).__mro__)


@dataclass(frozen=True)
class Provider(Generic[PrepareT]):
    """One allow-listed framework model class (and its subclasses) and how to call it strictly.

    Attributes:
        name: The provider's name, as reports show it (``"openai-compatible"``).
        class_name: The class's name; a model whose class derives from it matches.
        prepare: The framework's own preparation of the strict call: one call, no tools, no
            retries, the output limit, the timeout, temperature where allowed, the schema in the
            provider's native field and dialect. Its signature is the integration's.
        limits: The output limits the model itself is configured with (``None`` for unset);
            the smallest of them and the caller's ``max_output_tokens`` is what is sent.
        family: How a model of the class is reached (``"anthropic"``; an OpenAI class's by
            the host its client calls), for the rule table (:func:`profile`).
        model_name: The model's name as the caller gave it (its ``model`` field by default).
        adjusted: The profile as the caller's own settings of the model change it (extended
            thinking takes no temperature; the Responses API reads no ``response_format``).
        package: The package that exports the class; ``None``: the name alone identifies it.
        refuse: Raises :class:`~evidence_first.InvalidRequestError` for settings of the
            model that cannot be called strictly; checked before each call.
        announce: Warns, once per reader and with a ``warnings.warn`` stack level counted from
            its caller, about what this model's call cannot enforce.
        async_session: Given the model and the timeout, what an async call needs of its own
            (fresh HTTP clients), or ``None`` when the caller's own serve.
    """

    name: str
    class_name: str
    prepare: PrepareT
    limits: Callable[[Any], Iterable[object]]
    family: Callable[[Any], ProviderFamily]
    model_name: Callable[[Any], str] = _model_field
    adjusted: Callable[[Any, ModelProfile], ModelProfile] = _as_found
    package: str | None = None
    refuse: Callable[[Any], None] = _nothing_to_refuse
    announce: Callable[[Any, int], None] = _nothing_to_announce
    async_session: Callable[[Any, float], Any] | None = None

    def profile(self, model: object, given: ModelProfile | str | None = None) -> ModelProfile:
        """``model``'s profile, as its own settings change it.

        ``given`` (a profile, or a model name to read as), else the rule table's for the
        model's family and name.

        Raises:
            InvalidRequestError: ``given`` is neither a profile nor a model name.
        """
        family = self.family(model)
        found = profile_of(given, family) or profile_for_name(self.model_name(model), family)
        return self.adjusted(model, found)

    def matches(self, model: object) -> bool:
        """Whether ``model`` is an instance of this provider's class, or of a subclass."""
        return is_instance_of(model, self.class_name, self.package)

    def configured_limit(self, model: object) -> int | None:
        """The smallest output limit ``model`` is configured with, if any.

        Only a positive int is a limit: ``None`` is unset, and a value such as Ollama's
        ``num_predict=-1`` (no limit) never replaces the caller's ``max_output_tokens``.
        """
        found = [
            limit
            for limit in self.limits(model)
            if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0
        ]
        return min(found) if found else None
