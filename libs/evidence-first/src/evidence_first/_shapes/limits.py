"""The contract's fixed limits on a request and on the ledger, in one place."""

from __future__ import annotations

__all__ = [
    "ANCHORED_QUOTE_CHARS",
    "LARGE_INPUT_CHARS",
    "MAX_ANCHOR_PATTERN_CHARS",
    "MAX_ANSWER_CHARS",
    "MAX_CITATIONS_PER_FACT",
    "MAX_CONTEXT_TOKENS",
    "MAX_ENUM_VALUES",
    "MAX_FACTS",
    "MAX_MISSING_ITEMS",
    "MAX_OUTPUT_TOKENS",
    "MAX_PASSAGES_PER_CITATION",
    "MAX_QUESTION_TOKENS",
    "MAX_QUESTION_UTF16_UNITS",
    "MAX_QUOTE_CHARS",
    "MAX_RESPONSE_CHARS",
    "MAX_SOURCES",
    "MAX_SOURCE_UTF16_UNITS",
    "MAX_TERM_CHARS",
    "MAX_TIMEOUT_SECONDS",
    "OUTPUT_TOKENS_PER_FACT",
]

# The request.
MAX_SOURCES = 64
MAX_SOURCE_UTF16_UNITS = 262_144
# The question is bounded, so the prompt stays bounded: first by size (cheap, before any
# counting), then by its estimated tokens, with the request's own token counter.
MAX_QUESTION_UTF16_UNITS = 262_144
MAX_QUESTION_TOKENS = 2048
# The largest allowance for the sources, the options' bound (a model's profile may cap it
# lower), and the longest wait for one call.
MAX_CONTEXT_TOKENS = 32_768
MAX_TIMEOUT_SECONDS = 300
# Past this much source text, async planning runs on a worker thread: cutting it into passages
# costs 4 to 8 ms at this size, and about 49 ms at 262,144 characters (one maximum-size source
# with a long whitespace run, benchmarks/scale.py's "d" rows).
LARGE_INPUT_CHARS = 32_768
# The largest output an answer may ask for and read: the upper bounds of the options
# max_output_tokens and max_response_chars (a model request made by hand gets these).
MAX_OUTPUT_TOKENS = 8192
MAX_RESPONSE_CHARS = 131_072

# The ledger: enforced by parsing, with their own reason codes.
MAX_FACTS = 32
MAX_CITATIONS_PER_FACT = 8

# Bounds that keep a schema-enforcing provider's output inside the output limit. They guide
# generation only: verification does not reject a long but exact quote.
MAX_QUOTE_CHARS = 1000
MAX_TERM_CHARS = 500
MAX_ANSWER_CHARS = 8000
MAX_MISSING_ITEMS = 16
# A fact rarely rests on more than a few passages, and adjacent ones merge into one span.
MAX_PASSAGES_PER_CITATION = 4
# Output tokens per allowed fact: the request schema's bounds follow the output limit, so a
# model that fills every list still fits in it (a citation costs twice this).
OUTPUT_TOKENS_PER_FACT = 128
# Providers cap enum sizes (OpenAI at a few hundred values); past this, IDs and passage
# labels are plain strings and verification alone catches an unknown one.
MAX_ENUM_VALUES = 256
# Quote mode pairs each source ID with a pattern of the quotes of that source's text (each
# sentence and clause start with every way on to the end of its line, up to
# ANCHORED_QUOTE_CHARS); past this many characters of patterns in all, the citation is one
# object with an enum of the IDs sent.
MAX_ANCHOR_PATTERN_CHARS = 262_144
# The longest quote those patterns allow. The embedded reader's quotes on the quality set run
# to 280 characters; the bound holds a pattern to about 15 times its source's prose.
ANCHORED_QUOTE_CHARS = 400
