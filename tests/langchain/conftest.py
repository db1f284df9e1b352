"""Chat models for the LangChain tests: deterministic, and honest about what they received."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import bm25s
import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Test chat models are not on the provider allow-list; that warning is tested on its own.
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(
                pytest.mark.filterwarnings(
                    "ignore::langchain_evidence_first.UnenforcedSettingsWarning"
                )
            )


def sent_sources(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """The sources array at the end of the human message."""
    user = str(messages[-1].content)
    return json.JSONDecoder().raw_decode(user, user.index("\n[") + 1)[0]


class Bm25Retriever(BaseRetriever):
    """A real lexical retriever: BM25 ranking by the maintained ``bm25s`` package.

    Returns copies of the documents with the BM25 score in ``metadata["score"]``.
    """

    documents: list[Document]
    k: int = 2
    _index: Any = None

    def model_post_init(self, context: Any) -> None:
        self._index = bm25s.BM25()
        corpus = [document.page_content for document in self.documents]
        self._index.index(bm25s.tokenize(corpus, show_progress=False), show_progress=False)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        k = min(self.k, len(self.documents))
        found, scores = self._index.retrieve(
            bm25s.tokenize([query], show_progress=False), k=k, show_progress=False
        )
        return [
            self.documents[int(position)].model_copy(
                update={
                    "metadata": {**self.documents[int(position)].metadata, "score": float(score)}
                }
            )
            for position, score in zip(found[0], scores[0], strict=True)
        ]


class QuotingChatModel(BaseChatModel):
    """Answers by quoting the first sentence of the first source it was sent.

    It records every call's messages and keyword arguments.
    """

    calls: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "quoting-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        sources = sent_sources(messages)
        self.calls.append({"messages": messages, "kwargs": kwargs, "sources": sources})
        source = sources[0]
        if "passages" in source:  # passage mode: cite the first passage by its label
            first = source["passages"][0]
            quote = first["text"]
            citation = {"source_id": source["id"], "passages": [first["label"]], "quote": None}
        else:
            quote = source["text"].split(". ")[0]
            citation = {"source_id": source["id"], "quote": quote}
        ledger = {
            "facts": [
                {
                    "subject": "source",
                    "relation": "says",
                    "object": quote,
                    "citations": [citation],
                }
            ],
            "answer": quote,
            "inference": None,
            "missing_evidence": [],
        }
        message = AIMessage(content=json.dumps(ledger), response_metadata={"finish_reason": "stop"})
        return ChatResult(generations=[ChatGeneration(message=message)])


class ScriptedChatModel(BaseChatModel):
    """Returns a fixed AIMessage and counts its calls."""

    message: AIMessage
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=self.message)])


@pytest.fixture
def quoting_model() -> QuotingChatModel:
    return QuotingChatModel(calls=[])


@pytest.fixture
def scripted_chat_model() -> type[ScriptedChatModel]:
    return ScriptedChatModel


@pytest.fixture
def bm25_retriever() -> type[Bm25Retriever]:
    def build(documents: list[Document], k: int = 2) -> Bm25Retriever:
        return Bm25Retriever(documents=documents, k=k)

    return build  # type: ignore[return-value]


@pytest.fixture
def retriever(request: pytest.FixtureRequest) -> Bm25Retriever:
    """A BM25 retriever, top 2, over the test module's ``DOCUMENTS``."""
    return Bm25Retriever(documents=request.module.DOCUMENTS, k=2)
