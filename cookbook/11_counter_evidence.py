"""Recipe 11: two sources that disagree: the answer, and the verified evidence against it.

For: reviewers of consequential answers, who need to see what speaks against a fact.

Shows:

- the demo corpus's two sources that contradict each other: Omar's email says the payment
  provider's security review finished on May 4, the ticket HAR-311 says it is in progress;
- a citation the reader marks ``"stance": "contradicts"`` is verified like any other and
  returned beside its fact (``Fact.counter_citations``), never among the citations the answer
  rests on; the answer is flagged ``contested_facts``;
- the report shows it apart from the answer's footnotes ("contradicted by [2]");
- ``contested_facts="abstain"`` makes such an answer an abstention instead.

To show this deterministically and instantly, a stand-in reader writes the ledger a careful
reader writes for these sources. In your application, pass a real reader (recipe 1,
``LocalModel``, or a framework integration).

Run: ``uv run python cookbook/11_counter_evidence.py``
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from evidence_first import Evidence, EvidenceAnswer, ModelRequest, answer_from_evidence
from evidence_first.render import render_text

QUESTION = "Has the payment provider security review finished?"


def demo_sources() -> list[Evidence]:
    """The demo corpus's email and ticket about the security review, with their status."""
    corpus = json.loads((files("evidence_first") / "data" / "demo_corpus.json").read_text())
    by_id = {source["id"]: source for source in corpus["sources"]}
    return [
        Evidence(id=name, text=by_id[name]["text"], status=by_id[name]["status"])
        for name in ("email-omar-05-05", "ticket-HAR-311")
    ]


class StandIn:
    """A stand-in reader: the fact from the email, the ticket cited as saying otherwise."""

    def generate(self, request: ModelRequest) -> str:
        """Reply with a one-fact ledger whose second citation contradicts the fact."""
        fact: dict[str, Any] = {
            "subject": "the security review",
            "relation": "finished on",
            "object": "May 4",
            "citations": [
                {
                    "quote": "the security review finished on May 4",
                    "source_id": "email-omar-05-05",
                    "stance": "supports",
                },
                {
                    "quote": "Status: in progress.",
                    "source_id": "ticket-HAR-311",
                    "stance": "contradicts",
                },
            ],
        }
        ledger = {
            "answerable": "yes",
            "facts": [fact],
            "answer": "Yes, it finished on May 4 [F1].",
            "inference": None,
            "missing_evidence": [],
        }
        return json.dumps(ledger)


def review(answer: EvidenceAnswer) -> list[str]:
    """Each fact with the sources for it and, apart, the verified sources against it."""
    lines = []
    for fact in answer.facts:
        lines.append(f"{fact.subject} {fact.relation} {fact.object}")
        lines += [f"  for:     {c.source_id}: {c.quote!r}" for c in fact.citations]
        lines += [f"  against: {c.source_id}: {c.quote!r}" for c in fact.counter_citations]
    return lines


def main() -> dict[str, EvidenceAnswer]:
    """Ask once with the default policy (flag) and once abstaining on contested facts."""
    sources = demo_sources()
    flagged = answer_from_evidence(QUESTION, sources, StandIn())
    print(render_text(flagged))
    print("\n".join(["", "For review:", *review(flagged)]))
    strict = answer_from_evidence(QUESTION, sources, StandIn(), contested_facts="abstain")
    print(f"\nWith contested_facts='abstain': {strict.status} ({strict.abstention})")
    return {"flagged": flagged, "strict": strict}


if __name__ == "__main__":
    main()
