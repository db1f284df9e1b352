"""Recipe 5: scoped retrieval: answer only from what the signed-in user may see.

For: multi-tenant applications (one index, many customers or teams).

Shows: the application takes the user's scope from its own session, established at sign-in,
and never from the request a client sends. It filters retrieval by that scope *before*
answering, and also passes ``scope=`` to the answerer as defence in depth. Here a faulty
import filed another tenant's document in this tenant's partition: retrieval returns it, the
scope check omits it as ``out_of_scope``, and its text is never sent to the model.

The scope check is not authorization: filter first, as below, and treat ``out_of_scope`` in
``answer.omissions`` as a bug to alert on. To run instantly and deterministically, it uses a
stand-in model that records what it is sent; ``main(model)`` takes any reader instead.

Run: ``uv run python cookbook/05_scoped_retrieval.py``
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from evidence_first import (
    Evidence,
    EvidenceAnswer,
    ModelRequest,
    ReaderModel,
    answer_from_evidence,
)


@dataclass(frozen=True)
class Session:
    """Who is signed in, as your authentication layer established it (never client input)."""

    user_id: str
    tenant: str


ACME_CONTRACT = Evidence(
    id="acme-contract",
    text="Acme's support contract renews on March 1 at 12,000 euros per year.",
    metadata={"tenant": "acme"},
)
ACME_HOURS = Evidence(
    id="acme-hours",
    text="Acme's support hours are 8:00 to 18:00 CET on weekdays.",
    metadata={"tenant": "acme"},
)
GLOBEX_CONTRACT = Evidence(
    id="globex-contract",
    text="Globex's support contract renews on May 1 at 9,500 euros per year.",
    metadata={"tenant": "globex"},
)
# One partition per tenant, as with vector store namespaces or a metadata filter.
PARTITIONS = {
    # A faulty import filed Globex's contract under Acme: the scope check catches it.
    "acme": [ACME_CONTRACT, ACME_HOURS, GLOBEX_CONTRACT],
    "globex": [GLOBEX_CONTRACT],
}


def search(question: str, tenant: str, k: int = 3) -> list[Evidence]:
    """Your retriever, restricted to one tenant's partition; a word-overlap ranking here."""
    words = set(question.lower().split())
    ranked = sorted(PARTITIONS[tenant], key=lambda e: -len(words & set(e.text.lower().split())))
    return ranked[:k]


def handle(session: Session, body: dict[str, Any], model: ReaderModel) -> EvidenceAnswer:
    """Answer a client's request for the signed-in user; ``body`` is untrusted client input."""
    question = str(body["question"])
    tenant = session.tenant  # never body.get("tenant"): a client may ask for any tenant
    sources = search(question, tenant)
    return answer_from_evidence(question, sources, model, scope={tenant}, scope_key="tenant")


class StandInModel:
    """An instant stand-in for your model: records each request, answers with a ledger."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def generate(self, request: ModelRequest) -> str:
        """Record the request and cite Acme's contract."""
        self.requests.append(request)
        quote = "renews on March 1"
        fact = {
            "subject": "support contract",
            "relation": "renews on",
            "object": "March 1",
            "citations": [{"source_id": "acme-contract", "quote": quote}],
        }
        ledger = {"facts": [fact], "answer": "March 1.", "inference": None, "missing_evidence": []}
        return json.dumps(ledger)


def main(model: ReaderModel | None = None) -> EvidenceAnswer:
    """Answer an Acme user whose client asks for Globex's data; print what was sent."""
    session = Session(user_id="u-17", tenant="acme")  # from a verified token, say
    body = {"question": "When does the support contract renew?", "tenant": "globex"}
    answer = handle(session, body, model or StandInModel())
    print(answer)
    print("sent to the model:", answer.used_source_ids)
    if "out_of_scope" in answer.omissions.values():
        print("ALERT: retrieval returned out-of-scope documents; they were not sent")
    return answer


if __name__ == "__main__":
    main()
