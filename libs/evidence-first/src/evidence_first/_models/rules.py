"""The rule table: what each model family's documentation says its models accept.

Each :class:`ProfileRule` matches model names as :func:`model_key` reads them (a gateway's or
a cloud's wrapping removed, Bedrock's prefixes from the documented :data:`BEDROCK_PREFIXES`)
and sets the :class:`~evidence_first._models.profiles.ModelProfile` fields its ``source`` documents.
Every rule of a vendor that matches a name applies, in order. A name that no rule of its vendor
matches gets the vendor's cautious profile (:data:`CAUTIOUS`): nothing a current model of that
vendor is documented to refuse. A new model family is one rule here and its recorded request
body (CONTRIBUTING).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BEDROCK_PREFIXES",
    "CAUTIOUS",
    "FAMILY_VENDOR",
    "PROFILE_RULES",
    "ProfileRule",
    "Vendor",
]

Vendor = Literal["openai", "anthropic", "google", "mistral", "embedded"]
"""Whose models a rule describes; ``"embedded"``: the models :mod:`evidence_first.local` serves."""


@dataclass(frozen=True)
class ProfileRule:
    """One documented fact about the models whose names match ``pattern``.

    Attributes:
        name: A short name, shown in the profile it helps make.
        vendor: Whose models it describes.
        pattern: Matched (``re.search``) against the model's key.
        settings: The profile fields it sets.
        source: The documentation page it follows, with the words it rests on.
        example: A model name it matches: its request body is recorded under the rule's name
            (``tests/golden/requests/core-profiles.json``), and a test checks the match.
        left_out: For a cautious rule, what it leaves out, in words (its warning says so).
        floors_chosen_under: For a rule that sets the reader's floors, the prompt version each
            mode's floors were chosen, or last confirmed, under: a floor is a measurement of
            one prompt, and a test fails once the prompt moves and this does not.
    """

    name: str
    vendor: Vendor
    pattern: re.Pattern[str]
    settings: Mapping[str, Any]
    source: str
    example: str
    left_out: str = field(default="", compare=False)
    floors_chosen_under: Mapping[str, str] = field(default_factory=dict, compare=False)


# OpenAI's reasoning models (o-series, GPT-5 and later, fine-tunes of them). Reasoning tokens
# count against max_completion_tokens, and the guide recommends "reserving at least 25,000
# tokens for reasoning and outputs" when starting: the allowance keeps a default ledger limit
# from ending in finish reason "length" with no output.
_OPENAI_REASONING: dict[str, Any] = {
    "temperature": False,
    "logprobs": False,
    "output_limit": "max_completion_tokens",
    "output_allowance": 25_000,
}

# The embedded models' server: llama.cpp's own documentation of its HTTP API, which sends the
# chat completions options to OpenAI's; its source reads stream_options.include_usage and
# streams the usage chunk only when it is set.
_LLAMA_CPP_SERVER = (
    "github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md (json_schema as a "
    "grammar; n_probs before sampling; a stream's usage as OpenAI's), tools/server/"
    "server-task.cpp (stream_options.include_usage: the usage chunk only when set)"
)

PROFILE_RULES: tuple[ProfileRule, ...] = (
    # The embedded models (evidence_first.local), by the names they are served under, wherever
    # they are reached: LocalModel, or ChatOpenAI / OpenAILike / ChatCompletionsModel at its
    # base_url. llama.cpp turns the schema into a grammar (the full dialect for the reader; the
    # llguidance one, the full one written compact, for the tiny model) and returns the
    # log-probabilities taken before it.
    ProfileRule(
        "qwen2.5-coder-1.5b",
        "embedded",
        re.compile(r"^qwen2\.5-coder-1\.5b$"),
        {
            # The full dialect: through the llguidance grammar (its JSON laid out for it) the
            # reader wrote other ledgers, and got the demo's launch date wrong
            # (docs/local-reader.md, "Where the time goes").
            "dialect": "full",
            "logprobs": True,
            "stream_usage": True,
            # Its largest passage-mode prompt at the default allowance, read on 2 cores,
            # takes about two minutes; at the cap, the densest sources measured still fit
            # LocalModel's context (docs/local-reader.md, "The allowance and the context").
            "timeout": 300.0,
            "max_context_tokens": 8192,
            "citation_mode": "passage",
            # Chosen by benchmarks/reader_policies.py --choose on the tune runs (the project's
            # tune half, NQ-open's and ClapNQ's tune slices together, passage mode; quote mode
            # on the project's tune half alone), with the checks on by default
            # (unsupported_facts; uncovered_question is off): the most right answers at a
            # precision no lower than the old policy's (a floor of 0.78, uncovered questions
            # abstaining). An answer flagged unsupported_facts is held to the higher floor:
            # passage mode kept 29 of 73 answerable right against 24, at a precision of 29 in
            # 66 against 24 in 55 (44% both), and abstained on 25 of 36 unanswerable against
            # 29; quote mode 20 of 33 against 19, precision 80% against 76%.
            "confidence_floors": {"passage": 0.61, "quote": 0.73},
            "flagged_floors": {"passage": 0.84, "quote": 0.89},
            # Asked for a stance per citation (passage/11, quote/10), it wrote no
            # counter-citation on the report half's superseded and contradicted questions,
            # read a source's status as the stance of a fact's first citation, and kept fewer
            # right answers on the tune runs (25 of 73 against 29) and NQ-open's report slice
            # (33 of 100 against 38): it reads the prompts of before the key
            # (docs/benchmarks.md, "Stance per citation, on the reader").
            "writes_stance": False,
        },
        f"{_LLAMA_CPP_SERVER}; the floors: benchmarks/reader_policies.py over the stored "
        "benchmarks/quality.py runs (docs/benchmarks.md)",
        example="qwen2.5-coder-1.5b",
        floors_chosen_under={
            "passage": "evidence-first/passage/8",
            "quote": "evidence-first/quote/8",
        },
    ),
    ProfileRule(
        "gemma-3-270m",
        "embedded",
        re.compile(r"^gemma-3-270m$"),
        # The same server and context as the reader's: the same cap.
        {
            "dialect": "llguidance",
            "logprobs": True,
            "stream_usage": True,
            "max_context_tokens": 8192,
        },
        _LLAMA_CPP_SERVER,
        example="gemma-3-270m",
    ),
    ProfileRule(
        "openai-reasoning",
        "openai",
        re.compile(r"^(ft:)?(o\d|gpt-([5-9]|\d\d))"),
        _OPENAI_REASONING,
        "platform.openai.com/docs/guides/reasoning (reasoning models: no temperature, top_p or "
        "logprobs; reasoning tokens count against max_completion_tokens); API reference, "
        "chat/create max_tokens: 'deprecated in favor of max_completion_tokens, and is not "
        "compatible with o-series models'; GPT-6 (changelog 2026-09-03, latest-model guide): "
        "'When reasoning effort is not none, remove temperature, top_p, and top_logprobs'",
        example="gpt-5-2025-08-07",
    ),
    ProfileRule(
        "openai-chat",
        "openai",
        re.compile(r"^(ft:)?(gpt-4|gpt-3\.5|chatgpt-4o)"),
        {"logprobs": True},
        "platform.openai.com/docs/api-reference/chat/create (temperature 0 to 2; logprobs and "
        "top_logprobs up to 20)",
        example="gpt-4.1-mini",
    ),
    ProfileRule(
        "claude-prompt-only-json",
        "anthropic",
        re.compile(r"^claude-(instant|[23][.-]|(opus|sonnet)-4(-[01])?(-\d{8})?$)"),
        {"structured_output": False},
        "platform.claude.com/docs/en/build-with-claude/structured-outputs (structured outputs "
        "from the Claude 4.5 models on; an output_config elsewhere is an HTTP 400)",
        example="claude-opus-4-1-20250805",
    ),
    ProfileRule(
        "claude-sampling",
        "anthropic",
        re.compile(r"^claude-(instant|[23][.-]|(opus|sonnet|haiku)-4(-[0156])?(-\d{8})?$)"),
        {"temperature": True},
        "platform.claude.com/docs/en/api/messages (temperature 0 to 1) for the models before "
        "Claude Opus 4.7",
        example="claude-sonnet-4-5-20250929",
    ),
    ProfileRule(
        "claude-no-sampling",
        "anthropic",
        re.compile(r"^claude-(opus-4-[7-9]|opus-([5-9]|\d\d)|sonnet-5|haiku-5|fable-)"),
        {"temperature": False},
        "platform.claude.com/docs/en/about-claude/models/migration-guide (Claude Opus 4.7: "
        "'temperature, top_p, and top_k' removed; a request with them is an HTTP 400 "
        "'`temperature` is deprecated for this model'), and the models after it",
        example="claude-opus-4-7",
    ),
    ProfileRule(
        "gemini-3",
        "google",
        re.compile(r"^gemini-([3-9]|\d\d)"),
        {"temperature": False},
        "ai.google.dev/gemini-api/docs/gemini-3 (keep the default temperature of 1.0: a lower "
        "one can make Gemini 3 loop)",
        example="gemini-3-pro-preview",
    ),
    ProfileRule(
        "gemini-2",
        "google",
        re.compile(r"^gemini-[12]"),
        {},
        "ai.google.dev/api/generate-content#generationconfig (temperature 0 to 2)",
        example="gemini-2.5-flash",
    ),
    ProfileRule(
        "mistral",
        "mistral",
        re.compile(r"^(mistral|magistral|ministral|codestral|devstral|pixtral|open-mi)"),
        {},
        "docs.mistral.ai/api (chat completions: temperature, max_tokens, response_format)",
        example="mistral-large-latest",
    ),
)
"""Every rule, in the order they apply."""

CAUTIOUS: dict[Vendor, ProfileRule] = {
    # An OpenAI name no rule knows (a new model, an Azure deployment's name): as a reasoning
    # model, which refuses the most; every current OpenAI model takes max_completion_tokens.
    "openai": ProfileRule(
        "openai-cautious",
        "openai",
        re.compile(r"^(ft:)?(o\d|gpt-\d|chatgpt-|codex)"),
        {**_OPENAI_REASONING},
        "platform.openai.com/docs/guides/reasoning; the API reference's max_completion_tokens",
        example="codex-mini-latest",
        left_out="no temperature (the model's default), max_completion_tokens with room for "
        "reasoning, and no log-probabilities (so no reader confidence)",
    ),
    "anthropic": ProfileRule(
        "anthropic-cautious",
        "anthropic",
        re.compile(r"^claude"),
        {"temperature": False},
        "platform.claude.com/docs/en/about-claude/models/migration-guide",
        example="claude-nova-1",
        left_out="no temperature (the model's default)",
    ),
    "google": ProfileRule(
        "google-cautious",
        "google",
        re.compile(r"^gemini"),
        {"temperature": False},
        "ai.google.dev/gemini-api/docs/gemini-3",
        example="gemini-flash-latest",
        left_out="no temperature (the model's default)",
    ),
}
"""Each vendor's profile for a model name none of its rules knows."""

FAMILY_VENDOR: dict[str, Vendor] = {
    "openai": "openai",
    "azure-openai": "openai",
    "anthropic": "anthropic",
    "google": "google",
    "mistral": "mistral",
}
"""Whose models a provider family serves, for a name that does not say."""

BEDROCK_PREFIXES = ("global", "eu", "us", "us-gov", "apac", "jp", "au")
"""The geographies' prefixes of Amazon Bedrock's cross-Region inference profile IDs.

An ID is ``{geoRegion}.{modelId}`` (docs.aws.amazon.com/bedrock/latest/userguide/
inference-profiles-support.html: profiles "are named after the model that they support and
defined by the Regions that they support"); the geographies are those AWS's CDK names, GLOBAL,
EU, US, US_GOV, APAC, JP and AU (docs.aws.amazon.com/cdk/api/v2/docs/
@aws-cdk_aws-bedrock-alpha.CrossRegionInferenceProfileRegion.html). ``model_key`` strips one,
so the ID reads as its model's own name; a prefix outside the list leaves the name unread.
"""
_BEDROCK = re.compile(rf"^(?:(?:{'|'.join(map(re.escape, BEDROCK_PREFIXES))})\.)?anthropic\.")
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")
_CLAUDE_DOTTED = re.compile(r"(?<=\d)\.(?=\d)")


def model_key(name: object) -> str:
    """A model name as the rules read it: lower case, without a gateway or cloud's wrapping.

    ``openai/gpt-5`` and ``anthropic/claude-opus-4.7`` (OpenRouter, LiteLLM),
    ``us.anthropic.claude-opus-4-7-20260416-v1:0`` (Bedrock, behind any geography's prefix,
    ``us-gov.``, ``global.``..., of :data:`BEDROCK_PREFIXES`), ``claude-opus-4-7@20260416``
    (Vertex AI) and ``models/gemini-3-pro`` read as the model's own name; a dated version
    (``gpt-5-2025-08-07``) is kept, and the rules match it by its start.
    """
    key = str(name or "").strip().lower()
    key = key.split("@", 1)[0]
    if not key.startswith("ft:"):
        key = key.rsplit("/", 1)[-1]
    key = _BEDROCK_VERSION.sub("", _BEDROCK.sub("", key))
    if key.startswith("claude"):
        key = _CLAUDE_DOTTED.sub("-", key)  # OpenRouter writes claude-opus-4.7
    return key
