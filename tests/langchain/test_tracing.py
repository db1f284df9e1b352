"""The chat model runs as a child of the answerer's run, and the verdict is in the trace."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document

from langchain_evidence_first import EvidenceAnswerer


class Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.chains: dict[UUID, dict[str, Any]] = {}
        self.chat_models: list[dict[str, Any]] = []

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kwargs):
        self.chains[run_id] = {
            "name": kwargs.get("name"),
            "parent": parent_run_id,
            "tags": kwargs.get("tags"),
        }

    def on_chain_end(self, outputs, *, run_id, **kwargs):
        self.chains[run_id]["outputs"] = outputs

    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, **kwargs):
        self.chat_models.append({"parent": parent_run_id, "tags": kwargs.get("tags")})


SOURCES = [Document(id="a", page_content="The launch moved to June 15. Ravi owns it.")]


def _answerer_run(recorder: Recorder) -> tuple[UUID, dict[str, Any]]:
    ((run_id, run),) = [
        (k, v) for k, v in recorder.chains.items() if v["name"] == "EvidenceAnswerer"
    ]
    return run_id, run


def test_chat_model_run_is_a_child_of_the_answerer_run(quoting_model):
    recorder = Recorder()
    EvidenceAnswerer(llm=quoting_model).invoke(
        {"question": "When?", "sources": SOURCES},
        config={"callbacks": [recorder], "tags": ["audit"]},
    )
    run_id, _ = _answerer_run(recorder)
    assert [call["parent"] for call in recorder.chat_models] == [run_id]
    assert "audit" in recorder.chat_models[0]["tags"]


async def test_async_chat_model_run_is_a_child_too(quoting_model):
    recorder = Recorder()
    await EvidenceAnswerer(llm=quoting_model).ainvoke(
        {"question": "When?", "sources": SOURCES}, config={"callbacks": [recorder]}
    )
    run_id, _ = _answerer_run(recorder)
    assert [call["parent"] for call in recorder.chat_models] == [run_id]


def test_answerer_run_output_carries_the_verdict(quoting_model):
    recorder = Recorder()
    sources = [*SOURCES, Document(id="b", page_content="x " * 5000)]
    EvidenceAnswerer(llm=quoting_model, max_context_tokens=200).invoke(
        {"question": "When?", "sources": sources}, config={"callbacks": [recorder]}
    )
    _, run = _answerer_run(recorder)
    verdict = run["outputs"]
    assert verdict.status == "answered"
    assert verdict.reason_codes == ()
    assert verdict.used_source_ids == ("a",)
    assert verdict.omissions == {"b": "over_budget"}


def test_inside_a_chain_the_answerer_nests_under_the_chain(bm25_retriever, quoting_model):
    recorder = Recorder()
    chain = EvidenceAnswerer.from_retriever(bm25_retriever(SOURCES, k=1), llm=quoting_model)
    chain.invoke("When is the launch?", config={"callbacks": [recorder]})
    run_id, run = _answerer_run(recorder)
    assert run["parent"] is not None
    assert [call["parent"] for call in recorder.chat_models] == [run_id]
