"""Recipe 4: handling the three statuses, and the errors, at your application's boundary.

For: developers putting answers in front of users: what to show, what to log, what to hide.

Shows:

- ``answered``: the answer with a footnote after each of its segments (``answer.segments``:
  the parts of the answer, each with the facts it rests on), then the citations the footnotes
  number (source title and exact quote);
- ``insufficient_evidence``: your own localized abstention text, and a log line saying why
  (``answer.abstention``: the model said what is missing, its confidence fell below its floor,
  or the answer rested on superseded sources or unsupported facts) and how confident the
  reader was (``answer.reader_confidence``, where the provider gives log-probabilities);
- ``invalid_response``: a user-safe message, and a log line with the reason codes only (never
  evidence text or the model's raw output, which may echo evidence);
- ``InvalidRequestError``, ``ModelCallError`` and ``AnswerTimeoutError``: caught where the
  request enters your application, each with its own user-safe message.

To show each case deterministically and instantly, it uses a stand-in model that returns a
prepared ledger, raises, or stalls. In your application, pass a real reader instead (recipe 1,
``LocalModel``, or a framework integration).

Run: ``uv run python cookbook/04_handling_statuses.py``
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from evidence_first import (
    AnswerTimeoutError,
    Evidence,
    EvidenceAnswer,
    InvalidRequestError,
    ModelCallError,
    ModelRequest,
    ReaderModel,
    answer_from_evidence,
)

log = logging.getLogger("cookbook.statuses")

MESSAGES = {
    "en": {
        "insufficient_evidence": "I can't answer that from the documents available to me.",
        "invalid_response": "Sorry, I couldn't produce a reliable answer. Please try again.",
        "bad_request": "Sorry, that question can't be processed. Please rephrase it.",
        "unavailable": "The assistant is unavailable right now. Please try again later.",
        "timeout": "The assistant took too long to answer. Please try again.",
    },
    "de": {
        "insufficient_evidence": "Das kann ich aus den vorliegenden Dokumenten nicht beantworten.",
        "invalid_response": "Leider gibt es keine verlässliche Antwort. Bitte erneut versuchen.",
        "bad_request": "Diese Frage kann nicht verarbeitet werden. Bitte anders formulieren.",
        "unavailable": "Der Assistent ist gerade nicht erreichbar. Bitte später erneut versuchen.",
        "timeout": "Der Assistent hat zu lange gebraucht. Bitte erneut versuchen.",
    },
}


def present(answer: EvidenceAnswer, language: str) -> str:
    """Turn an answer into what the user sees; log what operators need."""
    messages = MESSAGES[language]
    if answer.status == "answered":
        records = answer.citations()
        lines = [footnoted(answer, records)]
        for number, record in enumerate(records, start=1):
            title = record["metadata"].get("title", record["source_id"])
            lines.append(f"  [{number}] {title}: “{record['quote']}”")
        # What deserves a second look, though answered: a fact its citation does not hold
        # (it only flags by default); cited sources lacking the question's words, under
        # uncovered_question="flag"; under non_current_evidence="flag", an answer resting only
        # on superseded sources.
        if answer.flags:
            log.info("answered with flags=%s", ",".join(answer.flags))
        return "\n".join(lines)
    if answer.status == "insufficient_evidence":
        # Only why, counts and IDs: no evidence text, no model output.
        log.info(
            "abstained: why=%s reader_confidence=%s model_called=%s sent=%s",
            answer.abstention,
            answer.reader_confidence,
            answer.model_called,
            answer.used_source_ids,
        )
        return messages["insufficient_evidence"]
    log.warning(
        "answer rejected: codes=%s prompt=%s", ",".join(answer.reason_codes), answer.prompt_version
    )
    return messages["invalid_response"]


def footnoted(answer: EvidenceAnswer, records: list[dict[str, Any]]) -> str:
    """The answer with each segment followed by the numbers of its facts' citations.

    A segment no fact marker ties to a fact is marked as such, for the user to weigh.
    """
    text, shown = answer.answer or "", 0
    parts = []
    for segment in answer.segments:
        numbers = [
            number
            for number, record in enumerate(records, start=1)
            if record["fact_index"] in segment.fact_indices
        ]
        parts.append(text[shown : segment.char_end])
        parts.append("".join(f"[{number}]" for number in numbers) or " [no citation]")
        shown = segment.char_end
    return "".join(parts) + text[shown:]


def ask(
    question: str, sources: list[Evidence], model: ReaderModel, language: str, timeout: float = 60
) -> str:
    """The application boundary: always returns a message for the user, never raises."""
    messages = MESSAGES[language]
    try:
        answer = answer_from_evidence(question, sources, model, timeout=timeout)
    except InvalidRequestError as exc:  # our own mistake: too many sources, a blank question...
        log.error("invalid request: field=%s", exc.field)
        return messages["bad_request"]
    except AnswerTimeoutError as exc:
        log.warning("model timed out after %s s", exc.timeout)
        return messages["timeout"]
    except ModelCallError as exc:  # the provider failed; the cause is chained, not in the message
        log.error("model call failed: %s", exc.cause_type)
        return messages["unavailable"]
    return present(answer, language)


class PreparedModel:
    """A stand-in model: returns a prepared ledger, raises an error, or stalls."""

    def __init__(self, reply: dict[str, Any] | Exception | None) -> None:
        self.reply = reply

    def generate(self, request: ModelRequest) -> str:
        """Answer with the prepared reply; ``None`` stalls until the engine gives up."""
        if isinstance(self.reply, Exception):
            raise self.reply
        if self.reply is None:
            request.cancel.wait(request.timeout + 5)  # set when the engine stops waiting
            return ""
        return json.dumps(self.reply)


SOURCES = [
    Evidence(
        id="standup-04-28",
        text="Standup, April 28. The launch moved to June 15.",
        metadata={"title": "Standup notes"},
    ),
]


def ledger(quote: str | None = None, missing: tuple[str, ...] = ()) -> dict[str, Any]:
    """A ledger as a model writes it: one fact citing ``quote``, or an abstention."""
    if quote is None:
        return {"facts": [], "answer": None, "inference": None, "missing_evidence": list(missing)}
    citations = [{"source_id": "standup-04-28", "quote": quote}]
    fact = {
        "subject": "launch",
        "relation": "moved to",
        "object": "June 15",
        "citations": citations,
    }
    # The model ends each claim with the facts it rests on: [F1] is the first fact.
    answer = "June 15 [F1]."
    return {"facts": [fact], "answer": answer, "inference": None, "missing_evidence": []}


SCENARIOS = {
    "answered": ("When is the launch?", PreparedModel(ledger("The launch moved to June 15"))),
    "insufficient_evidence": (
        "Who approved the budget?",
        PreparedModel(ledger(missing=("who approved the budget",))),
    ),
    # A paraphrase, not an exact excerpt of the source: rejected as quote_not_in_source.
    "invalid_response": ("When is the launch?", PreparedModel(ledger("the launch is on June 15"))),
    "bad_request": ("   ", PreparedModel(ledger("The launch moved to June 15"))),  # blank question
    "unavailable": ("When is the launch?", PreparedModel(ConnectionError("provider down"))),
    "timeout": ("When is the launch?", PreparedModel(None)),
}


def main(language: str = "en") -> dict[str, str]:
    """Run every scenario and print what the user would see; return it by scenario."""
    shown = {}
    for name, (question, model) in SCENARIOS.items():
        print(f"--- {name}")
        # A short timeout, so the stalled model gives up quickly.
        shown[name] = ask(question, SOURCES, model, language, timeout=1)
        print(shown[name])
    return shown


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, format="log: %(levelname)s %(message)s", stream=sys.stdout
    )
    main()
