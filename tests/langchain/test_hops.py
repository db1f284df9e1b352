"""Follow-up retrieval: each hop's queries and sources, the bounds, and the trace."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

import _support
import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langgraph.graph.state import CompiledStateGraph
from pydantic import Field

from evidence_first import InvalidRequestError
from langchain_evidence_first import EvidenceAnswerer
from langchain_evidence_first.hops import FollowUpAnswerer, HopsResult, HopTrace

QUESTION = "Where is the launch review held?"
REVIEW = Document(id="review", page_content="The launch review is run by the platform team.")
ROOM = Document(id="room", page_content="The platform team meets in room 4B on Tuesdays.")
MENU = Document(id="menu", page_content="The cafeteria menu changes every week.")
DOCUMENTS = [REVIEW, ROOM, MENU]
MISSING_ROOM = "the room where the platform team meets"


def _sources(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    user = str(messages[-1].content)
    return json.JSONDecoder().raw_decode(user, user.index("\n[") + 1)[0]


class LookupChatModel(BaseChatModel):
    """Answers, citing each, once every source in ``needs`` was sent; else abstains.

    Abstaining, it names ``missing`` as the missing evidence. It records what each call sent.
    """

    needs: tuple[str, ...] = ()
    missing: tuple[str, ...] = (MISSING_ROOM,)
    calls: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "lookup-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        sources = {source["id"]: source for source in _sources(messages)}
        self.calls.append({"messages": messages, "ids": list(sources)})
        ledger = self._ledger(sources)
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=json.dumps(ledger)))]
        )

    def _ledger(self, sources: dict[str, Any]) -> dict[str, Any]:
        """The ledger this model writes for the sources sent, by ID."""
        if self.needs and all(needed in sources for needed in self.needs):
            citations = [
                {"source_id": needed, "quote": sources[needed]["text"].split(" on ")[0]}
                for needed in self.needs
            ]
            room = _support.fact(*citations, subject="review", relation="is in", obj="4B")
            return _support.ledger_dict([room], answer="Room 4B.")
        return _support.ledger_dict(answer=None, missing_evidence=self.missing)


class Recording:
    """A retriever from a function of the query, recording every query it is asked."""

    def __init__(self, find: Any) -> None:
        self.queries: list[str] = []

        def retrieve(query: str) -> list[Any]:
            self.queries.append(query)
            return find(query)

        self.runnable = RunnableLambda(retrieve, name="recording_retriever")


def _follow_up(retriever: Any, model: LookupChatModel, **options: Any) -> FollowUpAnswerer:
    bounds = {key: options.pop(key) for key in ("max_hops", "max_followups") if key in options}
    return FollowUpAnswerer(retriever, EvidenceAnswerer(llm=model, **options), **bounds)


# How many hops run.


def test_max_hops_0_answers_once_even_when_the_answer_abstains(bm25_retriever):
    model = LookupChatModel(needs=("room",))

    result = _follow_up(bm25_retriever(DOCUMENTS, k=1), model, max_hops=0).invoke(QUESTION)

    assert isinstance(result, HopsResult)
    assert result.answer.status == "insufficient_evidence"
    assert result.model_calls == len(model.calls) == 1
    assert [hop.queries for hop in result.hops] == [(QUESTION,)]


def test_an_answered_first_hop_makes_no_second_call(bm25_retriever):
    model = LookupChatModel(needs=("review",))

    result = _follow_up(bm25_retriever(DOCUMENTS, k=1), model).invoke(QUESTION)

    assert result.answer.status == "answered"
    assert len(model.calls) == 1
    assert len(result.hops) == 1
    assert result.hops[0].status == "answered"


def test_missing_evidence_retrieves_the_second_document_and_the_question_is_answered(
    bm25_retriever,
):
    model = LookupChatModel(needs=("review", "room"))

    result = _follow_up(bm25_retriever(DOCUMENTS, k=1), model).invoke(QUESTION)

    assert result.answer.status == "answered"
    assert result.answer.question == QUESTION == result.question
    assert result.model_calls == len(model.calls) == 2
    assert [call["ids"] for call in model.calls] == [["review"], ["review", "room"]]
    first, second = result.hops
    assert first == HopTrace(
        hop=0,
        queries=(QUESTION,),
        retrieved_ids=("review",),
        new_source_ids=("review",),
        dropped_source_ids=(),
        status="insufficient_evidence",
        model_called=True,
        used_source_ids=("review",),
        omissions={},
        missing_evidence=(MISSING_ROOM,),
    )
    assert second.hop == 1
    assert second.queries == (MISSING_ROOM,)
    assert second.retrieved_ids == second.new_source_ids == ("room",)
    assert second.status == "answered"
    assert second.used_source_ids == result.answer.used_source_ids == ("review", "room")


def test_the_final_answer_is_the_answerers_own_object(bm25_retriever):
    model = LookupChatModel(needs=("review", "room"))

    result = _follow_up(bm25_retriever(DOCUMENTS, k=1), model).invoke(QUESTION)

    assert result.answer.source_object("room") is not None  # the offered sources are kept
    assert result.answer.citations()[1]["source_id"] == "room"


def test_follow_up_queries_are_missing_evidence_verbatim_at_most_max_followups():
    missing = ("Ravi's role ", "the launch date", "Ravi's role ", "the budget", "x")
    model = LookupChatModel(needs=("never",), missing=missing)
    retriever = Recording(lambda query: [Document(id=query, page_content=f"About {query}.")])

    result = _follow_up(retriever.runnable, model, max_hops=1, max_followups=2).invoke("Who?")

    # A repeated item is skipped; the rest are queries as written, spaces and all.
    assert retriever.queries == ["Who?", "Ravi's role ", "the launch date"]
    assert result.hops[1].queries == ("Ravi's role ", "the launch date")
    assert result.hops[1].new_source_ids == ("Ravi's role ", "the launch date")


@pytest.mark.parametrize("max_hops", [1, 2, 5])
def test_never_more_than_max_hops_plus_one_calls_when_every_hop_abstains(max_hops):
    model = LookupChatModel(needs=("never",), missing=("a", "b", "c", "d"))
    counter = iter(range(1000))
    retriever = RunnableLambda(
        lambda query: [Document(id=f"doc-{next(counter)}", page_content=query)]
    )

    result = _follow_up(retriever, model, max_hops=max_hops).invoke("Why?")

    assert len(model.calls) == result.model_calls == max_hops + 1
    assert [hop.hop for hop in result.hops] == list(range(max_hops + 1))
    assert all(len(hop.queries) == 3 for hop in result.hops[1:])  # max_followups=3
    assert result.answer.status == "insufficient_evidence"


def test_an_invalid_response_stops_without_a_follow_up(bm25_retriever, scripted_chat_model):
    ledger = {
        "facts": [
            {
                "subject": "a",
                "relation": "b",
                "object": "c",
                "citations": [{"source_id": "review", "quote": "not in the source"}],
            }
        ],
        "answer": "c",
        "inference": None,
        "missing_evidence": ["the room"],
    }
    model = scripted_chat_model(message=AIMessage(content=json.dumps(ledger)))
    answerer = FollowUpAnswerer(bm25_retriever(DOCUMENTS, k=1), EvidenceAnswerer(llm=model))

    result = answerer.invoke(QUESTION)

    assert result.answer.status == "invalid_response"
    assert model.calls == 1
    assert len(result.hops) == 1


def test_an_abstention_without_a_model_call_names_nothing_to_follow_up():
    model = LookupChatModel()
    retriever = Recording(lambda query: [])

    result = _follow_up(retriever.runnable, model).invoke(QUESTION)

    assert result.answer.status == "insufficient_evidence"
    assert result.answer.missing_evidence == ()
    assert retriever.queries == [QUESTION]
    assert result.model_calls == len(model.calls) == 0
    assert len(result.hops) == 1
    assert not result.hops[0].model_called


# The sources each hop offers.


def test_sources_are_deduplicated_by_the_id_the_answerer_gives_them():
    first = [
        Document(id="a", page_content="Alpha."),
        Document(page_content="Beta.", metadata={"id": "b"}),
        Document(page_content="No ID."),
    ]
    again = [
        Document(page_content="Alpha, edited.", metadata={"id": "a"}),
        Document(id="b", page_content="Beta."),
        Document(page_content="No ID."),
        Document(id="c", page_content="Gamma."),
        Document(id="c", page_content="Gamma."),
    ]
    model = LookupChatModel(needs=("c",), missing=("more",))
    retriever = RunnableLambda(lambda query: first if query == "Q?" else again)

    result = _follow_up(retriever, model).invoke("Q?")

    assert model.calls[1]["ids"] == ["a", "b", "doc-3", "c"]
    hop = result.hops[1]
    assert hop.retrieved_ids == ("a", "b", "doc-3", "c", "c")
    assert hop.new_source_ids == ("c",)
    assert result.answer.omissions == {}  # nothing repeated reaches the answerer


def test_a_follow_up_that_finds_nothing_new_ends_without_another_call(bm25_retriever):
    model = LookupChatModel(needs=("room",), missing=("the launch review",))

    result = _follow_up(bm25_retriever(DOCUMENTS, k=1), model).invoke(QUESTION)

    assert len(model.calls) == result.model_calls == 1
    assert result.answer.status == "insufficient_evidence"
    last = result.hops[-1]
    assert (last.hop, last.queries, last.retrieved_ids) == (1, ("the launch review",), ("review",))
    assert last.new_source_ids == ()
    assert last.status is None
    assert not last.model_called


def test_the_union_is_capped_at_64_and_the_rest_is_reported():
    first = [Document(id=f"first-{i}", page_content=f"First {i}.") for i in range(60)]
    more = [Document(id=f"more-{i}", page_content=f"More {i}.") for i in range(10)]
    model = LookupChatModel(needs=("never",), missing=("more",), calls=[])
    retriever = RunnableLambda(lambda query: first if query == "Q?" else more)
    answerer = _follow_up(retriever, model, max_hops=1, max_context_tokens=32_768)

    result = answerer.invoke("Q?")

    hop = result.hops[1]
    assert hop.new_source_ids == tuple(f"more-{i}" for i in range(4))
    assert hop.dropped_source_ids == tuple(f"more-{i}" for i in range(4, 10))
    assert model.calls[1]["ids"] == [d.id for d in first] + [f"more-{i}" for i in range(4)]
    assert result.answer.omissions == {}  # cut before the answerer, never offered


def test_positional_names_of_dropped_documents_follow_on_from_64():
    first = [Document(page_content=f"First {i}.") for i in range(63)]
    more = [Document(page_content=f"More {i}.") for i in range(3)]
    model = LookupChatModel(needs=("never",), missing=("more",))
    retriever = RunnableLambda(lambda query: first if query == "Q?" else more)

    result = _follow_up(retriever, model, max_hops=1, max_context_tokens=32_768).invoke("Q?")

    assert result.hops[1].new_source_ids == ("doc-64",)
    assert result.hops[1].dropped_source_ids == ("doc-65", "doc-66")


def test_scope_and_question_time_apply_on_every_hop():
    acme = Document(id="acme", page_content="Acme renews in March.", metadata={"scope": "acme"})
    globex = Document(id="globex", page_content="Globex renews in May.", metadata={"scope": "gx"})
    acme_2 = Document(id="acme-2", page_content="Acme pays yearly.", metadata={"scope": "acme"})
    model = LookupChatModel(needs=("never",), missing=("renewal",))
    retriever = RunnableLambda(lambda query: [acme] if query == "When?" else [globex, acme_2])
    when = datetime(2026, 5, 4, 9, 30, tzinfo=timezone.utc)

    result = _follow_up(retriever, model, max_hops=1, scope={"acme"}, question_time=when).invoke(
        "When?"
    )

    assert len(model.calls) == 2
    assert model.calls[1]["ids"] == ["acme", "acme-2"]
    assert result.hops[1].omissions == {"globex": "out_of_scope"}
    for call in model.calls:
        sent = "".join(str(message.content) for message in call["messages"])
        assert "Question time: 2026-05-04T09:30:00.000Z" in sent
        assert "Globex" not in sent


async def test_ainvoke_runs_the_same_hops(bm25_retriever):
    model = LookupChatModel(needs=("review", "room"))
    answerer = _follow_up(bm25_retriever(DOCUMENTS, k=1), model)

    result = await answerer.ainvoke(QUESTION)

    assert result == answerer.invoke(QUESTION)
    assert len(model.calls) == 4


def test_batch_answers_each_question(bm25_retriever):
    model = LookupChatModel(needs=("menu",), missing=("the cafeteria menu",))
    # The model answers both questions from the menu: for the launch review question it cites
    # text off the question on purpose (the menu takes a second hop), so that is only flagged.
    answerer = _follow_up(bm25_retriever(DOCUMENTS, k=1), model, uncovered_question="flag")

    results = answerer.batch(["When does the cafeteria menu change?", QUESTION])

    assert [result.answer.status for result in results] == ["answered", "answered"]
    assert [len(result.hops) for result in results] == [1, 2]


# The arguments.


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_hops", -1),
        ("max_hops", 9),
        ("max_hops", True),
        ("max_hops", 1.0),
        ("max_followups", 0),
        ("max_followups", 17),
        ("max_followups", "3"),
    ],
)
def test_bounds_out_of_range_are_refused(bm25_retriever, field, value):
    with pytest.raises(InvalidRequestError) as info:
        _follow_up(bm25_retriever(DOCUMENTS), LookupChatModel(), **{field: value})
    assert info.value.field == field


def test_the_bounds_at_their_limits_are_accepted(bm25_retriever):
    answerer = _follow_up(
        bm25_retriever(DOCUMENTS), LookupChatModel(), max_hops=8, max_followups=16
    )
    assert (answerer.max_hops, answerer.max_followups) == (8, 16)
    single = _follow_up(bm25_retriever(DOCUMENTS), LookupChatModel(), max_hops=0, max_followups=1)
    assert (single.max_hops, single.max_followups) == (0, 1)


def test_a_retriever_and_an_answerer_of_the_wrong_kind_are_refused(bm25_retriever):
    answerer = EvidenceAnswerer(llm=LookupChatModel())
    with pytest.raises(InvalidRequestError) as info:
        FollowUpAnswerer(lambda query: [], answerer)  # type: ignore[arg-type]
    assert info.value.field == "retriever"
    with pytest.raises(InvalidRequestError) as info:
        FollowUpAnswerer(bm25_retriever(DOCUMENTS), LookupChatModel())  # type: ignore[arg-type]
    assert info.value.field == "answerer"


def test_a_question_that_is_not_a_string_or_a_retrieval_that_is_not_a_list_is_refused():
    model = LookupChatModel()
    with pytest.raises(InvalidRequestError) as info:
        _follow_up(RunnableLambda(lambda query: []), model).invoke({"question": "Q?"})  # type: ignore[arg-type]
    assert info.value.field == "question"
    with pytest.raises(InvalidRequestError) as info:
        _follow_up(RunnableLambda(lambda query: "text"), model).invoke("Q?")
    assert info.value.field == "retriever"
    assert model.calls == []


# The graph and the trace.


def test_graph_is_the_compiled_langgraph_graph(bm25_retriever):
    answerer = _follow_up(bm25_retriever(DOCUMENTS), LookupChatModel())
    assert isinstance(answerer.graph, CompiledStateGraph)
    assert {"retrieve", "answer"} <= set(answerer.graph.get_graph().nodes)


class Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.parents: dict[UUID, UUID | None] = {}
        self.names: dict[UUID, str | None] = {}
        self.retrievers: list[UUID] = []
        self.chat_models: list[UUID] = []

    def _start(self, run_id: UUID, parent_run_id: UUID | None, name: str | None) -> None:
        self.parents[run_id] = parent_run_id
        self.names[run_id] = name

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kwargs):
        self._start(run_id, parent_run_id, kwargs.get("name"))

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, **kwargs):
        self._start(run_id, parent_run_id, kwargs.get("name"))
        self.retrievers.append(run_id)

    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, **kwargs):
        self._start(run_id, parent_run_id, kwargs.get("name"))
        self.chat_models.append(run_id)

    def ancestors(self, run_id: UUID) -> list[str | None]:
        names = []
        parent = self.parents[run_id]
        while parent is not None:
            names.append(self.names[parent])
            parent = self.parents[parent]
        return names


def test_every_hops_retrieval_and_answer_are_in_the_trace_under_the_run(bm25_retriever):
    recorder = Recorder()
    model = LookupChatModel(needs=("review", "room"))

    _follow_up(bm25_retriever(DOCUMENTS, k=1), model).invoke(
        QUESTION, config={"callbacks": [recorder]}
    )

    (root,) = [run for run, parent in recorder.parents.items() if parent is None]
    assert recorder.names[root] == "FollowUpAnswerer"
    assert len(recorder.retrievers) == 2
    assert len(recorder.chat_models) == 2
    for run in recorder.retrievers + recorder.chat_models:
        assert recorder.ancestors(run)[-2:] == ["FollowUpGraph", "FollowUpAnswerer"]
    for run in recorder.chat_models:
        assert recorder.ancestors(run)[0] == "EvidenceAnswerer"


# Without the extra.


def test_importing_the_package_does_not_import_langgraph():
    code = (
        "import sys, langchain_evidence_first\n"
        "leaked = sorted(m for m in sys.modules if m.split('.')[0] == 'langgraph')\n"
        "assert not leaked, leaked\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_without_langgraph_importing_hops_names_the_extra():
    code = (
        "import sys\n"
        "sys.modules['langgraph'] = None\n"
        "import langchain_evidence_first\n"
        "try:\n"
        "    import langchain_evidence_first.hops\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert 'pip install "langchain-evidence-first[graph]"' in result.stdout


class GuessingChatModel(LookupChatModel):
    """Answers "Room 4B" at once, citing the review, which does not say 4B; with the room
    document sent, cites it too."""

    def _ledger(self, sources: dict[str, Any]) -> dict[str, Any]:
        quotes = {"review": "The launch review is run", "room": "meets in room 4B"}
        citations = [(i, q) for i, q in quotes.items() if i in sources]
        room = _support.fact(*citations, subject="platform team", relation="meets in", obj="4B")
        return _support.ledger_dict([room], answer="Room 4B.")


def test_after_an_abstention_the_engine_decided_it_retrieves_for_the_partial_facts():
    # "4B" is not in the cited review: with unsupported facts abstaining, hop 0 holds its
    # answer back, and the follow-up asks for the fact's subject and object instead of a
    # missing-evidence item the model never wrote.
    by_query = {QUESTION: [REVIEW], "platform team 4B": [ROOM]}
    retriever = Recording(lambda query: by_query.get(query, []))
    model = GuessingChatModel()

    result = _follow_up(retriever.runnable, model, unsupported_facts="abstain").invoke(QUESTION)

    first, second = result.hops
    assert first.status == "insufficient_evidence"
    (missing,) = first.missing_evidence
    assert "a fact's words are not in its cited text" in missing
    assert retriever.queries == [QUESTION, "platform team 4B"]
    assert second.queries == ("platform team 4B",)
    assert result.answer.status == "answered"
    assert result.answer.used_source_ids == ("review", "room")
