"""The reader's confidence: the probability of its decision, read from the output's tokens.

The ledger opens with the reader's decision (do the sources state the answer?). Where the
response carries token log-probabilities, the decision's token is found by its position in the
output: the token holding the first character of the decision's value. The probabilities of
the allowed values among that position's most likely tokens are summed per value and
renormalized over the allowed values; the confidence is the share of the first value (the one
that answers). No allowed value among them, no decision key, or no log-probabilities: ``None``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from evidence_first._model import TokenLogprob

__all__ = ["decision_confidence"]

# What may stand between the decision's key and the first character of its value, or open an
# alternative token at that position: JSON whitespace, the colon and a string's quote.
_STRUCTURAL = ' \t\r\n:"'


def decision_confidence(
    tokens: Sequence[TokenLogprob] | None, key: str, values: Sequence[str]
) -> float | None:
    """The renormalized probability of ``values[0]`` at the first token of ``key``'s value.

    Args:
        tokens: The output's tokens as the transport read them, or ``None``.
        key: The decision's key, the first of the ledger object.
        values: The decision's allowed values as they are written in JSON without quotes
            (``"yes"``, ``"no"``); their first characters differ.
    """
    if not tokens:
        return None
    text = "".join(token.token for token in tokens)
    found = re.search(r'\{\s*"' + re.escape(key) + r'"\s*:\s*"?', text)
    if found is None:
        return None
    start, position = found.end(), 0
    for token in tokens:
        if position + len(token.token) > start:
            return _share(token, token.token[: start - position], values)
        position += len(token.token)
    return None


def _share(token: TokenLogprob, prefix: str, values: Sequence[str]) -> float | None:
    """The first value's share of the allowed values' probability mass at ``token``."""
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
        if value is not None and math.isfinite(choice.logprob):
            mass[value] += math.exp(choice.logprob)
    total = sum(mass.values())
    return mass[values[0]] / total if total > 0 else None
