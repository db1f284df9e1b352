"""What the engine knows of a model: one frozen :class:`ModelProfile`, found by one rule table.

A profile holds what a request to the model may carry (a temperature, which output-limit
field, log-probabilities, native structured output and the schema dialect, the API surface)
and what pays for that model (the reader's confidence floors, the answer policies, the
citation mode). :func:`profile_for_name` finds it from the provider family a model is reached
through and the model's name, by the rules of :mod:`evidence_first._models.rules`, each
naming the documentation it follows. What a model refuses follows its name wherever it is
reached (a gateway, a proxy, a loopback server); only the schema dialect, whether
log-probabilities come back and whether a stream's usage is asked for depend on where it is
reached.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Literal, get_args

from evidence_first._models.dialects import DIALECTS, DialectName
from evidence_first._models.once import warn_once
from evidence_first._models.rules import (
    CAUTIOUS,
    FAMILY_VENDOR,
    PROFILE_RULES,
    Vendor,
    model_key,
)
from evidence_first._shapes.errors import InvalidRequestError, ModelProfileWarning
from evidence_first._shapes.limits import MAX_CONTEXT_TOKENS, MAX_TIMEOUT_SECONDS
from evidence_first._shapes.vocabulary import AnswerFlag, CitationMode, FlagPolicy

__all__ = [
    "DEFAULT_PROFILE",
    "ApiSurface",
    "ModelProfile",
    "OutputLimitField",
    "ProviderFamily",
    "family_for_url",
    "model_key",
    "profile_for",
    "profile_for_name",
    "profile_of",
]

ProviderFamily = Literal[
    "openai", "azure-openai", "anthropic", "google", "mistral", "ollama", "openai-compatible"
]
"""How a model is reached: OpenAI's own API, Azure OpenAI, Anthropic's Messages API, Gemini,
Mistral, Ollama, or any other OpenAI-compatible server (vLLM, llama.cpp, a gateway)."""

ApiSurface = Literal["chat-completions", "responses", "anthropic-messages", "gemini", "ollama"]
"""Where the schema travels: chat completions ``response_format``, the Responses API's
``text.format``, Anthropic's ``output_config.format``, Gemini's ``response_json_schema``,
Ollama's ``format``."""

OutputLimitField = Literal["max_tokens", "max_completion_tokens"]
"""The chat-completions field that carries the output limit."""

_FLAGS = frozenset(get_args(AnswerFlag))
_POLICIES = frozenset(get_args(FlagPolicy))
_MODES = frozenset(get_args(CitationMode))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelProfile:
    """Everything the engine needs to know of a model, in one frozen value.

    Build one to describe a model the rule table does not know (an Azure deployment whose name
    says nothing of its model, a fine-tune behind a gateway), or take a known model's
    (:func:`~evidence_first.profile_for`) and :meth:`replace` what differs. The caller's own
    explicit options still win over its answering defaults.

    Attributes:
        name: What the profile describes: the rules that made it, or the caller's own name.
        sources: The documentation its settings follow.
        dialect: The JSON Schema dialect the schema is written in
            (:data:`~evidence_first.adapters.DIALECTS`); ``None``: the schema as built is
            the request's, and no dialect's limits are checked.
        structured_output: Whether the schema is sent in the provider's native field;
            ``False``: JSON is asked for in the prompt only.
        temperature: Whether sampling settings other than the model's defaults are accepted;
            when not, no temperature is sent (``ModelRequest.temperature`` is ``None``), and
            the integrations leave out a ``top_p`` or ``top_k`` the caller's model sets.
        output_limit: The chat-completions field that carries the output limit.
        output_allowance: Output tokens allowed on top of the ledger's ``max_output_tokens``
            for what the model writes before it (a reasoning model's reasoning tokens count
            against the same limit).
        logprobs: Whether token log-probabilities come back when asked, so the engine asks
            for them and reads the reader's confidence.
        stream_usage: Whether a streamed request asks for its token usage
            (``stream_options: {"include_usage": true}``), which the server then sends in a
            last chunk; ``False``: nothing is asked, and a server that sends usage anyway is
            still read.
        api: The API surface the call goes through.
        confidence_floors: The floor for the reader's confidence by citation mode, used when
            the caller leaves ``min_reader_confidence`` unset (``None``: no floor).
        flagged_floors: A higher floor, by citation mode, for an answer that carries an answer
            flag (its checks only flag): where a check's flag and a low confidence agree, the
            answer abstains. Used, like ``confidence_floors``, when the caller leaves
            ``min_reader_confidence`` unset.
        policies: Each answer flag's policy (``"off"``, ``"flag"`` or ``"abstain"``) where it
            differs from the engine's default, used when the caller leaves that option unset.
        citation_mode: The citation mode used when the caller leaves ``citation_mode`` unset
            (``None``: the engine's default).
        timeout: The timeout, in seconds, used when the caller leaves ``timeout`` unset
            (``None``: the engine's default).
        max_context_tokens: The largest ``max_context_tokens`` a request to it may ask, so
            that the prompt the sources make in either citation mode, and the output, fit its
            context (``None``: the options' own bound); a larger one is an
            :class:`~evidence_first.InvalidRequestError` naming the field and the cap.
        cautious: Whether it is a known provider's cautious profile for a model name the
            rules do not know: nothing a current model of that provider refuses is sent.
        writes_stance: Whether the model is asked for a stance per citation; ``False``: it
            reads the prompt and schema of before the key (``quote/8``, ``passage/8``), and
            every citation it writes supports its fact.
    """

    name: str = "default"
    sources: tuple[str, ...] = ()
    dialect: DialectName | None = None
    structured_output: bool = True
    temperature: bool = True
    output_limit: OutputLimitField = "max_tokens"
    output_allowance: int = 0
    logprobs: bool = False
    stream_usage: bool = False
    api: ApiSurface = "chat-completions"
    confidence_floors: Mapping[CitationMode, float | None] = dataclasses.field(default_factory=dict)
    flagged_floors: Mapping[CitationMode, float | None] = dataclasses.field(default_factory=dict)
    policies: Mapping[AnswerFlag, FlagPolicy] = dataclasses.field(default_factory=dict)
    citation_mode: CitationMode | None = None
    timeout: float | None = None
    max_context_tokens: int | None = None
    cautious: bool = False
    writes_stance: bool = True

    def __post_init__(self) -> None:
        _check_profile(self)
        # Frozen all the way down: a profile is shared by every request of its model.
        for name in ("confidence_floors", "flagged_floors"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "policies", MappingProxyType(dict(self.policies)))
        object.__setattr__(self, "sources", tuple(self.sources))

    def replace(self, **changes: Any) -> ModelProfile:
        """A copy with ``changes`` applied, checked like construction."""
        return dataclasses.replace(self, **changes)

    @property
    def reads_patterns(self) -> bool:
        """Whether its provider reads a string's ``pattern`` (the ``full`` dialect)."""
        return self.dialect is not None and DIALECTS[self.dialect].reads_patterns

    def output_tokens(self, max_tokens: int) -> int:
        """The output limit to send for a ledger of at most ``max_tokens`` tokens."""
        return max_tokens + self.output_allowance

    def option_defaults(self) -> dict[str, Any]:
        """The answering options this profile sets where the caller sets none."""
        defaults: dict[str, Any] = {str(flag): policy for flag, policy in self.policies.items()}
        if self.citation_mode is not None:
            defaults["citation_mode"] = self.citation_mode
        if self.timeout is not None:
            defaults["timeout"] = self.timeout
        return defaults

    def check_allowance(self, max_context_tokens: int) -> None:
        """Refuse an allowance for the sources above this model's cap.

        Raises:
            InvalidRequestError: ``max_context_tokens`` is above :attr:`max_context_tokens`.
        """
        cap = self.max_context_tokens
        if cap is not None and max_context_tokens > cap:
            msg = (
                f"max_context_tokens must be at most {cap} for this model (its profile's cap, "
                f"so that the prompt and the output fit its context), got {max_context_tokens}"
            )
            raise InvalidRequestError(msg, field="max_context_tokens")


def _check_profile(profile: ModelProfile) -> None:
    for field, expected, valid in _field_checks(profile):
        if not valid:
            msg = f"ModelProfile.{field} must be {expected}"
            raise InvalidRequestError(msg, field=f"profile.{field}")


def _field_checks(profile: ModelProfile) -> Iterator[tuple[str, str, bool]]:
    """Each field, what it must be and whether it is, checked in order as it is reached."""
    dialect, allowance, policies = profile.dialect, profile.output_allowance, profile.policies
    yield "dialect", f"None or one of {', '.join(DIALECTS)}", dialect is None or dialect in DIALECTS
    for name in ("structured_output", "temperature", "logprobs", "stream_usage", "cautious"):
        yield name, "a bool", isinstance(getattr(profile, name), bool)
    limits = get_args(OutputLimitField)
    yield "output_limit", "max_tokens or max_completion_tokens", profile.output_limit in limits
    valid = isinstance(allowance, int) and not isinstance(allowance, bool) and allowance >= 0
    yield "output_allowance", "a non-negative int", valid
    yield "api", f"one of {', '.join(get_args(ApiSurface))}", profile.api in get_args(ApiSurface)
    for name in ("confidence_floors", "flagged_floors"):
        floors = getattr(profile, name)
        valid = isinstance(floors, Mapping) and all(map(_is_floor, floors, floors.values()))
        yield name, "a mapping of citation modes to None or a float from 0 to 1", valid
    valid = isinstance(policies, Mapping) and all(
        flag in _FLAGS and policy in _POLICIES for flag, policy in policies.items()
    )
    yield "policies", "a mapping of answer flags to 'off', 'flag' or 'abstain'", valid
    mode = profile.citation_mode
    yield "citation_mode", "None, 'quote' or 'passage'", mode is None or mode in _MODES
    timeout, cap = profile.timeout, profile.max_context_tokens
    seconds = f"None or a number of seconds above 0 and at most {MAX_TIMEOUT_SECONDS}"
    yield "timeout", seconds, timeout is None or _is_seconds(timeout)
    tokens = f"None or an int from 1 to {MAX_CONTEXT_TOKENS}"
    yield "max_context_tokens", tokens, cap is None or _is_allowance(cap)


def _is_seconds(value: object) -> bool:
    """A timeout the options accept: a number in ``(0, 300]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return 0 < value <= MAX_TIMEOUT_SECONDS


def _is_allowance(value: object) -> bool:
    """An allowance the options accept: an int in ``1..32,768``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return 1 <= value <= MAX_CONTEXT_TOKENS


def _is_floor(mode: object, floor: object) -> bool:
    return mode in _MODES and (floor is None or (isinstance(floor, float) and 0 <= floor <= 1))


DEFAULT_PROFILE = ModelProfile()
"""A model nothing is known of: temperature 0, ``max_tokens``, no log-probabilities, the
schema as built, and the engine's own answering defaults."""

# A family's dialect where no rule sets one (an Anthropic model without structured outputs has
# none: _family_dialect).
_FAMILY_DIALECT: dict[ProviderFamily, DialectName] = {
    "openai": "openai",
    "azure-openai": "azure-openai",
    "anthropic": "anthropic",
    "google": "gemini-json",
    "mistral": "openai",
    "ollama": "full",
    "openai-compatible": "json-schema",
}
_FAMILY_API: dict[ProviderFamily, ApiSurface] = {
    "anthropic": "anthropic-messages",
    "google": "gemini",
    "ollama": "ollama",
}
# Where log-probabilities are asked for when a model's rule says it returns them: OpenAI's
# and Azure OpenAI's chat completions; a server a rule names (the embedded reader's llama.cpp)
# sets its own dialect and keeps them anywhere.
_LOGPROB_FAMILIES = frozenset({"openai", "azure-openai"})
# Where a streamed request asks for its usage: OpenAI's own API, for every chat model
# (platform.openai.com/docs/api-reference/chat/create, stream_options.include_usage: "an
# additional chunk will be streamed before the data: [DONE] message" holding the usage; without
# it a stream carries none). Not Azure OpenAI's: its API versions before 2024-08-01-preview
# refuse `stream_options` as an unrecognized argument (github.com/openai/openai-python/issues/
# 1469), and a deployment's version is not known here; nor any other host, cautiously. A server
# a rule names (the embedded models' llama.cpp) sets its own and keeps it anywhere.
_STREAM_USAGE_FAMILIES = frozenset({"openai"})

_VENDOR_NAMES: dict[Vendor, str] = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "google": "Gemini",
    "mistral": "Mistral",
    "embedded": "embedded",
}


def family_for_url(base_url: object) -> ProviderFamily:
    """The family of an OpenAI-compatible API root: OpenAI's (``None`` too), Azure's, or another.

    Azure OpenAI is reached at ``<resource>.openai.azure.com``, and under ``/openai`` at an
    Azure AI Foundry resource's ``<resource>.cognitiveservices.azure.com`` (the endpoint the
    Foundry portal shows for a deployment); the same host's other paths serve other APIs.
    """
    if base_url is None or str(base_url) == "":
        return "openai"
    parts = urllib.parse.urlsplit(str(base_url))
    host = (parts.hostname or "").lower()
    if host == "api.openai.com":
        return "openai"
    if host.endswith(".openai.azure.com"):
        return "azure-openai"
    if host.endswith(".cognitiveservices.azure.com") and (
        parts.path.rstrip("/") == "/openai" or parts.path.startswith("/openai/")
    ):
        return "azure-openai"
    return "openai-compatible"


def profile_for_name(
    name: object, family: ProviderFamily | None = None, *, warn: bool = True
) -> ModelProfile:
    """The profile of the model ``name`` reached through ``family``, by the rule table.

    The model's vendor comes from its name (``claude-...``, ``gpt-...``, ``gemini-...``, the
    embedded reader's names) or else from the family. Every rule of that vendor matching the
    name applies, in order. A name none of them knows gets its vendor's cautious profile
    (nothing a current model of that vendor refuses), with one :class:`ModelProfileWarning`
    saying what was left out. The family then sets the dialect, the API surface and whether
    log-probabilities are asked for, where no rule did.

    Args:
        name: The model's name as the caller wrote it.
        family: How the model is reached; ``None``: a caller's own model.
        warn: Whether an unknown name of a known vendor warns (once per family and name).
    """
    key = model_key(name)
    matched = [rule for rule in PROFILE_RULES if rule.pattern.search(key)]
    vendor = matched[0].vendor if matched else _vendor_by_name(key, family)
    cautious = CAUTIOUS.get(vendor) if vendor is not None and not matched else None
    if cautious is not None and warn:
        _warn_unknown(name, family, cautious.vendor)
    applied = matched if cautious is None else [cautious]
    settings: dict[str, Any] = {
        field: value for rule in applied for field, value in rule.settings.items()
    }
    if cautious is not None:
        settings["cautious"] = True
    _reached_through(family, key, settings)
    names = " + ".join(rule.name for rule in applied) or "default"
    return ModelProfile(name=names, sources=tuple(rule.source for rule in applied), **settings)


def _reached_through(family: ProviderFamily | None, key: str, settings: dict[str, Any]) -> None:
    """Set what ``family`` decides where no rule did: the API, the dialect, the extras asked.

    The extras: log-probabilities, and a streamed request's usage.
    """
    names_dialect = "dialect" in settings
    if family is not None:
        settings.setdefault("api", _FAMILY_API.get(family, "chat-completions"))
        if not names_dialect:
            settings["dialect"] = _family_dialect(family, key, settings)
            if family not in _LOGPROB_FAMILIES:
                settings["logprobs"] = False
            settings["stream_usage"] = family in _STREAM_USAGE_FAMILIES
    elif not names_dialect:
        settings["logprobs"] = False  # a caller's own model declares its own


def _vendor_by_name(key: str, family: ProviderFamily | None) -> Vendor | None:
    """The vendor of a name no rule matches: its cautious rule's, else its family's."""
    for rule in CAUTIOUS.values():
        if rule.pattern.search(key):
            return rule.vendor
    return FAMILY_VENDOR.get(family) if family is not None else None


def _family_dialect(
    family: ProviderFamily, key: str, settings: Mapping[str, Any]
) -> DialectName | None:
    if family == "anthropic" and settings.get("structured_output") is False:
        return None
    if family == "openai" and key.startswith("ft:"):
        return "openai-fine-tuned"
    return _FAMILY_DIALECT[family]


def _warn_unknown(name: object, family: ProviderFamily | None, vendor: Vendor) -> None:
    rule = CAUTIOUS[vendor]
    who = _VENDOR_NAMES[vendor]
    where = (
        " (an Azure deployment's name says nothing of its model)"
        if family == "azure-openai"
        else ""
    )
    msg = (
        f"evidence-first has no rule for the {who} model {str(name)!r}{where}, so it sends only "
        f"what every current {who} model accepts: {rule.left_out}. To send more, give its "
        "profile: profile='<a model name the rules know>' or a ModelProfile "
        "(docs/providers.md)."
    )
    warn_once(("profile", family, model_key(name)), msg, stacklevel=4, category=ModelProfileWarning)


def profile_of(value: object, family: ProviderFamily | None = None) -> ModelProfile | None:
    """A caller's ``profile=``: a :class:`ModelProfile`, a model name to read as, or ``None``.

    Raises:
        InvalidRequestError: ``value`` is of another type (``field="profile"``).
    """
    if value is None or isinstance(value, ModelProfile):
        return value
    if isinstance(value, str) and value.strip():
        return profile_for_name(value, family)
    msg = "profile must be a ModelProfile or a model name the rules know, such as 'gpt-5'"
    raise InvalidRequestError(msg, field="profile")


def profile_for(model: object) -> ModelProfile:
    """The profile the engine plans ``model``'s requests by: what it declares.

    A model declares its profile with a ``profile`` attribute: a
    :class:`~evidence_first.ModelProfile`, or the name of a model the rules know (read as a
    caller's own model, which the rules give no dialect). Three shorthand attributes, read
    over it, declare one field each: ``dialect`` (one of
    :data:`~evidence_first.adapters.DIALECTS`; any other value declares none),
    ``returns_logprobs`` (``True`` or ``False``) and ``confidence_floors`` (a mapping of
    citation modes to floors). A model that declares nothing gets the default profile:
    temperature 0, no log-probabilities, the schema as built.

    The transports and integrations declare the profile of the model they call
    (``ChatCompletionsModel``, ``LocalModel``, an ``EvidenceAnswerer``'s or
    ``EvidenceSynthesizer``'s chat model): ``profile_for(ChatCompletionsModel(...))`` shows
    what a request to it will carry.

    Raises:
        InvalidRequestError: A declaration is of the wrong type (``field="model"``).
    """
    try:
        profile = profile_of(getattr(model, "profile", None)) or DEFAULT_PROFILE
    except InvalidRequestError:
        msg = "model.profile must be a ModelProfile or a model name the rules know"
        raise InvalidRequestError(msg, field="model") from None
    changes: dict[str, Any] = {}
    name = getattr(model, "dialect", None)
    if isinstance(name, str) and name in DIALECTS:
        changes["dialect"] = name
    logprobs = getattr(model, "returns_logprobs", None)
    if isinstance(logprobs, bool):
        changes["logprobs"] = logprobs
    floors = getattr(model, "confidence_floors", None)
    if floors:
        changes["confidence_floors"] = floors
    if not changes:
        return profile
    try:
        return profile.replace(**changes)
    except InvalidRequestError:
        msg = "model.confidence_floors must map citation modes to None or a float from 0 to 1"
        raise InvalidRequestError(msg, field="model") from None
