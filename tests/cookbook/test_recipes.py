"""Every cookbook recipe runs, and does what its header promises.

Recipes that need a model run on the session's tiny model (``live``); they assert invariants,
never the model's wording. Recipes 4 and 5 use instant stand-in models and run offline.
"""

from __future__ import annotations

import functools
import html
import importlib.util
import itertools
import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from llama_index.core.base.response.schema import Response
from openai import OpenAI

from evidence_first import (
    ModelCallError,
    ModelRequest,
    answer_from_evidence,
)
from evidence_first.chat_completions import SCHEMA_NAME

COOKBOOK = Path(__file__).parents[2] / "cookbook"
RECIPES = [
    "01_custom_model_callback",
    "02_langchain_rag_chain",
    "03_llamaindex_query_engine",
    "04_handling_statuses",
    "05_scoped_retrieval",
    "06_render_html",
    "07_flagged_citations",
    "08_bulk_answering_on_ray",  # runs on a local Ray in test_ray_recipe.py
    "09_follow_up_retrieval",
    "10_streaming_chat",
    "11_counter_evidence",
    "12_long_chunks",
]
STATUSES = {"answered", "insufficient_evidence", "invalid_response"}


@functools.cache
def recipe(name: str) -> ModuleType:
    """Load ``cookbook/<name>.py`` as a module (its file name is not an importable name)."""
    spec = importlib.util.spec_from_file_location(f"cookbook_{name}", COOKBOOK / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# The cookbook as a whole.


def test_every_recipe_is_tested_and_listed_in_the_readme():
    assert sorted(path.stem for path in COOKBOOK.glob("*.py")) == RECIPES
    readme = (COOKBOOK / "README.md").read_text()
    for name in RECIPES:
        assert f"uv run python cookbook/{name}.py" in readme


@pytest.mark.parametrize("name", RECIPES)
def test_each_recipe_says_who_it_is_for_and_how_to_run_it(name):
    module = recipe(name)
    header = module.__doc__
    assert header is not None
    assert header.startswith(f"Recipe {int(name[:2])}: ")
    assert "\nFor: " in header
    assert "\nShows:" in header
    assert f"uv run python cookbook/{name}.py" in header
    assert callable(module.main)


# 1. The core with a custom model callback.


@pytest.mark.live
def test_custom_model_callback_answers_through_the_openai_client(tiny_model, capsys, invariants):
    answer = recipe("01_custom_model_callback").main(tiny_model)

    invariants(answer)
    assert answer.model_called
    assert str(answer) in capsys.readouterr().out  # the report, its status line included


def _fake_provider(status: int, content: str = "") -> tuple[OpenAI, list[httpx.Request]]:
    attempts: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        attempts.append(request)
        if status != 200:
            return httpx.Response(status, json={"error": {"message": "crafted", "type": "x"}})
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
        return httpx.Response(200, json={**body, "choices": [choice]})

    client = OpenAI(
        base_url="http://provider.test/v1",
        api_key="sk-test",
        http_client=httpx.Client(transport=httpx.MockTransport(handle)),
    )
    return client, attempts


def test_custom_model_callback_sends_one_strict_request():
    module = recipe("01_custom_model_callback")
    source = module.SOURCES[0]
    ledger = {
        "facts": [
            {
                "subject": "launch",
                "relation": "moved to",
                "object": "June 15",
                "citations": [{"source_id": source.id, "quote": "The launch moved to June 15"}],
            }
        ],
        "answer": "June 15",
        "inference": None,
        "missing_evidence": [],
    }
    client, attempts = _fake_provider(200, json.dumps(ledger))

    answer = answer_from_evidence(
        "When is the launch?",
        module.SOURCES,
        module.OpenAIReader(client, model="m"),
        max_output_tokens=300,
    )

    assert answer.status == "answered"
    assert len(attempts) == 1
    body = json.loads(attempts[0].content)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["max_tokens"] == 300
    assert body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == SCHEMA_NAME
    assert "tools" not in body


def test_custom_model_callback_never_retries_a_failing_provider():
    module = recipe("01_custom_model_callback")
    client, attempts = _fake_provider(500)

    with pytest.raises(ModelCallError):
        answer_from_evidence(
            "When is the launch?", module.SOURCES, module.OpenAIReader(client, model="m")
        )

    assert len(attempts) == 1  # the openai client would otherwise retry twice


# 2. A LangChain RAG chain.


def test_langchain_recipe_retriever_ranks_with_bm25_and_keeps_the_score():
    module = recipe("02_langchain_rag_chain")
    retriever = module.BM25Retriever(documents=module.DOCUMENTS, k=2)

    found = retriever.invoke("When is the launch?")

    assert len(found) == 2
    assert found[0].id == "standup-04-28"
    assert found[0].metadata["score"] > 0


@pytest.mark.live
def test_langchain_rag_chain_answers_from_retrieved_documents(tiny_model, capsys, invariants):
    module = recipe("02_langchain_rag_chain")

    answer = module.main(tiny_model)

    invariants(answer)
    assert answer.model_called
    document_ids = {document.id for document in module.DOCUMENTS}
    assert 1 <= len(answer.used_source_ids) <= 2
    assert set(answer.used_source_ids) <= document_ids
    out = capsys.readouterr().out
    assert str(answer) in out  # the report, its status line included
    if answer.status != "answered":
        assert out.rstrip().endswith("[]")  # no content blocks without an answer


# 3. A LlamaIndex query engine.


@pytest.mark.live
def test_llamaindex_query_engine_answers_from_retrieved_nodes(tiny_model, capsys, invariants):
    module = recipe("03_llamaindex_query_engine")

    response = module.main(tiny_model)

    assert isinstance(response, Response)
    answer = response.metadata["evidence_answer"]
    invariants(answer)
    assert answer.model_called
    assert [n.node.node_id for n in response.source_nodes] == list(answer.used_source_ids)
    assert response.response == (answer.answer if answer.status == "answered" else None)
    documents = {document.doc_id: document.text for document in module.DOCUMENTS}
    for fact in answer.facts:
        for c in fact.citations:
            assert c.document is not None
            text = documents[c.document.doc_id]
            assert text[c.document.char_start : c.document.char_end] == c.quote
    assert str(answer) in capsys.readouterr().out  # the report, its status line included


# 4. Handling the statuses.


@pytest.mark.parametrize("language", ["en", "de"])
def test_each_status_and_error_gets_its_own_user_message(language):
    module = recipe("04_handling_statuses")
    messages = module.MESSAGES[language]

    shown = module.main(language)

    assert shown["answered"].splitlines() == [
        "June 15.[1]",
        "  [1] Standup notes: “The launch moved to June 15”",
    ]
    for case in [
        "insufficient_evidence",
        "invalid_response",
        "bad_request",
        "unavailable",
        "timeout",
    ]:
        assert shown[case] == messages[case]


def test_status_logs_carry_reason_codes_never_evidence_or_model_output(caplog):
    module = recipe("04_handling_statuses")

    with caplog.at_level(logging.INFO, logger="cookbook.statuses"):
        module.main()

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "abstained: why=reader reader_confidence=None" in logged
    assert "codes=quote_not_in_source" in logged
    assert "field=question" in logged
    assert "timed out" in logged
    assert "model call failed" in logged
    assert "June 15" not in logged  # neither the source text nor the answer
    assert "the launch is on June 15" not in logged  # the model's rejected quote
    assert "provider down" not in logged  # the provider's error message


def test_status_recipe_runs_as_a_script():
    script = COOKBOOK / "04_handling_statuses.py"
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "log: WARNING answer rejected: codes=quote_not_in_source" in result.stdout


# 5. Scoped retrieval.


def test_another_tenants_document_is_omitted_and_never_sent(capsys):
    module = recipe("05_scoped_retrieval")
    model = module.StandInModel()

    answer = module.main(model)

    assert answer.status == "answered"
    assert answer.omissions == {"globex-contract": "out_of_scope"}
    assert "globex-contract" not in answer.used_source_ids
    assert len(model.requests) == 1
    for request in model.requests:
        sent = request.system + request.user
        assert module.GLOBEX_CONTRACT.text not in sent
        assert "Globex" not in sent
    assert "ALERT" in capsys.readouterr().out


def test_the_scope_comes_from_the_session_never_from_the_request():
    module = recipe("05_scoped_retrieval")
    model = module.StandInModel()
    session = module.Session(user_id="u-42", tenant="globex")
    body = {"question": "When does the support contract renew?", "tenant": "acme"}

    answer = module.handle(session, body, model)

    assert answer.used_source_ids == ("globex-contract",)
    sent = model.requests[0].user
    assert "Acme" not in sent
    # The stand-in cites Acme's contract, which was never sent: rejected, not answered.
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("unknown_source",)


def test_scoped_retrieval_recipe_runs_as_a_script():
    script = COOKBOOK / "05_scoped_retrieval.py"
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "globex-contract (out_of_scope)" in result.stdout


# 6. Rendering to HTML.


def _marked(page: str) -> list[str]:
    return [html.unescape(span) for span in re.findall(r"<mark>(.*?)</mark>", page, re.S)]


@pytest.mark.live
def test_render_recipe_writes_the_answer_page(tiny_model, tmp_path, capsys):
    module = recipe("06_render_html")
    output = tmp_path / "answer.html"

    path = module.main([str(output)], tiny_model)

    assert path == output
    page = output.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    status = re.search(r'class="evidence-answer status-([a-z_]+)"', page)
    assert status is not None
    assert status[1] in STATUSES
    marked = _marked(page)
    if status[1] == "answered":
        assert marked
    if status[1] == "invalid_response":
        assert not marked
    for span in marked:
        assert any(span in source.text for source in module.SOURCES)
    assert str(output) in capsys.readouterr().out


class PassageStandIn:
    """Cites the second passage of the first source, narrowed to ``quote``."""

    def __init__(self, quote: str) -> None:
        self.quote = quote

    def generate(self, request: ModelRequest) -> str:
        citation_schema = request.json_schema["properties"]["facts"]["items"]["properties"][
            "citations"
        ]["items"]
        first_choice = citation_schema.get("anyOf", [citation_schema])[0]
        source_id = first_choice["properties"]["source_id"]["enum"][0]
        citation = {"source_id": source_id, "passages": [f"{source_id}#2"], "quote": self.quote}
        fact = {"subject": "launch", "relation": "is on", "object": "June 15"}
        return json.dumps(
            {
                "facts": [{**fact, "citations": [citation]}],
                "answer": "June 15",
                "inference": None,
                "missing_evidence": [],
            }
        )


def test_render_recipe_highlights_the_exact_span_in_a_temporary_file_by_default(capsys):
    module = recipe("06_render_html")

    path = module.main([], PassageStandIn("June 15"))

    assert path.exists()
    assert path.suffix == ".html"
    assert _marked(path.read_text(encoding="utf-8")) == ["June 15"]
    assert str(path) in capsys.readouterr().out
    path.unlink()
    path.parent.rmdir()


def test_render_recipe_page_escapes_source_text_and_the_question(tmp_path):
    module = recipe("06_render_html")
    sources = [
        {"id": "ticket", "text": "Ticket. <script>alert(1)</script> ships June 15 & later."},
    ]
    answer = answer_from_evidence(
        "<b>When</b> does it ship?",
        sources,
        PassageStandIn("June 15 & later"),
        citation_mode="passage",
    )
    output = tmp_path / "answer.html"

    module.write_page(answer, output)

    page = output.read_text(encoding="utf-8")
    assert "<script>" not in page
    assert "<b>" not in page
    assert "&lt;script&gt;" in page
    assert _marked(page) == ["June 15 & later"]


# 7. Planted instructions: the sent form and flagged citations.


def test_flagged_citations_recipe_holds_the_obedient_answer_and_shows_the_careful_one(capsys):
    decisions = recipe("07_flagged_citations").main()
    assert decisions["obedient"].startswith("held for review")
    assert "instruction_like" in decisions["obedient"]
    assert "control_string" in decisions["obedient"]
    assert decisions["careful"] == "shown: Tuesday"
    printed = capsys.readouterr().out
    sent_line = printed.splitlines()[1]
    assert "<|im_end|>" not in sent_line
    assert "\\u003c|im_end|\\u003e" in sent_line


# 11. Counter-evidence, over the demo corpus's two sources that disagree.


def test_counter_evidence_recipe_returns_the_ticket_against_the_emails_fact(capsys):
    answers = recipe("11_counter_evidence").main()
    flagged, strict = answers["flagged"], answers["strict"]
    assert flagged.status == "answered"
    assert flagged.flags == ("contested_facts",)
    (fact,) = flagged.facts
    assert [c.source_id for c in fact.citations] == ["email-omar-05-05"]
    assert [c.source_id for c in fact.counter_citations] == ["ticket-HAR-311"]
    assert [record["source_id"] for record in flagged.citations()] == ["email-omar-05-05"]
    assert (strict.status, strict.abstention) == ("insufficient_evidence", "contested_facts")
    printed = capsys.readouterr().out
    assert "Answer: Yes, it finished on May 4. [1]" in printed
    assert "contradicted by [2] ticket-HAR-311" in printed
    assert "against: ticket-HAR-311: 'Status: in progress.'" in printed


# 12. Long retriever chunks, compressed to their relevant passages.


def test_long_chunks_recipe_cites_a_compressed_chunk_at_offsets_into_the_original(capsys):
    module = recipe("12_long_chunks")
    answers = module.main()
    whole, compressed = answers["whole"], answers["compressed"]
    sources = {source.id: source for source in module.chunks()}
    # Without compression every chunk is over the allowance: nothing is sent.
    assert whole.status == "insufficient_evidence"
    assert whole.omissions == dict.fromkeys(sources, "over_budget")
    assert whole.kept_ranges == {}
    # With it, the answer's chunk is sent in parts, and the citation indexes the chunk as given;
    # the two chunks far from the question stay out, leaving the allowance to it.
    assert compressed.status == "answered"
    assert compressed.omissions == {
        "wiki/ferry-timetable": "over_budget",
        "minutes/board-2026-05": "over_budget",
    }
    text = sources["wiki/harbor-terminal"].text
    ranges = compressed.kept_ranges["wiki/harbor-terminal"]
    assert all(0 <= a < b <= len(text) for a, b in ranges)
    assert all(b < c for (_, b), (c, _) in itertools.pairwise(ranges))
    assert sum(b - a for a, b in ranges) < len(text)
    (fact,) = compressed.facts
    (citation,) = fact.citations
    start, end = citation.char_start, citation.char_end
    assert text[start:end] == module.ANSWER_SENTENCE
    assert any(a <= start and end <= b for a, b in ranges)
    assert compressed.budget.saved_tokens > 0
    printed = capsys.readouterr().out
    assert "Without compression: insufficient_evidence" in printed
    assert f"Cited wiki/harbor-terminal[{start}:{end}]" in printed
    assert f"Estimated tokens saved: {compressed.budget.saved_tokens}" in printed
    assert "wiki/harbor-terminal: sent in 2 parts," in printed  # the report's note


# 9. Follow-up retrieval.

MISSING_ROOM = "the room where the platform team meets"


def _room_reader():
    """A chat model that answers once both documents were sent, and names the room before."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    quotes = {
        "review-invite": "the launch review on June 12 is hosted by the platform team",
        "platform-rooms": "the platform team meets in room 4B",
    }

    class RoomReader(BaseChatModel):
        sent: list[list[str]]

        @property
        def _llm_type(self):
            return "room-reader"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            user = str(messages[-1].content)
            sources = json.JSONDecoder().raw_decode(user, user.index("\n[") + 1)[0]
            ids = [source["id"] for source in sources]
            self.sent.append(ids)
            ledger = {"facts": [], "answer": None, "inference": None}
            if set(quotes) <= set(ids):
                citations = [{"source_id": id_, "quote": quote} for id_, quote in quotes.items()]
                fact = {"subject": "launch review", "relation": "is held in", "object": "4B"}
                ledger |= {"facts": [{**fact, "citations": citations}], "answer": "Room 4B."}
                ledger["missing_evidence"] = []
            else:
                ledger["missing_evidence"] = [MISSING_ROOM]
            message = AIMessage(content=json.dumps(ledger))
            return ChatResult(generations=[ChatGeneration(message=message)])

    return RoomReader(sent=[])


@pytest.mark.filterwarnings("ignore::langchain_evidence_first.UnenforcedSettingsWarning")
def test_follow_up_recipe_finds_the_room_on_the_second_hop(capsys):
    module = recipe("09_follow_up_retrieval")
    model = _room_reader()

    result = module.follow_up(model)

    assert result.answer.status == "answered"
    assert result.model_calls == 2
    assert model.sent == [["review-invite"], ["review-invite", "platform-rooms"]]
    assert [hop.queries for hop in result.hops] == [(module.QUESTION,), (MISSING_ROOM,)]
    assert [hop.retrieved_ids for hop in result.hops] == [("review-invite",), ("platform-rooms",)]
    assert result.answer.used_source_ids == ("review-invite", "platform-rooms")
    out = capsys.readouterr().out
    assert f"hop 1: queries [{MISSING_ROOM!r}]" in out
    assert "retrieved ['platform-rooms'], new ['platform-rooms']" in out
    assert str(result.answer) in out


# 10. A chat that streams verified text in LangGraph.


def _standup_ledger(answer: str, quote: str) -> dict[str, Any]:
    citation = {"source_id": "standup-06-11", "quote": quote}
    fact = {"subject": "standup", "relation": "says", "object": quote, "citations": [citation]}
    return {"facts": [fact], "answer": answer, "inference": None, "missing_evidence": []}


LAUNCH = _standup_ledger("The launch moved to June 15 [F1].", "the launch moved to June 15")
OWNER = _standup_ledger("Ravi owns the launch checklist [F1].", "Ravi owns the launch checklist")


def _typing_model(*replies: str) -> Any:
    """``GenericFakeChatModel``, streaming each reply word by word as a model types it."""
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class Typing(GenericFakeChatModel):
        def _stream(self, *args: Any, **kwargs: Any) -> Any:
            for chunk in super()._stream(*args, **kwargs):
                time.sleep(0.01)
                yield chunk

    return Typing(messages=iter([AIMessage(reply) for reply in replies]))


@pytest.mark.filterwarnings("ignore::langchain_evidence_first.UnenforcedSettingsWarning")
def test_streaming_chat_recipe_streams_verified_text_and_keeps_each_turn(capsys):
    from langchain_evidence_first import answer_of

    module = recipe("10_streaming_chat")

    messages = module.chat(_typing_model(json.dumps(LAUNCH), json.dumps(OWNER)))

    assert [type(message).__name__ for message in messages] == [
        "HumanMessage",
        "AIMessage",
        "HumanMessage",
        "AIMessage",
    ]
    assert [message.text for message in messages[1::2]] == [
        "The launch moved to June 15.",
        "Ravi owns the launch checklist.",
    ]
    assert [answer_of(message).status for message in messages[1::2]] == ["answered"] * 2
    out = capsys.readouterr().out
    assert "> When is the launch?\nThe launch moved to June 15.\n" in out
    assert "> Who owns the launch checklist?\nRavi owns the launch checklist.\n" in out


@pytest.mark.filterwarnings("ignore::langchain_evidence_first.UnenforcedSettingsWarning")
def test_streaming_chat_recipe_writes_text_as_it_comes_and_never_the_ledger():
    from langchain_core.messages import HumanMessage

    module = recipe("10_streaming_chat")
    graph = module.build_chat(_typing_model(json.dumps(LAUNCH)))
    turn = {"messages": [HumanMessage("When is the launch?")]}
    config = {"configurable": {"thread_id": "t"}}

    streamed = list(graph.stream(turn, config, stream_mode=["custom", "messages"]))

    texts = [data["text"] for mode, data in streamed if mode == "custom"]
    assert len(texts) > 1  # piece by piece, as the model wrote it
    assert "".join(texts) == "The launch moved to June 15."
    ((message, metadata),) = [data for mode, data in streamed if mode == "messages"]
    assert metadata["langgraph_node"] == "answer"  # the node's message, no token of the ledger
    assert message.text == "The launch moved to June 15."


@pytest.mark.filterwarnings("ignore::langchain_evidence_first.UnenforcedSettingsWarning")
def test_streaming_chat_recipe_replaces_text_a_late_failure_withdrew(capsys):
    from langchain_evidence_first import answer_of

    module = recipe("10_streaming_chat")
    whole = json.dumps(LAUNCH)
    cut = whole[: whole.index('"inference"')]  # the reply ends after its answer

    (_, kept) = module.chat(_typing_model(cut), ["When is the launch?"])

    answer = answer_of(kept)
    assert answer.status == "invalid_response"
    assert kept.text.startswith("No answer (invalid_response).")
    assert "June 15" not in kept.text  # the kept message is the sentence alone
    out = capsys.readouterr().out
    assert f"The launch moved to June 15.\n(withdrawn) {kept.text}\n" in out
