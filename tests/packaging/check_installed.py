"""Run inside a fresh virtualenv holding one installed wheel: ``python -I check_installed.py KIND``.

``KIND`` is ``core``, ``langchain`` or ``llamaindex``. The script imports the installed package,
checks that the other framework is neither installed nor importable, answers one question with
a scripted model and checks the verified citation's span. It prints a JSON report on stdout
(where each package was imported from, and the installed distributions) for the test to check.
It imports nothing from the repository: run it with ``-I`` from a directory outside it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import sysconfig
from typing import Any, NamedTuple

QUESTION = "When is the launch?"
SOURCE_ID = "standup-04-28"
TEXT = (
    "Standup, April 28. The launch moved to June 15 because the payment provider "
    "needs a security review first. Dana owns the security review."
)
QUOTE = "The launch moved to June 15"
SPAN = (TEXT.index(QUOTE), TEXT.index(QUOTE) + len(QUOTE))

LEDGER = json.dumps(
    {
        "facts": [
            {
                "subject": "the launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [{"source_id": SOURCE_ID, "quote": QUOTE}],
            }
        ],
        "answer": "The launch is on June 15.",
        "inference": None,
        "missing_evidence": [],
    }
)


class Framework(NamedTuple):
    """A framework that must be absent: its core distribution, name prefix and modules."""

    core: str
    prefix: str
    modules: tuple[str, ...]


LANGCHAIN = Framework("langchain-core", "langchain", ("langchain_core", "langchain"))
LLAMA_INDEX = Framework("llama-index-core", "llama-index", ("llama_index",))
# Per kind: our own distributions in that virtualenv, and the frameworks that must be absent.
OURS = {
    "core": {"evidence-first"},
    "langchain": {"evidence-first", "langchain-evidence-first"},
    "llamaindex": {"evidence-first", "llama-index-response-synthesizers-evidence-first"},
}
ABSENT = {"core": (LANGCHAIN, LLAMA_INDEX), "langchain": (LLAMA_INDEX,), "llamaindex": (LANGCHAIN,)}


def importable(name: str) -> bool:
    """Whether ``name`` can be imported (a missing parent package counts as not importable)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def installed_distributions() -> list[str]:
    names = {dist.metadata["Name"] for dist in importlib.metadata.distributions()}
    return sorted(name.lower().replace("_", "-").replace(".", "-") for name in names)


def check_isolation(kind: str) -> None:
    distributions = installed_distributions()
    assert OURS[kind] <= set(distributions), distributions
    for framework in ABSENT[kind]:
        try:
            importlib.metadata.distribution(framework.core)
        except importlib.metadata.PackageNotFoundError:
            pass
        else:
            raise AssertionError(f"{kind}: {framework.core} is installed")
        leaked = [
            name
            for name in distributions
            if name.startswith(framework.prefix) and name not in OURS[kind]
        ]
        assert leaked == [], f"{kind}: framework distributions installed: {leaked}"
        found = [module for module in framework.modules if importable(module)]
        assert found == [], f"{kind}: framework modules importable: {found}"
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in framework.modules)
        assert loaded == [], f"{kind}: framework modules imported: {loaded}"
    # The `local` extra (llama.cpp and the model weights) is not pulled in.
    assert not importable("xllamacpp"), f"{kind}: xllamacpp is installed"


def check_answer(answer: Any) -> None:
    assert answer.status == "answered", answer
    assert answer.citations_verified, answer
    citation = answer.facts[0].citations[0]
    assert citation.source_id == SOURCE_ID, citation
    assert citation.quote == QUOTE, citation
    assert (citation.char_start, citation.char_end) == SPAN, citation
    assert answer.source(SOURCE_ID).text[citation.char_start : citation.char_end] == QUOTE


def run_core() -> dict[str, str]:
    import evidence_first
    from evidence_first import Evidence, ModelRequest, answer_from_evidence

    class ScriptedReader:
        """Answers every request with the fixed ledger and counts the calls."""

        def __init__(self) -> None:
            self.requests: list[ModelRequest] = []

        def generate(self, request: ModelRequest) -> str:
            self.requests.append(request)
            return LEDGER

    reader = ScriptedReader()
    source = Evidence(id=SOURCE_ID, text=TEXT, speaker="Ravi", status="current")
    answer = answer_from_evidence(QUESTION, [source], reader)
    check_answer(answer)
    assert answer.citation_mode == "quote"
    assert len(reader.requests) == 1
    return {"evidence_first": evidence_first.__file__}


def run_langchain() -> dict[str, str]:
    import warnings

    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    import evidence_first
    import langchain_evidence_first
    from langchain_evidence_first import EvidenceAnswerer, UnenforcedSettingsWarning

    llm = GenericFakeChatModel(messages=iter([AIMessage(content=LEDGER)]))
    document = Document(id=SOURCE_ID, page_content=TEXT, metadata={"speaker": "Ravi"})
    with warnings.catch_warnings():
        # The fake chat model is not an allow-listed provider; the answerer says so once.
        warnings.simplefilter("ignore", UnenforcedSettingsWarning)
        answer = EvidenceAnswerer(llm=llm).invoke({"question": QUESTION, "sources": [document]})
    check_answer(answer)
    return {
        "evidence_first": evidence_first.__file__,
        "langchain_evidence_first": langchain_evidence_first.__file__,
    }


def run_llamaindex() -> dict[str, str]:
    import warnings

    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        CompletionResponseGen,
        LLMMetadata,
    )
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
    from llama_index.core.schema import NodeWithScore, TextNode

    import evidence_first
    import llama_index
    import llama_index.response_synthesizers
    from evidence_first.adapters import UnenforcedSettingsWarning
    from llama_index.response_synthesizers import evidence_first as integration
    from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer

    # Both levels above the integration stay namespace packages.
    for namespace in (llama_index, llama_index.response_synthesizers):
        assert getattr(namespace, "__file__", None) is None, namespace
        assert namespace.__spec__ is not None
        assert namespace.__spec__.origin in (None, "namespace"), namespace.__spec__

    class LedgerLLM(CustomLLM):
        """Answers every chat with the fixed ledger."""

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(is_chat_model=True, model_name="ledger-llm")

        @llm_chat_callback()
        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            return ChatResponse(message=ChatMessage(role="assistant", content=LEDGER))

        @llm_completion_callback()
        def complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponse:
            raise AssertionError("the synthesizer must call chat, not complete")

        @llm_completion_callback()
        def stream_complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponseGen:
            raise AssertionError("the synthesizer must not stream")

    node = NodeWithScore(node=TextNode(id_=SOURCE_ID, text=TEXT), score=1.0)
    with warnings.catch_warnings():
        # The scripted LLM is not an allow-listed provider; the synthesizer says so once.
        warnings.simplefilter("ignore", UnenforcedSettingsWarning)
        response = EvidenceSynthesizer(llm=LedgerLLM()).synthesize(QUESTION, nodes=[node])
    check_answer(response.metadata["evidence_answer"])
    return {"evidence_first": evidence_first.__file__, "integration": integration.__file__}


RUNS = {"core": run_core, "langchain": run_langchain, "llamaindex": run_llamaindex}


def main(kind: str) -> None:
    check_isolation(kind)  # before any import: nothing of the other framework is even present
    files = RUNS[kind]()
    check_isolation(kind)  # after the answer: nothing of it was imported either
    report = {
        "purelib": sysconfig.get_path("purelib"),
        "files": files,
        "distributions": installed_distributions(),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
