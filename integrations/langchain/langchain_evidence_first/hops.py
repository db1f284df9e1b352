"""Bounded follow-up retrieval: when an answer abstains, retrieve for what it says is missing.

A LangGraph graph around :class:`~langchain_evidence_first.EvidenceAnswerer`; it needs
``pip install "langchain-evidence-first[graph]"``.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import patch_config
from pydantic import BaseModel, ConfigDict

from evidence_first import (
    AnswerStatus,
    EvidenceAnswer,
    InvalidRequestError,
    OmissionReason,
)
from evidence_first.adapters import checked_int
from langchain_evidence_first._union import Retrieval, merge
from langchain_evidence_first.answerer import EvidenceAnswerer

try:
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.state import CompiledStateGraph
except ImportError as exc:
    _msg = (
        "langchain_evidence_first.hops runs on LangGraph, which is not installed: "
        'pip install "langchain-evidence-first[graph]"'
    )
    raise ImportError(_msg) from exc

__all__ = ["FollowUpAnswerer", "HopTrace", "HopsResult"]

MAX_HOPS = 8
MAX_FOLLOWUPS = 16


class HopTrace(BaseModel):
    """One hop: what it retrieved, what it added to the sources, and how its answer went.

    Attributes:
        hop: 0 for the first retrieval, then 1, 2... per round of follow-up queries.
        queries: The question for hop 0; the follow-up queries, verbatim, after.
        retrieved_ids: The source ID of every item this hop's retrievals returned, query by
            query, in order, repeats included. An item without an ID is named by its place in
            the sources (``doc-3``), as the answerer names it.
        new_source_ids: The sources this hop added to those offered to the answerer.
        dropped_source_ids: New sources left out because the sources reached 64, the core's
            limit.
        status: This hop's answer status; ``None`` when the hop found nothing new, so it ended
            without answering.
        model_called: Whether this hop's answer called the model.
        used_source_ids: This hop's answer's ``used_source_ids``.
        omissions: This hop's answer's ``omissions``.
        missing_evidence: This hop's answer's ``missing_evidence``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    hop: int
    queries: tuple[str, ...]
    retrieved_ids: tuple[str, ...]
    new_source_ids: tuple[str, ...]
    dropped_source_ids: tuple[str, ...]
    status: AnswerStatus | None
    model_called: bool
    used_source_ids: tuple[str, ...]
    omissions: dict[str, OmissionReason]
    missing_evidence: tuple[str, ...]


class HopsResult(BaseModel):
    """The outcome of a :class:`FollowUpAnswerer` run.

    Attributes:
        answer: The last answer made, exactly as the answerer returned it.
        hops: One trace per hop, hop 0 first.
        model_calls: How many answers called the model (at most ``max_hops + 1``).
        question: The question asked; every hop answered this question.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    answer: EvidenceAnswer
    hops: tuple[HopTrace, ...]
    model_calls: int
    question: str


def _trace(retrieval: Retrieval, answer: EvidenceAnswer | None) -> HopTrace:
    return HopTrace(
        hop=retrieval.hop,
        queries=retrieval.queries,
        retrieved_ids=retrieval.retrieved_ids,
        new_source_ids=retrieval.new_source_ids,
        dropped_source_ids=retrieval.dropped_source_ids,
        status=None if answer is None else answer.status,
        model_called=answer is not None and answer.model_called,
        used_source_ids=() if answer is None else answer.used_source_ids,
        omissions={} if answer is None else dict(answer.omissions),
        missing_evidence=() if answer is None else answer.missing_evidence,
    )


class _State(TypedDict, total=False):
    question: str
    # What the next answer is offered: hop 0's documents first, each hop's new ones after.
    sources: list[Any]
    retrieval: Retrieval
    answer: EvidenceAnswer
    hops: Annotated[list[HopTrace], operator.add]


class FollowUpAnswerer(Runnable[str, HopsResult]):
    """Answer a question, retrieving again for what an abstaining answer says is missing.

    Hop 0 retrieves for the question and answers it. While the answer is
    ``insufficient_evidence`` and follow-ups remain, the first ``max_followups`` non-blank
    ``missing_evidence`` items become queries, as written (no model call makes them), or,
    after an abstention the engine decided (``abstention`` other than ``"reader"``, such as
    the reader's confidence below its floor), each partial fact's subject and object; what
    they retrieve joins the sources, deduplicated by source ID (``Document.id``, then
    ``metadata[answerer.id_key]``; by text for items without one), earlier sources first and
    at most 64 in all; and the original question is answered again from all of them. It
    stops once an answer is ``answered`` or ``invalid_response``, no query is left, nothing
    new was retrieved, or ``max_hops`` follow-ups were made: at most ``max_hops + 1`` model
    calls. The result keeps the last answer as is, and a trace of every hop.

    The same retriever and the same answerer (scope, ``question_time``, ``min_score``...)
    serve every hop. Sources past the answerer's token budget are omitted as
    ``over_budget`` as usual, so a follow-up's sources can only be sent if the budget leaves
    room after the earlier ones.

    Example:
        .. code-block:: python

            answerer = FollowUpAnswerer(retriever, EvidenceAnswerer(llm=llm), max_hops=2)
            result = answerer.invoke("Which room is the launch review in?")
            result.answer.status, [hop.queries for hop in result.hops]

    Args:
        retriever: A ``BaseRetriever``, or any ``Runnable`` from a query to a list of
            Documents (or of Evidence, mappings or strings, as the answerer accepts).
        answerer: The answerer that makes every answer. It must return the answer itself
            (``output="answer"``, its default): the result holds each hop's
            ``EvidenceAnswer``.
        max_hops: Rounds of follow-up retrieval, 0 to 8; 0 answers once.
        max_followups: Follow-up queries per round, 1 to 16.

    Raises:
        InvalidRequestError: An argument is out of range or of the wrong type (``field``
            names it), or the answerer returns messages (``output="message"``); when
            invoked, the input is not a string (``question``) or the retriever returned
            something other than a list (``retriever``).
    """

    def __init__(
        self,
        retriever: BaseRetriever | Runnable[str, Sequence[Any]],
        answerer: EvidenceAnswerer,
        *,
        max_hops: int = 2,
        max_followups: int = 3,
    ) -> None:
        if not isinstance(retriever, Runnable):
            msg = "retriever must be a BaseRetriever or a Runnable from a query to documents"
            raise InvalidRequestError(msg, field="retriever")
        if not isinstance(answerer, EvidenceAnswerer):
            msg = "answerer must be an EvidenceAnswerer"
            raise InvalidRequestError(msg, field="answerer")
        if answerer.output != "answer":
            msg = (
                'answerer must return the answer itself (output="answer"), not a message: '
                "the result holds each hop's EvidenceAnswer; pass "
                'answerer.model_copy(update={"output": "answer"})'
            )
            raise InvalidRequestError(msg, field="answerer")
        self._retriever: Runnable[str, Any] = retriever
        self._answerer = answerer
        self._max_hops = checked_int("max_hops", max_hops, 0, MAX_HOPS)
        self._max_followups = checked_int("max_followups", max_followups, 1, MAX_FOLLOWUPS)
        self._graph = self._build()

    @property
    def retriever(self) -> Runnable[str, Any]:
        """The retriever every hop uses."""
        return self._retriever

    @property
    def answerer(self) -> EvidenceAnswerer:
        """The answerer every hop uses."""
        return self._answerer

    @property
    def max_hops(self) -> int:
        """Rounds of follow-up retrieval at most."""
        return self._max_hops

    @property
    def max_followups(self) -> int:
        """Follow-up queries per round at most."""
        return self._max_followups

    @property
    def graph(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The compiled LangGraph graph each run executes."""
        return self._graph

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> HopsResult:
        """Answer one question."""
        return self._call_with_config(self._run, input, config, **kwargs)

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> HopsResult:
        """Answer one question without blocking the event loop."""
        return await self._acall_with_config(self._arun, input, config, **kwargs)

    def _run(self, input: str, run_manager: Any, config: RunnableConfig) -> HopsResult:
        question = _question(input)
        state = self._graph.invoke(_start(question), self._child(config, run_manager))
        return _result(question, state)

    async def _arun(self, input: str, run_manager: Any, config: RunnableConfig) -> HopsResult:
        question = _question(input)
        state = await self._graph.ainvoke(_start(question), self._child(config, run_manager))
        return _result(question, state)

    def _child(self, config: RunnableConfig, run_manager: Any) -> RunnableConfig:
        # Each hop is two graph steps, so the bound fixes the steps a run needs; a caller's
        # recursion_limit, meant for graphs of their own, would cut it short or mean nothing.
        steps = 2 * (self._max_hops + 1) + 1
        return patch_config(config, callbacks=run_manager.get_child(), recursion_limit=steps)

    def _build(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        graph = StateGraph(_State)
        graph.add_node(
            "retrieve", RunnableLambda(self._retrieve, afunc=self._aretrieve, name="retrieve")
        )
        graph.add_node("answer", RunnableLambda(self._answer, afunc=self._aanswer, name="answer"))
        graph.add_edge(START, "retrieve")
        graph.add_conditional_edges("retrieve", self._after_retrieval, ["answer", END])
        graph.add_conditional_edges("answer", self._after_answer, ["retrieve", END])
        return graph.compile(name="FollowUpGraph")

    def _queries(self, state: _State) -> tuple[str, ...]:
        if not state["hops"]:
            return (state["question"],)
        return _follow_up_queries(state["answer"], self._max_followups)

    def _retrieve(self, state: _State, config: RunnableConfig) -> dict[str, Any]:
        queries = self._queries(state)
        return self._gathered(state, queries, self._retriever.batch(list(queries), config))

    async def _aretrieve(self, state: _State, config: RunnableConfig) -> dict[str, Any]:
        queries = self._queries(state)
        found = await self._retriever.abatch(list(queries), config)
        return self._gathered(state, queries, found)

    def _gathered(
        self, state: _State, queries: tuple[str, ...], found: list[Any]
    ) -> dict[str, Any]:
        hop = len(state["hops"])
        sources, retrieval = merge(hop, queries, state["sources"], found, self._answerer.id_key)
        update: dict[str, Any] = {"sources": sources, "retrieval": retrieval}
        if hop and not retrieval.new_source_ids:
            # The next answer would see exactly what the last one saw: the hop ends unanswered.
            update["hops"] = [_trace(retrieval, None)]
        return update

    def _after_retrieval(self, state: _State) -> str:
        retrieval = state["retrieval"]
        return "answer" if retrieval.hop == 0 or retrieval.new_source_ids else END

    def _answer(self, state: _State, config: RunnableConfig) -> dict[str, Any]:
        answer = _evidence_answer(self._answerer.invoke(_answer_input(state), config))
        return {"answer": answer, "hops": [_trace(state["retrieval"], answer)]}

    async def _aanswer(self, state: _State, config: RunnableConfig) -> dict[str, Any]:
        answer = _evidence_answer(await self._answerer.ainvoke(_answer_input(state), config))
        return {"answer": answer, "hops": [_trace(state["retrieval"], answer)]}

    def _after_answer(self, state: _State) -> str:
        followups_done = len(state["hops"]) - 1
        if followups_done >= self._max_hops:
            return END
        return "retrieve" if _follow_up_queries(state["answer"], self._max_followups) else END


def _follow_up_queries(answer: EvidenceAnswer, limit: int) -> tuple[str, ...]:
    """What a follow-up retrieves for: the model's missing evidence, or the facts it found.

    The model's own missing-evidence items, verbatim (rewording them would take another model
    call). An abstention the engine decided (the reader's confidence below its floor, an
    answer resting on superseded sources or on unsupported facts) states no missing evidence
    worth a query, and the question was already asked: it searches for each partial fact's
    subject and object, which lead to what the question also needs. An exact repeat would only
    retrieve the same documents again.
    """
    if answer.status != "insufficient_evidence":
        return ()
    if answer.abstention == "reader":
        items = list(answer.missing_evidence)
    else:
        items = [f"{fact.subject} {fact.object}" for fact in answer.facts]
    return tuple([item for item in dict.fromkeys(items) if item.strip()][:limit])


def _evidence_answer(output: object) -> EvidenceAnswer:
    # The answerer was checked to return answers (output="answer") when this was built.
    if not isinstance(output, EvidenceAnswer):
        msg = f"the answerer returned {type(output).__name__}, not an EvidenceAnswer"
        raise TypeError(msg)
    return output


def _question(input: object) -> str:
    if not isinstance(input, str):
        msg = f"the input must be the question as a string, got {type(input).__name__}"
        raise InvalidRequestError(msg, field="question")
    return input


def _start(question: str) -> _State:
    return {"question": question, "sources": [], "hops": []}


def _answer_input(state: _State) -> dict[str, Any]:
    return {"question": state["question"], "sources": list(state["sources"])}


def _result(question: str, state: Mapping[str, Any]) -> HopsResult:
    hops = tuple(state["hops"])
    return HopsResult(
        answer=state["answer"],
        hops=hops,
        model_calls=sum(hop.model_called for hop in hops),
        question=question,
    )
