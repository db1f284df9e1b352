"""Recipe 12: long retriever chunks, compressed to their relevant passages and still provable.

For: retrieval pipelines whose chunks are long (whole pages, long sections), where a chunk
larger than what is left of the allowance is otherwise left out whole.

Shows:

- three long chunks over a small ``max_context_tokens``: without compression each one is
  omitted ``over_budget``, nothing is sent and the model is not called;
- ``compress=True``: the allowance is shared among the chunks near the question, and each is
  sent as its most relevant whole passages (BM25 over the question's words), its first
  passage (often a title) too when it fits, the gaps marked as elisions. A chunk whose best
  passage scores far below the best chunk's (here the timetable and the board's minutes), or
  does not fit its share, stays ``over_budget``. ``EvidenceAnswer.kept_ranges`` gives each
  compressed chunk's kept ranges (code-point offsets into your text) and
  ``budget.saved_tokens`` what compression saved;
- the citation verified against your original chunk: its offsets index the long text you
  passed, not the shorter text that was sent.

To show this deterministically and instantly, a stand-in reader quotes the sentence that
answers only when that sentence was sent to it. In your application, pass a real reader
(recipe 1, ``LocalModel``, or a framework integration), and ``embedder=`` your embedding
model's batch function to rank passages by meaning instead of by words.

Run: ``uv run python cookbook/12_long_chunks.py``
"""

from __future__ import annotations

import json

from evidence_first import Evidence, EvidenceAnswer, ModelRequest, answer_from_evidence
from evidence_first.render import render_text

QUESTION = "When will the new ferry terminal open to passengers?"
ANSWER_SENTENCE = "The new ferry terminal will open to passengers on 14 September 2026."
# Small on purpose, so that each chunk is over what is left; the default is 2,048.
MAX_CONTEXT_TOKENS = 150


def chunks() -> list[Evidence]:
    """Three long chunks a retriever returned: wiki pages, each several paragraphs."""
    terminal = "\n\n".join(
        [
            "Harbor ferry terminal",
            "The terminal replaces the 1962 pier building on the east quay. The city council "
            "approved the design in March 2024 after two rounds of public consultation. "
            "Construction began in June 2024 and is led by Northwind Builders.",
            "The building has two boarding gates, a covered bicycle park and a waiting hall "
            "with seats for 300 people. Solar panels on the roof supply about a third of its "
            "power. " + ANSWER_SENTENCE + " The harbour office expects the final safety "
            "inspection to finish two weeks before that date.",
            "Until then, ferries keep leaving from the temporary pontoon on the west quay. "
            "Parking at the west quay stays free for ferry passengers during the works.",
        ]
    )
    timetable = "\n\n".join(
        [
            "Ferry timetable",
            "Ferries to Kestrel Island leave every 40 minutes from 06:00 to 22:00 on "
            "weekdays. At weekends the first ferry leaves at 07:30. The crossing takes about "
            "25 minutes in calm weather.",
            "In winter the last ferry leaves at 20:00. Timetable changes are announced on the "
            "harbour office's notice board a week in advance. Bicycles travel free; cars "
            "must be booked a day ahead.",
        ]
    )
    minutes = "\n\n".join(
        [
            "Harbour board minutes, May 2026",
            "The board reviewed the quarterly budget. Dredging of the inner basin will cost "
            "more than planned because of the spring storms. The board agreed to ask the "
            "council for a supplementary grant.",
            "Northwind Builders reported that the terminal's roof is complete and that the "
            "interior works are on schedule. The board thanked the west quay staff for "
            "running the temporary pontoon through the winter.",
        ]
    )
    return [
        Evidence(id="wiki/harbor-terminal", text=terminal),
        Evidence(id="wiki/ferry-timetable", text=timetable),
        Evidence(id="minutes/board-2026-05", text=minutes),
    ]


class StandIn:
    """A stand-in reader: it quotes the answering sentence only if it was sent that sentence."""

    def generate(self, request: ModelRequest) -> str:
        """Reply with a one-fact ledger, or abstain when the sentence is not in the prompt."""
        if ANSWER_SENTENCE not in request.user:
            ledger = {
                "answerable": "no",
                "facts": [],
                "answer": None,
                "inference": None,
                "missing_evidence": ["the opening date of the new ferry terminal"],
            }
            return json.dumps(ledger)
        fact = {
            "subject": "the new ferry terminal",
            "relation": "opens to passengers on",
            "object": "14 September 2026",
            "citations": [{"source_id": "wiki/harbor-terminal", "quote": ANSWER_SENTENCE}],
        }
        ledger = {
            "answerable": "yes",
            "facts": [fact],
            "answer": "It opens to passengers on 14 September 2026 [F1].",
            "inference": None,
            "missing_evidence": [],
        }
        return json.dumps(ledger)


def what_was_sent(answer: EvidenceAnswer, sources: list[Evidence]) -> list[str]:
    """One line per chunk: left out and why, sent whole, or the ranges of it that were kept."""
    lines = []
    for source in sources:
        if source.id in answer.omissions:
            lines.append(f"{source.id}: omitted ({answer.omissions[source.id]})")
        elif source.id in answer.kept_ranges:
            ranges = answer.kept_ranges[source.id]
            shown = ", ".join(f"[{start}, {end})" for start, end in ranges)
            lines.append(f"{source.id}: kept {shown} of {len(source.text)} characters")
        else:
            lines.append(f"{source.id}: sent whole")
    return lines


def main() -> dict[str, EvidenceAnswer]:
    """Ask without compression, then with it, and check the citation against the chunk."""
    sources = chunks()
    whole = answer_from_evidence(
        QUESTION, sources, StandIn(), max_context_tokens=MAX_CONTEXT_TOKENS
    )
    print(f"Without compression: {whole.status} ({whole.abstention})")
    print("\n".join(what_was_sent(whole, sources)))

    compressed = answer_from_evidence(
        QUESTION, sources, StandIn(), max_context_tokens=MAX_CONTEXT_TOKENS, compress=True
    )
    print(f"\nWith compress=True: {compressed.status}")
    print("\n".join(what_was_sent(compressed, sources)))
    print(f"Estimated tokens saved: {compressed.budget.saved_tokens}")
    by_id = {source.id: source for source in sources}
    for fact in compressed.facts:
        for citation in fact.citations:
            text = by_id[citation.source_id].text
            start, end = citation.char_start, citation.char_end
            assert text[start:end] == citation.quote  # offsets into the chunk you passed
            print(f"Cited {citation.source_id}[{start}:{end}]: {text[start:end]!r}")
    print()
    print(render_text(compressed))
    return {"whole": whole, "compressed": compressed}


if __name__ == "__main__":
    main()
