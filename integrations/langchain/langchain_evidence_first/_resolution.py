"""What a caller's ``llm`` resolves to: the chat model inside bindings and configurable runnables.

LangChain resolves a ``configurable_alternatives`` or ``configurable_fields`` runnable per call,
under the call's config, and a ``bind`` or ``with_config`` binding merges its arguments and
config into the call; the strict call does the same through public API only, so that the strict
settings apply to the chat model a call resolves to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.base import RunnableBinding, RunnableBindingBase
from langchain_core.runnables.config import merge_configs
from langchain_core.runnables.configurable import (
    DynamicRunnable,
    RunnableConfigurableAlternatives,
    RunnableConfigurableFields,
)
from langchain_core.runnables.fallbacks import RunnableWithFallbacks
from langchain_core.runnables.retry import RunnableRetry

from evidence_first import InvalidRequestError
from evidence_first.adapters import NESTED_SETTINGS, TOOL_KEYS, refuse_tools, without_strict_keys

__all__ = ["Binding", "Resolved", "resolve"]


@dataclass(frozen=True)
class Binding:
    """One runnable layer around the caller's chat model, applied again around its strict copy.

    Attributes:
        kwargs: A ``bind``'s keyword arguments, less the strict call's settings.
        config: A ``with_config``'s config (or a configurable runnable's own), merged into
            the call as LangChain merges it.
    """

    kwargs: dict[str, Any]
    config: RunnableConfig


@dataclass(frozen=True)
class Resolved:
    """The chat model a caller's ``llm`` resolves to, and the layers around it.

    Attributes:
        chat: The caller's chat model (never modified).
        bindings: The ``bind`` and ``with_config`` layers, outermost first.
        per_call: Whether ``llm`` holds a configurable runnable, so that each call resolves
            it again under that call's config.
    """

    chat: BaseChatModel
    bindings: tuple[Binding, ...] = ()
    per_call: bool = False


# A configurable runnable is named in a message by the method that builds it.
_BUILT_BY = {
    RunnableConfigurableAlternatives: "configurable_alternatives",
    RunnableConfigurableFields: "configurable_fields",
}


def resolve(llm: object, config: RunnableConfig | None) -> Resolved:
    """The chat model ``llm`` resolves to under ``config``, as LangChain resolves it per call.

    A binding (``bind``, ``with_config``) is unwrapped and its config merged into the call's,
    as ``RunnableBinding`` merges it; a configurable runnable is resolved by its public
    ``prepare``, as its own ``invoke`` does; until a chat model is reached.

    Raises:
        InvalidRequestError: ``llm`` resolves to no chat model, or to one that retries, falls
            back or binds tools; past a configurable runnable the message names it.
    """
    bindings: list[Binding] = []
    through: str | None = None
    name = "llm"
    model = llm
    while not isinstance(model, BaseChatModel):
        if isinstance(model, DynamicRunnable):
            through = through or _BUILT_BY.get(type(model), type(model).__name__)
            name = f"llm (resolved through {through})"
            if model.config:
                bindings.append(Binding({}, model.config))
            model, config = model.prepare(config)
        elif _is_binding(model, name):
            _refuse_bound_tools(model.kwargs, name)
            bindings.append(Binding(without_strict_keys(model.kwargs), model.config))
            config = merge_configs(model.config, config)
            model = model.bound
        else:
            kind = type(model).__name__
            msg = f"{name} must be a LangChain chat model (BaseChatModel), got {kind}"
            raise InvalidRequestError(msg, field="llm")
    for setting in NESTED_SETTINGS:
        refuse_tools(getattr(model, setting, None), setting, name=name)
    return Resolved(model, tuple(bindings), per_call=through is not None)


def _refuse_bound_tools(kwargs: Mapping[str, Any], name: str) -> None:
    """Refuse a binding that carries tools (``bind_tools``, or tools in a bound body).

    Raises:
        InvalidRequestError: With ``field="llm"``, naming what to pass instead.
    """
    if TOOL_KEYS & kwargs.keys():
        msg = f"{name} has bound tools (bind_tools); pass the chat model without tools"
        raise InvalidRequestError(msg, field="llm")
    refuse_tools(kwargs, "its binding (bind)", name=name)


def _is_binding(model: object, name: str) -> TypeGuard[RunnableBinding[Any, Any]]:
    """Whether ``model`` is a plain binding; a retry, fallbacks or another wrapper is refused.

    Raises:
        InvalidRequestError: ``model`` retries, falls back, or is another wrapper (listeners).
    """
    if isinstance(model, RunnableRetry):
        msg = (
            f"{name} is wrapped in with_retry(); pass the chat model itself (retries are not "
            "allowed)"
        )
        raise InvalidRequestError(msg, field="llm")
    if isinstance(model, RunnableWithFallbacks):
        msg = f"{name} has fallbacks; pass one chat model (the answer must come from one call)"
        raise InvalidRequestError(msg, field="llm")
    if isinstance(model, RunnableBindingBase):
        if not isinstance(model, RunnableBinding) or model.config_factories:
            msg = f"{name} is a wrapped runnable; pass the chat model itself"
            raise InvalidRequestError(msg, field="llm")
        return True
    return False
