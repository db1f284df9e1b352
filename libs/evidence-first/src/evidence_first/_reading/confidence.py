"""The reader's confidence: the probability of its decision, read from the output's tokens.

The ledger opens with the reader's decision (do the sources state the answer?). Where the
response carries token log-probabilities, the decision's token is found by its position in the
content, after any leading ``<think>`` block: the tokens from there on must spell the ledger the
engine parsed (compared on its ASCII characters: providers write a token that is part of a
multi-byte character as its bytes), and the token holding the first character of the
decision's value is read. The probabilities of the allowed values among that position's most
likely tokens are summed per value and renormalized over the allowed values; the confidence is
the share of the first value (the one that answers).

Nothing else is taken on trust: tokens that spell another reply, or a decision other than the
ledger's, give no confidence; so do log-probabilities that cannot be a distribution's (one above
0 or not a number, alternatives listed twice, or summing past 1). No allowed value among them, no
decision key, or no log-probabilities: ``None``, and a floor holds the answer back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from evidence_first._reading.parsing import LEADING_THINK, ledger_body
from evidence_first._shapes.model import TokenChoice, TokenLogprob

__all__ = ["decision_confidence"]

# What may stand between the decision's key and the first character of its value, or open an
# alternative token at that position: JSON whitespace, the colon and a string's quote.
_STRUCTURAL = ' \t\r\n:"'
# What may stand between a leading think block and the ledger: whitespace, and the opening of
# one code fence (a server may strip the fence from the message's text, never from the tokens).
_BEFORE_LEDGER = re.compile(r"\s*(?:```[A-Za-z0-9_-]*[ \t]*\r?\n)?\s*")
# A token that is part of a multi-byte character, as llama.cpp ("byte: \xe6") and OpenAI
# ("bytes:\xe6\x97") write it: it spells no ASCII character.
_BYTE_TOKEN = re.compile(r"bytes?: ?(?:\\x[0-9a-fA-F]{2})+")
# Rounding in a provider's log-probabilities (to two decimals, say): alternatives may sum this far
# past 1.
_ROUNDING = 0.01


def decision_confidence(
    tokens: Sequence[TokenLogprob] | None, text: str, key: str, values: Sequence[str]
) -> float | None:
    """The renormalized probability of ``values[0]`` at the first token of ``key``'s value.

    Args:
        tokens: The output's tokens as the transport read them, or ``None``.
        text: The message's text, whose ledger (after any think block and code fence) opens
            with the decision.
        key: The decision's key, the first of the ledger object.
        values: The decision's allowed values as they are written in JSON without quotes
            (``"yes"``, ``"no"``); their first characters differ.
    """
    if not tokens:
        return None
    body = ledger_body(text)
    opened = re.match(r'\{\s*"' + re.escape(key) + r'"\s*:\s*"', body)
    if opened is None:
        return None
    joined = "".join(token.token for token in tokens)
    think = LEADING_THINK.match(joined)
    after_think = think.end() if think is not None else 0
    start = joined.find(body[: opened.end()], after_think)
    if start < 0 or not _BEFORE_LEDGER.fullmatch(joined, after_think, start):
        return None
    if not _ascii(joined[start:]).startswith(_ascii(body)):
        return None  # the tokens spell another reply than the ledger judged
    start += opened.end()
    position = 0
    for token in tokens:
        if position + len(token.token) > start:
            if not _is_logprob(token.logprob):
                return None
            return _share(token, token.token[: start - position], values)
        position += len(token.token)
    return None


def _ascii(text: str) -> str:
    return _BYTE_TOKEN.sub("", text).encode("ascii", "ignore").decode("ascii")


def _is_logprob(value: float) -> bool:
    # A probability's logarithm: at most 0, minus infinity included (NaN compares false).
    return value <= 0.0


def _is_distribution(top: Sequence[TokenChoice]) -> bool:
    """Whether ``top`` can be a distribution's likeliest tokens: each once, summing to 1 at most."""
    if not all(_is_logprob(choice.logprob) for choice in top):
        return False
    if len({choice.token for choice in top}) < len(top):
        return False
    return math.fsum(math.exp(choice.logprob) for choice in top) <= 1 + _ROUNDING


def _share(token: TokenLogprob, prefix: str, values: Sequence[str]) -> float | None:
    """The first value's share of the allowed values' probability mass at ``token``."""
    if not _is_distribution(token.top):
        return None
    mass = dict.fromkeys(values, 0.0)
    structural = not prefix.strip(_STRUCTURAL)
    for choice in token.top:
        if choice.token.startswith(prefix):
            rest = choice.token[len(prefix) :]
        elif structural:
            # The same place written with other whitespace or quotes: `"no` for ` "no`.
            rest = choice.token.lstrip(_STRUCTURAL)
        else:
            continue
        value = next(
            (v for v in values if rest and (v.startswith(rest) or rest.startswith(v))), None
        )
        if value is not None:
            mass[value] += math.exp(choice.logprob)
    total = sum(mass.values())
    return mass[values[0]] / total if total > 0 else None
