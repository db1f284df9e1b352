"""Property tests: whatever ledger or raw text the model returns, the contract holds.

Every returned citation quotes a sent source exactly at its three spans, first occurrence;
statuses are consistent with their fields; hostile output never raises and fails closed with a
known reason code; and no validation detail echoes evidence or model output.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evidence_first import (
    AnswerStatus,
    Citation,
    Evidence,
    EvidenceAnswer,
    KnowledgePolicy,
    ModelRequest,
    ModelResponse,
    ReasonCode,
    TokenUsage,
    answer_from_evidence,
)
from evidence_first._shapes.unicode import has_text

REASON_CODES = frozenset(get_args(ReasonCode))
STATUSES = frozenset(get_args(AnswerStatus))
POLICIES: tuple[KnowledgePolicy, ...] = get_args(KnowledgePolicy)
QUESTION = "What does the evidence say?"

# Each pipeline example costs a few milliseconds, mostly in generating it; these counts keep
# the whole file well under 30 s on two cores.
PROPERTY_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HOSTILE_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=200)

# Valid Unicode only: a lone surrogate in a source is an InvalidRequestError (tested elsewhere).
CHARS = st.characters(exclude_categories=("Cs",))
# Fragments that make offsets and matching hard: astral emoji and ZWJ sequences (two UTF-16
# units, four UTF-8 bytes), CJK, combining marks, characters whose case mapping or
# normalization changes their length, invisible characters, and regex / format metacharacters.
TRICKY_FRAGMENTS = (
    "🚀",
    "👍🏽",
    "👨‍👩‍👧",
    "𝔘",
    "发射日期：六月十五日。",
    "漢字",
    "e\u0301",
    "\u00e9",
    "A\u030a",
    "\u212b",
    "\ufb01",
    "\u00df",
    "\u0130",
    "\u2126",
    "\u200b",
    "\ufeff",
    "\x00",
    "(",
    ")",
    "+",
    "*",
    "\\",
    "%",
    ".",
    "?",
    "[a-z]",
    "{2}",
    "^$|",
    "\\d+",
    "%s%%",
    "a+b*c",
    "50% (approx. $2k)",
    "\n",
    "\r\n",
    "\t",
    " ",
    '"',
    "'",
    "</think>",
    "```",
    "The launch moved to June 15.",
)


class FixedModel:
    """A sync reader model that returns one prepared response and counts its calls."""

    def __init__(self, response: ModelResponse | str) -> None:
        self.response = response
        self.calls = 0

    def generate(self, request: ModelRequest) -> ModelResponse | str:
        self.calls += 1
        return self.response


# --- Strategies ----------------------------------------------------------------------------

fragments = st.one_of(st.sampled_from(TRICKY_FRAGMENTS), st.text(alphabet=CHARS, max_size=8))
plain_texts = st.lists(fragments, min_size=1, max_size=5).map("".join)
# Repeated passages make the first-occurrence rule observable.
source_texts = st.one_of(
    plain_texts,
    plain_texts.map(lambda text: text + text),
    st.tuples(plain_texts, plain_texts).map(lambda pair: pair[0] + pair[1] + pair[0]),
)
source_ids = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
    st.text(alphabet=CHARS, min_size=1, max_size=6),
)


def _different_char(char: str, replacement: str) -> str:
    if replacement != char:
        return replacement
    code = ord(char) + 1
    if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        code = ord("a") if char != "a" else ord("b")
    return chr(code)


@st.composite
def excerpts(draw: st.DrawFn, text: str) -> str:
    """A non-empty substring of ``text`` at a random offset (or ``text`` itself when blank)."""
    if not text:
        return text
    start = draw(st.integers(0, len(text) - 1))
    end = draw(st.integers(start + 1, len(text)))
    return text[start:end]


@st.composite
def near_misses(draw: st.DrawFn, text: str, texts: list[str]) -> str:
    """A quote one edit away from an excerpt of ``text``, or one that spans two sources."""
    quote = draw(excerpts(text))
    kind = draw(
        st.sampled_from(
            ["replace", "insert", "delete", "case", "nfd", "nfc", "nfkc", "span", "pad"]
        )
    )
    if kind == "replace" and quote:
        index = draw(st.integers(0, len(quote) - 1))
        char = _different_char(quote[index], draw(CHARS))
        return quote[:index] + char + quote[index + 1 :]
    if kind == "insert":
        index = draw(st.integers(0, len(quote)))
        return quote[:index] + draw(CHARS) + quote[index:]
    if kind == "delete" and quote:
        index = draw(st.integers(0, len(quote) - 1))
        return quote[:index] + quote[index + 1 :]
    if kind == "case":
        return draw(st.sampled_from([quote.swapcase(), quote.upper(), quote.lower()]))
    if kind in {"nfd", "nfc", "nfkc"}:
        return unicodedata.normalize(kind.upper(), quote)
    if kind == "span":
        first, second = draw(st.sampled_from(texts)), draw(st.sampled_from(texts))
        tail = first[draw(st.integers(0, len(first))) :]
        head = second[: draw(st.integers(0, len(second)))]
        return tail + draw(st.sampled_from(["", " ", "\n"])) + head
    return " " + quote + " "


@st.composite
def citations(draw: st.DrawFn, texts: list[str], ids: list[str], ghost: str) -> dict[str, str]:
    """A citation naming an offered (sent or omitted) or never-supplied source."""
    source_id = draw(st.one_of(st.sampled_from(ids), st.just(ghost)))
    own = texts[ids.index(source_id)] if source_id in ids else draw(st.sampled_from(texts))
    kind = draw(st.sampled_from(["exact", "exact", "near", "near", "other", "unrelated", "blank"]))
    if kind == "exact":  # an excerpt of the cited source
        quote = draw(excerpts(own))
    elif kind == "near":
        quote = draw(near_misses(own, texts))
    elif kind == "other":  # an excerpt of any offered source
        quote = draw(excerpts(draw(st.sampled_from(texts))))
    elif kind == "blank":
        quote = draw(st.sampled_from(["", " ", "\n\t"]))
    else:
        quote = draw(st.text(alphabet=CHARS, max_size=20))
    stance = draw(st.sampled_from([None, None, "supports", "contradicts"]))
    return {"source_id": source_id, "quote": quote} | ({} if stance is None else {"stance": stance})


@st.composite
def ledger_facts(
    draw: st.DrawFn, texts: list[str], ids: list[str], ghost: str
) -> list[dict[str, Any]]:
    terms = st.text(alphabet=CHARS, max_size=10)
    return draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "subject": terms,
                    "relation": terms,
                    "object": terms,
                    "citations": st.lists(citations(texts, ids, ghost), min_size=1, max_size=3),
                }
            ),
            max_size=4,
        )
    )


optional_texts = st.one_of(
    st.none(), st.sampled_from(["", "  "]), st.text(alphabet=CHARS, min_size=1, max_size=20)
)


@st.composite
def ledgers(
    draw: st.DrawFn, texts: list[str], ids: list[str], ghost: str, *, consistent: bool = False
) -> dict[str, Any]:
    """A ledger with random facts; ``consistent`` biases it towards passing stage 5."""
    facts = draw(ledger_facts(texts, ids, ghost))
    if consistent and draw(st.booleans()):
        return {"facts": facts, "answer": "yes", "inference": None, "missing_evidence": []}
    return {
        "facts": facts,
        "answer": draw(optional_texts),
        "inference": draw(optional_texts),
        "missing_evidence": draw(st.lists(st.text(alphabet=CHARS, max_size=10), max_size=2)),
    }


def _serialize(draw: st.DrawFn, ledger: dict[str, Any]) -> str:
    text = json.dumps(ledger, ensure_ascii=draw(st.booleans()))
    wrapper = draw(st.sampled_from(["none", "none", "fence", "bare-fence", "think"]))
    if wrapper == "fence":
        return f"```json\n{text}\n```"
    if wrapper == "bare-fence":
        return f"```\n{text}\n```"
    if wrapper == "think":
        return f"<think>{draw(st.text(alphabet=CHARS, max_size=20))}</think>\n{text}"
    return text


def _cost(evidence: Evidence) -> int:
    """The packing cost of a source under ``token_counter=len`` (serialized form + separator)."""
    item = {"id": evidence.id, "text": evidence.text}
    return len(json.dumps(item, ensure_ascii=False)) + 2


def _likely_sent(sources: list[Evidence], budget: int | None) -> list[Evidence]:
    """The sources packing should send; only used to aim citations, never asserted on."""
    sent, used = [], 0
    for source in sources:
        if not has_text(source.text):
            continue
        if budget is not None:
            if used + _cost(source) > budget:
                continue
            used += _cost(source)
        sent.append(source)
    return sent


@st.composite
def clean_ledgers(
    draw: st.DrawFn,
    sent: list[Evidence],
    knowledge: KnowledgePolicy,
    *,
    unsent: list[Evidence] | None = None,
    ghost: str = "ghost",
) -> dict[str, Any]:
    """A consistent ledger whose every quote is an exact, non-blank excerpt of its source.

    Sometimes one citation is tainted, so that only it should fail: a near miss of its source,
    an excerpt of a source that was offered but not sent, or a sent excerpt under an ID that
    was never supplied.
    """

    @st.composite
    def own_citation(draw: st.DrawFn) -> dict[str, str]:
        source = draw(st.sampled_from(sent))
        quote = draw(excerpts(source.text))
        return {"source_id": source.id, "quote": quote if has_text(quote) else source.text}

    terms = st.text(alphabet=CHARS, max_size=10)
    facts = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "subject": terms,
                    "relation": terms,
                    "object": terms,
                    "citations": st.lists(own_citation(), min_size=1, max_size=3),
                }
            ),
            min_size=1,
            max_size=4,
        )
    )
    taint = draw(st.sampled_from(["none", "none", "near", "unsent", "ghost"]))
    fact = draw(st.sampled_from(facts))
    index = draw(st.integers(0, len(fact["citations"]) - 1))
    citation = fact["citations"][index]
    if taint == "near":
        text = next(source.text for source in sent if source.id == citation["source_id"])
        citation["quote"] = draw(near_misses(text, [source.text for source in sent]))
    elif taint == "unsent" and unsent:  # None or empty: nothing was left out
        source = draw(st.sampled_from(unsent))
        citation.update(source_id=source.id, quote=draw(excerpts(source.text)) or "x")
    elif taint == "ghost":
        citation["source_id"] = ghost
    if draw(st.booleans()):
        inference = None
        if knowledge == "allow-general-inference":
            inference = draw(optional_texts)
        answer = draw(st.text(alphabet=CHARS, max_size=10).map(lambda text: "A: " + text))
        return {"facts": facts, "answer": answer, "inference": inference, "missing_evidence": []}
    missing = draw(st.lists(st.text(alphabet=CHARS, max_size=10), min_size=1, max_size=2))
    answer = draw(st.sampled_from([None, "", " "]))
    return {"facts": facts, "answer": answer, "inference": None, "missing_evidence": missing}


@st.composite
def scenarios(draw: st.DrawFn, compress: bool = False) -> dict[str, Any]:
    """Sources (some over budget), a never-supplied ID, and a model returning a ledger.

    ``compress``: sources over budget are sent as their kept passages, under an allowance
    that may fit none whole. Half the ledgers are clean (every quote an excerpt of a sent
    source), so citations are returned; the others mix exact, near-miss, unrelated and blank
    quotes naming sent, omitted and never-supplied sources.
    """
    count = draw(st.integers(1, 4))
    ids = draw(st.lists(source_ids, min_size=count, max_size=count, unique=True))
    if compress:
        # Texts of several passages each, of which some can be kept and some left out.
        lines = st.lists(source_texts, min_size=2, max_size=5).map("\n".join)
        texts = draw(st.lists(lines, min_size=count, max_size=count))
    else:
        texts = draw(st.lists(source_texts, min_size=count, max_size=count))
    sources = [Evidence(id=i, text=t) for i, t in zip(ids, texts, strict=True)]
    ghost = "ghost"
    while ghost in ids:
        ghost += "'"
    knowledge = draw(st.sampled_from(POLICIES))
    options: dict[str, Any] = {"knowledge": knowledge}
    budget = None
    if compress or draw(st.booleans()):
        # Count tokens as characters, with an allowance that fits at least one source whole,
        # or, compressed, perhaps none.
        costs = [_cost(source) for source in sources]
        low, high = (max(1, min(costs) // 4), max(costs)) if compress else (min(costs), sum(costs))
        budget = draw(st.integers(low, high))
        options["token_counter"] = len
        options["max_context_tokens"] = budget
    if compress:
        options["compress"] = True
        if draw(st.booleans()):
            # Random texts seldom share a word with the question (BM25 sends none of them);
            # any embedder ranks every passage.
            options["embedder"] = _lengths
    sent = _likely_sent(sources, budget)
    if sent and draw(st.booleans()):
        unsent = [source for source in sources if source not in sent]
        ledger = draw(clean_ledgers(sent, knowledge, unsent=unsent, ghost=ghost))
    else:
        ledger = draw(ledgers(texts, ids, ghost, consistent=True))
    return {
        "sources": sources,
        "ghost": ghost,
        "ledger": ledger,
        "response": _serialize(draw, ledger),
        "options": options,
    }


# Hostile raw text.

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**30, max_value=10**40)
    | st.floats()
    | st.text(alphabet=CHARS, max_size=10)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet=CHARS, max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
HOSTILE_SOURCES = (
    Evidence(id="notes", text="The launch moved to June 15. Ravi owns it. 🚀 发射"),
    Evidence(id="budget", text="Spend is 50% (approx. $2k) of plan; a+b*c holds."),
)
LEDGER_KEYS = ("facts", "answer", "inference", "missing_evidence")


@st.composite
def valid_ledger_text(draw: st.DrawFn) -> str:
    texts = [source.text for source in HOSTILE_SOURCES]
    ids = [source.id for source in HOSTILE_SOURCES]
    ledger = draw(
        st.one_of(
            clean_ledgers(list(HOSTILE_SOURCES), "evidence-only"),
            ledgers(texts, ids, "ghost", consistent=True),
        )
    )
    return json.dumps(ledger, ensure_ascii=draw(st.booleans()))


@st.composite
def truncated_ledgers(draw: st.DrawFn) -> str:
    text = draw(valid_ledger_text())
    return text[: draw(st.integers(0, max(0, len(text) - 1)))]


@st.composite
def wrongly_typed_ledgers(draw: st.DrawFn) -> str:
    texts = [source.text for source in HOSTILE_SOURCES]
    ids = [source.id for source in HOSTILE_SOURCES]
    ledger = draw(ledgers(texts, ids, "ghost", consistent=True))
    key = draw(st.sampled_from(LEDGER_KEYS))
    value = draw(json_values)
    where = draw(st.sampled_from(["top", "fact", "citation", "extra", "drop"]))
    facts = ledger["facts"]
    if where == "fact" and facts:
        facts[0][draw(st.sampled_from(["subject", "citations", "object"]))] = value
    elif where == "citation" and facts:
        facts[0]["citations"][0][draw(st.sampled_from(["source_id", "quote"]))] = value
    elif where == "extra":
        ledger[draw(st.text(alphabet=CHARS, min_size=1, max_size=8))] = value
    elif where == "drop":
        del ledger[key]
    else:
        ledger[key] = value
    return json.dumps(ledger, ensure_ascii=draw(st.booleans()))


@st.composite
def deeply_nested(draw: st.DrawFn) -> str:
    depth = draw(st.integers(1, 4000))
    shape = draw(st.sampled_from(["list", "object", "unclosed", "in-facts", "in-answer"]))
    if shape == "list":
        return "[" * depth + "]" * depth
    if shape == "object":
        return '{"a":' * depth + "1" + "}" * depth
    if shape == "unclosed":
        return "[" * depth
    nested = "[" * depth + "]" * depth
    if shape == "in-facts":
        return f'{{"facts": {nested}, "answer": null, "inference": null, "missing_evidence": []}}'
    return f'{{"facts": [], "answer": {nested}, "inference": null, "missing_evidence": ["x"]}}'


@st.composite
def huge_numbers(draw: st.DrawFn) -> str:
    number = draw(
        st.one_of(
            st.integers(4000, 6000).map(lambda digits: "9" * digits),
            st.sampled_from(["1e400", "-1e999", "1e-400", "123456789" * 40 + ".5e99999"]),
        )
    )
    key = draw(st.sampled_from(LEDGER_KEYS))
    if draw(st.booleans()):
        return number
    ledger: dict[str, Any] = {"facts": [], "answer": None, "inference": None}
    ledger["missing_evidence"] = ["x"]
    text = json.dumps({**ledger, key: "__NUMBER__"})
    return text.replace('"__NUMBER__"', number)


@st.composite
def duplicate_keys(draw: st.DrawFn) -> str:
    texts = [source.text for source in HOSTILE_SOURCES]
    ids = [source.id for source in HOSTILE_SOURCES]
    ledger = draw(ledgers(texts, ids, "ghost", consistent=True))
    pairs = [json.dumps(key) + ": " + json.dumps(value) for key, value in ledger.items()]
    repeated = draw(st.sampled_from(LEDGER_KEYS))
    pairs.insert(
        draw(st.integers(0, len(pairs))),
        json.dumps(repeated) + ": " + json.dumps(draw(json_values)),
    )
    return "{" + ", ".join(pairs) + "}"


@st.composite
def oversized_ledgers(draw: st.DrawFn) -> str:
    """Around the limits of 32 facts and 8 citations per fact."""
    citation = {"source_id": "notes", "quote": "Ravi owns it."}
    fact = {"subject": "s", "relation": "r", "object": "o", "citations": [citation]}
    many = {**fact, "citations": [citation] * draw(st.integers(7, 12))}
    facts = [fact] * draw(st.integers(0, 40))
    facts.insert(draw(st.integers(0, len(facts))), many)
    ledger = {"facts": facts, "answer": "yes", "inference": None, "missing_evidence": []}
    return json.dumps(ledger)


def _wrapped(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Wrap a raw text in code fences, ``<think>`` blocks, chatter, or several of them."""

    @st.composite
    def wrap(draw: st.DrawFn) -> str:
        text = draw(inner)
        for _ in range(draw(st.integers(0, 2))):
            style = draw(
                st.sampled_from(
                    ["fence", "open-fence", "think", "open-think", "chatter", "twice", "space"]
                )
            )
            if style == "fence":
                lang = draw(st.sampled_from(["", "json", "JSON", "js on"]))
                text = f"```{lang}\n{text}\n```"
            elif style == "open-fence":
                text = "```json\n" + text
            elif style == "think":
                text = f"<think>{draw(st.text(alphabet=CHARS, max_size=10))}</think>{text}"
            elif style == "open-think":
                text = "<think>" + text
            elif style == "chatter":
                text = text + draw(st.sampled_from(["\nHope this helps!", " {}", "]"]))
            elif style == "twice":
                text = text + "\n" + text
            else:
                text = "\n  " + text + "  \n"
        return text

    return wrap()


hostile_texts = _wrapped(
    st.one_of(
        st.text(),
        st.lists(
            st.one_of(st.text(max_size=5), st.sampled_from(["\ud800", "\udfff", "\ud83d", "{"]))
        ).map("".join),
        truncated_ledgers(),
        wrongly_typed_ledgers(),
        deeply_nested(),
        huge_numbers(),
        duplicate_keys(),
        oversized_ledgers(),
        st.one_of(json_scalars, st.lists(json_values, max_size=3)).map(json.dumps),
        valid_ledger_text(),
    )
)


@st.composite
def hostile_responses(draw: st.DrawFn) -> ModelResponse | str:
    text = draw(hostile_texts)
    if draw(st.booleans()):
        return text
    return ModelResponse(
        text=text,
        tool_calls=tuple(draw(st.just([]) | st.lists(json_values, min_size=1, max_size=2))),
        finish_reason=draw(
            st.one_of(
                st.none(),
                st.sampled_from(["stop", "length", "max_tokens", "tool_calls", "end_turn"]),
                st.text(max_size=8),
            )
        ),
        usage=draw(
            st.one_of(
                st.none(),
                st.builds(
                    TokenUsage,
                    input_tokens=st.none() | st.integers(0, 10**6),
                    output_tokens=st.none() | st.integers(0, 10**6),
                ),
            )
        ),
    )


# Evidence and model output laced with a marker that no fixed message contains: every run of
# eight characters holds one, so any echo of eight or more characters shows the marker.
MARK = "\u2042"  # ⁂, printable, so even a repr() of an echo shows it
chunks = st.one_of(st.sampled_from(TRICKY_FRAGMENTS[:20]), st.text(alphabet=CHARS, max_size=7))
laced_texts = st.lists(chunks.map(lambda chunk: chunk[:7]), min_size=1, max_size=6).map(
    lambda parts: MARK + MARK.join(parts) + MARK
)


def _lace(text: str) -> str:
    """Mark a string of eight or more characters that carries no marker yet."""
    if len(text) < 8 or MARK in text:
        return text
    return MARK.join(text[index : index + 7] for index in range(0, len(text), 7))


@st.composite
def leaky_responses(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(1, 3))
    texts = draw(st.lists(laced_texts, min_size=count, max_size=count))
    ids = [f"s{index}" for index in range(count)]
    sources = [Evidence(id=i, text=t) for i, t in zip(ids, texts, strict=True)]
    ledger = {
        "facts": draw(ledger_facts(texts, ids, "ghost" + MARK)),
        "answer": draw(st.one_of(st.none(), laced_texts)),
        "inference": draw(st.one_of(st.none(), laced_texts)),
        "missing_evidence": draw(st.lists(laced_texts, max_size=2)),
    }
    for fact in ledger["facts"]:
        fact["subject"] = draw(laced_texts)
        for citation in fact["citations"]:
            if draw(st.booleans()):
                citation["quote"] = MARK + citation["quote"]
            citation["quote"] = _lace(citation["quote"])
    quotes = [cited["quote"] for fact in ledger["facts"] for cited in fact["citations"]]
    damage = draw(st.sampled_from(["none", "none", "type", "key", "truncate", "prose"]))
    if damage == "type":
        ledger[draw(st.sampled_from(LEDGER_KEYS))] = draw(
            st.one_of(laced_texts, st.lists(laced_texts, max_size=2), st.integers())
        )
    elif damage == "key":
        target = ledger["facts"][0] if ledger["facts"] else ledger
        target[draw(laced_texts)] = draw(laced_texts)
    text = json.dumps(ledger, ensure_ascii=draw(st.booleans()))
    if damage == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif damage == "prose":
        text = draw(laced_texts) + text
    return {"sources": sources, "quotes": quotes, "response": text}


# --- Helpers -------------------------------------------------------------------------------


def _run(sources: list[Evidence], response: ModelResponse | str, **options: Any) -> EvidenceAnswer:
    model = FixedModel(response)
    answer = answer_from_evidence(QUESTION, sources, model, **options)
    assert model.calls == (1 if answer.model_called else 0)
    event(f"status: {answer.status}")
    event(f"returned citations: {min(len(_returned_citations(answer)), 3)}")
    event(f"omitted sources: {min(len(answer.omissions), 2)}")
    event(f"compressed sources: {min(len(answer.kept_ranges), 2)}")
    for code in answer.reason_codes:
        event(f"code: {code}")
    return answer


def _returned_citations(answer: EvidenceAnswer) -> list[Citation]:
    return [
        citation for fact in answer.facts for citation in (*fact.citations, *fact.counter_citations)
    ]


def _assert_spans(text: str, citation: Citation) -> None:
    quote = citation.quote
    assert text[citation.char_start : citation.char_end] == quote
    units = text.encode("utf-16-le")
    assert units[2 * citation.utf16_start : 2 * citation.utf16_end].decode("utf-16-le") == quote
    data = text.encode("utf-8")
    assert data[citation.utf8_start : citation.utf8_end].decode("utf-8") == quote


def _lengths(texts: list[str]) -> list[list[float]]:
    """An embedder: each text as its length and its count of spaces."""
    return [[1.0 + len(text), float(text.count(" "))] for text in texts]


def _kept(answer: EvidenceAnswer, text: str, source_id: str) -> tuple[tuple[int, int], ...]:
    """The ranges of a source the model read: its kept ranges, or its whole text."""
    return answer.kept_ranges.get(source_id, ((0, len(text)),))


def _first_read(text: str, quote: str, kept: tuple[tuple[int, int], ...]) -> int:
    """The first occurrence of ``quote`` inside one range the model read; -1 if none."""
    return next((at for a, b in kept if (at := text.find(quote, a, b)) >= 0), -1)


COMPRESS = pytest.mark.parametrize("compress", [False, True], ids=["whole", "compressed"])


def _assert_status_invariants(answer: EvidenceAnswer) -> None:
    assert isinstance(answer, EvidenceAnswer)
    assert answer.status in STATUSES
    assert {issue.code for issue in answer.validation_errors} <= REASON_CODES
    if answer.status == "answered":
        assert answer.answer is not None
        assert answer.answer.strip()
        assert answer.facts
        assert answer.citations_verified is True
        assert answer.missing_evidence == ()
        assert answer.validation_errors == ()
    elif answer.status == "invalid_response":
        assert answer.answer is None
        assert answer.inference is None
        assert answer.facts == ()
        assert answer.citations_verified is False
        assert len(answer.validation_errors) >= 1
    else:
        assert answer.answer is None
        assert answer.validation_errors == ()


# --- Properties: ledgers through the whole pipeline -----------------------------------------


@COMPRESS
@PROPERTY_SETTINGS
@given(data=st.data())
def test_returned_citations_always_satisfy_the_span_identity(compress, data):
    # Compressed, every span also lies inside one kept range: none crosses an elision.
    scenario = data.draw(scenarios(compress))
    answer = _run(scenario["sources"], scenario["response"], **scenario["options"])
    texts = {source.id: source.text for source in scenario["sources"]}
    for citation in _returned_citations(answer):
        assert citation.source_id in texts
        text = texts[citation.source_id]
        _assert_spans(text, citation)
        kept = _kept(answer, text, citation.source_id)
        assert any(a <= citation.char_start and citation.char_end <= b for a, b in kept)


@COMPRESS
@PROPERTY_SETTINGS
@given(data=st.data())
def test_returned_citations_resolve_to_the_first_occurrence_in_a_sent_source(compress, data):
    scenario = data.draw(scenarios(compress))
    answer = _run(scenario["sources"], scenario["response"], **scenario["options"])
    texts = {source.id: source.text for source in scenario["sources"]}
    for citation in _returned_citations(answer):
        assert citation.source_id in answer.used_source_ids
        assert citation.source_id not in answer.omissions
        assert citation.source_id != scenario["ghost"]
        text = texts[citation.source_id]
        kept = _kept(answer, text, citation.source_id)
        assert _first_read(text, citation.quote, kept) == citation.char_start
        assert citation.char_end == citation.char_start + len(citation.quote)


@COMPRESS
@PROPERTY_SETTINGS
@given(data=st.data())
def test_a_citation_verifies_exactly_when_it_is_an_excerpt_of_a_sent_source(compress, data):
    # Compressed: exactly when it is an excerpt of one kept range of a sent source.
    scenario = data.draw(scenarios(compress))
    answer = _run(scenario["sources"], scenario["response"], **scenario["options"])
    if not answer.model_called:
        return
    texts = {source.id: source.text for source in scenario["sources"]}
    sent = set(answer.used_source_ids)
    produced = [cited for fact in scenario["ledger"]["facts"] for cited in fact["citations"]]
    assert len(answer.citation_checks) == len(produced)
    for check, cited in zip(answer.citation_checks, produced, strict=True):
        assert (check.source_id, check.quote) == (cited["source_id"], cited["quote"])
        source_id, quote = cited["source_id"], cited["quote"]
        if source_id not in sent:
            expected = "unknown_source"
        elif not has_text(quote):
            expected = "empty_quote"
        elif _first_read(texts[source_id], quote, _kept(answer, texts[source_id], source_id)) < 0:
            expected = "quote_not_in_source"
        else:
            expected = None
        if expected is None:
            assert check.verdict == "verified"
            assert check.citation is not None
            text = texts[source_id]
            _assert_spans(text, check.citation)
            assert _first_read(text, quote, _kept(answer, text, source_id)) == (
                check.citation.char_start
            )
        else:
            assert (check.verdict, check.code, check.citation) == ("rejected", expected, None)


@PROPERTY_SETTINGS
@given(scenarios())
def test_each_status_is_consistent_with_the_fields_it_carries(scenario):
    answer = _run(scenario["sources"], scenario["response"], **scenario["options"])
    _assert_status_invariants(answer)
    texts = {source.id: source.text for source in scenario["sources"]}
    for check in answer.citation_checks:
        if check.verdict == "verified":
            assert check.citation is not None
            _assert_spans(texts[check.citation.source_id], check.citation)
    assert set(answer.used_source_ids) | set(answer.omissions) == set(texts)
    assert not set(answer.used_source_ids) & set(answer.omissions)


# --- Properties: hostile raw output ---------------------------------------------------------


@HOSTILE_SETTINGS
@given(
    response=hostile_responses(),
    max_response_chars=st.one_of(st.just(32768), st.just(131_072), st.integers(1, 200)),
    knowledge=st.sampled_from(POLICIES),
)
def test_hostile_model_output_never_raises_and_fails_closed_with_known_codes(
    response, max_response_chars, knowledge
):
    answer = _run(
        list(HOSTILE_SOURCES),
        response,
        max_response_chars=max_response_chars,
        knowledge=knowledge,
    )
    assert answer.model_called is True
    _assert_status_invariants(answer)
    text = response.text if isinstance(response, ModelResponse) else response
    # The raw text is kept exactly, except that lone surrogates (not Unicode) become escapes.
    assert answer.raw_response == text.encode("utf-8", "backslashreplace").decode("utf-8")
    assert answer.model_dump_json()
    if answer.status == "invalid_response":
        assert answer.validation_errors
        assert all(issue.code in REASON_CODES for issue in answer.validation_errors)
    if isinstance(response, ModelResponse) and response.tool_calls:
        assert answer.reason_codes == ("tool_call_not_allowed",)
    texts = {source.id: source.text for source in HOSTILE_SOURCES}
    for citation in _returned_citations(answer):
        _assert_spans(texts[citation.source_id], citation)


# --- Properties: no echo of evidence or model output ----------------------------------------


@PROPERTY_SETTINGS
@given(leaky_responses())
def test_validation_details_never_echo_evidence_or_quotes(case):
    answer = _run(case["sources"], case["response"], knowledge="evidence-only")
    echoes = [source.text for source in case["sources"]] + case["quotes"]
    echoes = [echo for echo in echoes if len(echo) >= 8]
    for issue in answer.validation_errors:
        assert MARK not in issue.detail
        assert MARK not in issue.path
        for echo in echoes:
            assert echo not in issue.detail


def _stances(ledger: dict[str, Any], stance: str | None) -> str:
    """The ledger's JSON with every citation's stance set to ``stance`` (``None``: no key)."""
    facts = [
        {
            **item,
            "citations": [
                {key: value for key, value in c.items() if key != "stance"}
                | ({} if stance is None else {"stance": stance})
                for c in item["citations"]
            ],
        }
        for item in ledger["facts"]
    ]
    return json.dumps({**ledger, "facts": facts})


@PROPERTY_SETTINGS
@given(scenarios())
def test_a_ledger_without_stances_gives_the_result_of_one_whose_citations_all_support(scenario):
    # What a ledger meant before it had stances, it means still: every field of its result is
    # the one its citations all marked "supports" give (the new fields at their defaults).
    sources, options = scenario["sources"], scenario["options"]
    without = _run(sources, _stances(scenario["ledger"], None), **options)
    marked = _run(sources, _stances(scenario["ledger"], "supports"), **options)
    kept, given_ = without.as_dict(), marked.as_dict()
    kept.pop("raw_response")
    given_.pop("raw_response")
    assert kept == given_
    assert all(fact.counter_citations == () for fact in without.facts)
    assert all(check.stance == "supports" for check in without.citation_checks)
    assert "contested_facts" not in without.flags
