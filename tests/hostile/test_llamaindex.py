"""The LlamaIndex synthesizer, attacked: its source numbers, and what its docstring promises.

With ``number_sources=True`` the synthesizer writes ``[n]`` after each segment, ``[n]`` being
``response.source_nodes[n - 1]``. A literal ``[2]`` the model wrote once read exactly like a
citation of the second node. And its docstring said an unusable status was "logged by key",
while the code raises.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import httpx
import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.llms.openai_like import OpenAILike

from evidence_first import EvidenceAnswer, InvalidRequestError
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer

NODES = [
    NodeWithScore(
        node=TextNode(id_="notes", text="Standup: the launch moved to June 15."), score=2
    ),
    NodeWithScore(node=TextNode(id_="budget", text="The budget is 40,000 euros."), score=1),
]
FACT = {
    "subject": "the launch",
    "relation": "moved to",
    "object": "June 15",
    "citations": [{"source_id": "notes", "quote": "the launch moved to June 15"}],
}


def _llm(answer: str) -> OpenAILike:
    ledger = {"facts": [FACT], "answer": answer, "inference": None, "missing_evidence": []}

    def handle(request: httpx.Request) -> httpx.Response:
        message = {"role": "assistant", "content": json.dumps(ledger, ensure_ascii=False)}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        return httpx.Response(
            200,
            json={"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                  "choices": [choice]},
        )  # fmt: skip

    transport = httpx.MockTransport(handle)
    return OpenAILike(
        model="m",
        api_base="http://fake-openai.test/v1",
        api_key="sk-test",
        is_chat_model=True,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )


# "`[n]` being `response.source_nodes[n - 1]`" (the docstring of `EvidenceSynthesizer`;
# docs/llamaindex.md, "Source numbers").


@pytest.mark.parametrize(
    "answer",
    [
        "The launch moved to June 15 [F1]. The budget [2] is set [2, 1].",
        "The launch moved to June 15 [F1] [2].",
        "June 15 [2] [F1]. See ［２］.",
        "[2] June 15 [F1].",
    ],
)
def test_every_source_number_in_the_text_is_one_the_synthesizer_wrote(answer):
    synthesizer = EvidenceSynthesizer(llm=_llm(answer), number_sources=True)
    response = synthesizer.synthesize("When did the launch move?", NODES)
    evidence: Any = response.metadata["evidence_answer"]
    assert isinstance(evidence, EvidenceAnswer)
    assert evidence.status == "answered"
    text = str(response.response)
    written = [
        (entry["char_end"] + sum(len(f"[{m}]") for m in entry["source_numbers"][:k]), n)
        for entry in response.metadata["source_numbers"]
        for k, n in enumerate(entry["source_numbers"])
    ]
    found = [(match.start(), int(match.group(1))) for match in re.finditer(r"[\[［]\s*(\d+)", text)]
    assert found == written
    assert found == [(found[0][0], 1)]  # the launch's node, once
    assert len(text) - len("[1]") == len(evidence.answer or "")


@pytest.mark.parametrize(("key", "value"), [("status", "stale"), ("observed_at", "yesterday")])
def test_an_unusable_status_or_time_raises_as_the_docstring_says(key, value):
    doc = inspect.getdoc(EvidenceSynthesizer) or ""
    said = doc[doc.index(f"{key}_key:") : doc.index("documents:")]
    assert "logged" not in said
    assert "InvalidRequestError" in said
    node = NodeWithScore(node=TextNode(id_="notes", text="The launch.", metadata={key: value}))
    synthesizer = EvidenceSynthesizer(llm=_llm("June 15 [F1]."))
    with pytest.raises(InvalidRequestError) as raised:
        synthesizer.synthesize("When did the launch move?", [node])
    assert key in str(raised.value)
    assert value not in str(raised.value)
