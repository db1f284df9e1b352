"""The strict model call through a LlamaIndex LLM: once, no tools, no retries, bounded, JSON."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import openai
import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from pydantic import BaseModel

from evidence_first import (
    AnswerTimeoutError,
    InvalidRequestError,
    ModelCallError,
)
from evidence_first._sending.citing.quote import QuoteStyle
from evidence_first._sending.schema import ledger_schema
from evidence_first.adapters import AnswerOptions
from llama_index.response_synthesizers.evidence_first import (
    EvidenceSynthesizer,
    UnenforcedSettingsWarning,
)

QUESTION = "When is the Apollo launch?"
IGNORE_UNENFORCED = pytest.mark.filterwarnings(
    "ignore::llama_index.response_synthesizers.evidence_first.UnenforcedSettingsWarning"
)


@pytest.fixture
def notes_message(launch_nodes) -> str:
    """A user message whose sources are the launch nodes, to script a ledger citing them."""
    sources = [{"id": n.node.node_id, "text": n.node.get_content()} for n in launch_nodes]
    return "Sources:\n" + json.dumps(sources, indent=0)


async def synthesize(synthesizer: EvidenceSynthesizer, nodes, mode: str):
    if mode == "sync":
        return synthesizer.synthesize(QUESTION, nodes)
    return await synthesizer.asynthesize(QUESTION, nodes)


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


@MODES
async def test_the_request_carries_the_output_limit_temperature_timeout_and_json_schema(
    mode, fake_openai, launch_nodes
):
    llm = fake_openai.llm(max_tokens=500, temperature=0.7, timeout=600.0)
    synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=321, timeout=12.5)

    response = await synthesize(synthesizer, launch_nodes, mode)

    assert response.metadata["evidence_answer"].status == "answered"
    (body,) = fake_openai.bodies
    assert body["max_tokens"] == 321
    assert body["temperature"] == 0.0
    assert body["stream"] is False
    assert "tools" not in body
    assert "tool_choice" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "evidence_ledger"
    assert response_format["json_schema"]["strict"] is True
    schema = response_format["json_schema"]["schema"]
    citation = schema["properties"]["facts"]["items"]["properties"]["citations"]["items"]
    assert citation["properties"]["source_id"]["enum"] == ["notes", "budget"]
    assert fake_openai.requests[0].extensions["timeout"]["read"] == 12.5


@MODES
async def test_additional_kwargs_cannot_override_the_strict_settings(
    mode, fake_openai, launch_nodes
):
    llm = fake_openai.llm(
        additional_kwargs={
            "max_tokens": 9999,
            "temperature": 1.5,
            "response_format": {"type": "text"},
            "stream": True,
            "seed": 7,
            "extra_body": {"top_k": 20, "response_format": {"type": "text"}},
        }
    )
    synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=256)

    await synthesize(synthesizer, launch_nodes, mode)

    (body,) = fake_openai.bodies
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    assert body["stream"] is False
    assert body["seed"] == 7  # settings this call does not control are kept
    assert body["top_k"] == 20
    assert llm.additional_kwargs["extra_body"] == {"top_k": 20, "response_format": {"type": "text"}}


@pytest.mark.parametrize("status", [500, 429])
@MODES
async def test_a_provider_error_costs_exactly_one_request(status, mode, fake_openai, launch_nodes):
    fake_openai.status = status
    llm = fake_openai.llm()
    assert llm.max_retries == 3  # LlamaIndex's default, which would cost 12 requests
    synthesizer = EvidenceSynthesizer(llm=llm)

    with pytest.raises(ModelCallError) as raised:
        await synthesize(synthesizer, launch_nodes, mode)

    assert fake_openai.attempts == 1
    assert raised.value.cause_type.startswith("openai.")
    assert "crafted failure" not in str(raised.value)


@MODES
async def test_a_client_the_llm_already_cached_is_not_reused_with_its_retries(
    mode, fake_openai, launch_nodes
):
    llm = fake_openai.llm()
    # Ordinary use first: OpenAILike builds its client lazily and caches it with max_retries=3.
    if mode == "sync":
        llm.chat([ChatMessage(role="user", content="hi")])
    else:
        await llm.achat([ChatMessage(role="user", content="hi")])
    cached = llm._client if mode == "sync" else llm._aclient
    assert cached is not None
    assert cached.max_retries == 3
    fake_openai.requests.clear()
    fake_openai.status = 500
    synthesizer = EvidenceSynthesizer(llm=llm)

    with pytest.raises(ModelCallError):
        await synthesize(synthesizer, launch_nodes, mode)

    assert fake_openai.attempts == 1
    # The caller's LLM and its client are left exactly as they were.
    assert (llm._client if mode == "sync" else llm._aclient) is cached
    assert cached.max_retries == 3
    assert llm.max_retries == 3


@MODES
async def test_a_caller_supplied_openai_client_is_used_without_its_retries(
    mode, fake_openai, launch_nodes
):
    transport = httpx.MockTransport(fake_openai.handle)
    base = {"base_url": "http://caller-client.test/v1", "api_key": "sk-test", "max_retries": 5}
    llm = fake_openai.llm(
        openai_client=openai.OpenAI(**base, http_client=httpx.Client(transport=transport)),
        async_openai_client=openai.AsyncOpenAI(
            **base, http_client=httpx.AsyncClient(transport=transport)
        ),
    )
    fake_openai.status = 500
    synthesizer = EvidenceSynthesizer(llm=llm)

    with pytest.raises(ModelCallError):
        await synthesize(synthesizer, launch_nodes, mode)

    assert fake_openai.attempts == 1
    # The caller's client (its base URL) was used, not one rebuilt from the LLM's fields.
    assert fake_openai.requests[0].url.host == "caller-client.test"


@MODES
async def test_a_client_timeout_is_an_answer_timeout_after_one_attempt(
    mode, fake_openai, launch_nodes
):
    fake_openai.raise_error = httpx.ReadTimeout("timed out")
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm(), timeout=5)

    with pytest.raises(AnswerTimeoutError) as raised:
        await synthesize(synthesizer, launch_nodes, mode)

    assert raised.value.timeout == 5
    assert fake_openai.attempts == 1


@MODES
async def test_a_response_with_tool_calls_is_invalid(mode, fake_openai, launch_nodes):
    tool_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "search", "arguments": "{}"},
    }
    fake_openai.reply = lambda body: {
        "message": {"role": "assistant", "content": None, "tool_calls": [tool_call]},
    }
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm())

    response = await synthesize(synthesizer, launch_nodes, mode)

    answer = response.metadata["evidence_answer"]
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("tool_call_not_allowed",)
    assert response.response == (
        "No answer (invalid_response). The model's output was rejected: tool_call_not_allowed."
    )


@MODES
async def test_output_cut_at_the_token_limit_is_truncated_not_parsed(
    mode, fake_openai, launch_nodes
):
    fake_openai.reply = lambda body: {
        "message": {"role": "assistant", "content": '{"facts": [{"subject": "lau'},
        "finish_reason": "length",
    }
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm())

    response = await synthesize(synthesizer, launch_nodes, mode)

    answer = response.metadata["evidence_answer"]
    assert answer.status == "invalid_response"
    assert answer.reason_codes == ("output_truncated",)


@MODES
async def test_reasoning_kept_apart_by_the_framework_is_not_parsed(mode, fake_openai, launch_nodes):
    answer_launch = fake_openai.answer_launch

    def reply(body):
        message = answer_launch(body)["message"]
        return {"message": {**message, "reasoning_content": "Let me think. {not json"}}

    fake_openai.reply = reply
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm())

    response = await synthesize(synthesizer, launch_nodes, mode)

    answer = response.metadata["evidence_answer"]
    assert answer.status == "answered"
    assert "Let me think" not in answer.raw_response
    assert answer.usage.input_tokens == 11
    assert answer.usage.output_tokens == 7


def test_an_openai_like_completion_model_is_refused_with_what_to_change(fake_openai):
    llm = fake_openai.llm(is_chat_model=False)

    with pytest.raises(InvalidRequestError, match="is_chat_model=True") as raised:
        EvidenceSynthesizer(llm=llm)

    assert raised.value.field == "llm"
    assert fake_openai.attempts == 0


@pytest.mark.parametrize("key", ["tools", "tool_choice", "functions"])
def test_an_llm_configured_with_tools_is_refused(key, fake_openai):
    llm = fake_openai.llm(additional_kwargs={key: [{"type": "function"}]})

    with pytest.raises(InvalidRequestError, match="tools"):
        EvidenceSynthesizer(llm=llm)


def test_a_structured_llm_is_refused_with_what_to_pass_instead(fake_openai):
    class Launch(BaseModel):
        date: str

    structured = fake_openai.llm().as_structured_llm(Launch)

    with pytest.raises(InvalidRequestError, match=r"structured_llm\.llm"):
        EvidenceSynthesizer(llm=structured)


def test_tools_added_after_construction_are_refused_before_any_request(fake_openai, launch_nodes):
    llm = fake_openai.llm()
    synthesizer = EvidenceSynthesizer(llm=llm)
    llm.additional_kwargs["tools"] = [{"type": "function"}]

    with pytest.raises(InvalidRequestError, match="tools"):
        synthesizer.synthesize(QUESTION, launch_nodes)

    assert fake_openai.attempts == 0


class _ScriptedLLM(CustomLLM):
    """An LLM outside the allow-list that answers from the launch notes."""

    text: str = ""
    delay: float = 0.0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages, **kwargs) -> ChatResponse:
        time.sleep(self.delay)
        return ChatResponse(message=ChatMessage(role="assistant", content=self.text))

    @llm_completion_callback()
    def complete(self, prompt, formatted=False, **kwargs) -> CompletionResponse:
        raise AssertionError("chat only")

    @llm_completion_callback()
    def stream_complete(self, prompt, formatted=False, **kwargs):
        raise AssertionError("no streaming")


def test_an_unknown_llm_that_retries_is_refused():
    class RetryingLLM(_ScriptedLLM):
        max_retries: int = 3

    with pytest.raises(InvalidRequestError, match="max_retries=0") as raised:
        EvidenceSynthesizer(llm=RetryingLLM())
    # The same rule, and the same words, as the LangChain integration's.
    assert str(raised.value) == (
        "RetryingLLM retries failed calls (max_retries=3) and evidence-first cannot turn "
        "that off for this class; construct it with max_retries=0"
    )


def test_an_unknown_llm_warns_once_per_class_naming_what_is_not_enforced(
    launch_nodes, ledger_for, notes_message
):
    class FreshLLM(_ScriptedLLM):
        max_retries: int = 0

    ledger = ledger_for(notes_message)

    def build_two_and_answer():
        synthesizers = [EvidenceSynthesizer(llm=FreshLLM(text=ledger)) for _ in range(2)]
        return [s.synthesize(QUESTION, launch_nodes) for s in synthesizers]

    with pytest.warns(UnenforcedSettingsWarning) as caught:
        answers = build_two_and_answer()

    assert len(caught) == 1
    message = str(caught[0].message)
    assert "FreshLLM" in message
    for setting in ("max_tokens", "temperature", "timeout", "JSON output"):
        assert setting in message
    assert "retries" not in message  # max_retries=0 is visible on this class
    assert caught[0].filename == __file__
    assert [a.metadata["evidence_answer"].status for a in answers] == ["answered", "answered"]


def test_the_warning_says_retries_cannot_be_ruled_out_when_the_class_has_no_setting():
    class OpaqueLLM(_ScriptedLLM):
        pass

    with pytest.warns(UnenforcedSettingsWarning, match="retries cannot be ruled out"):
        EvidenceSynthesizer(llm=OpaqueLLM())


@IGNORE_UNENFORCED
async def test_a_custom_llm_without_native_async_does_not_block_the_event_loop(
    launch_nodes, ledger_for, notes_message
):
    ledger = ledger_for(notes_message)
    synthesizer = EvidenceSynthesizer(llm=_ScriptedLLM(text=ledger, delay=0.3))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        response = await synthesizer.asynthesize(QUESTION, launch_nodes)
    finally:
        ticker.cancel()

    assert response.metadata["evidence_answer"].status == "answered"
    # A blocked loop would not tick at all during the LLM's 0.3 s.
    assert ticks >= 10


@IGNORE_UNENFORCED
def test_an_unknown_llm_is_called_with_the_prompt_alone(launch_nodes, ledger_llm):
    synthesizer = EvidenceSynthesizer(llm=ledger_llm, max_output_tokens=99)

    response = synthesizer.synthesize(QUESTION, launch_nodes)

    assert response.metadata["evidence_answer"].status == "answered"
    (messages,) = ledger_llm.received
    assert [m.role.value for m in messages] == ["system", "user"]
    assert '"id": "notes"' in messages[1].content


@IGNORE_UNENFORCED
def test_an_unknown_llm_output_is_still_bounded_on_our_side(launch_nodes):
    synthesizer = EvidenceSynthesizer(llm=_ScriptedLLM(text="x" * 200), max_response_chars=100)

    response = synthesizer.synthesize(QUESTION, launch_nodes)

    assert response.metadata["evidence_answer"].reason_codes == ("response_too_large",)


@IGNORE_UNENFORCED
def test_an_unknown_llm_that_ignores_the_timeout_is_abandoned(launch_nodes):
    synthesizer = EvidenceSynthesizer(llm=_ScriptedLLM(text="{}", delay=1.0), timeout=0.2)

    started = time.monotonic()
    with pytest.raises(AnswerTimeoutError):
        synthesizer.synthesize(QUESTION, launch_nodes)

    assert time.monotonic() - started < 0.9


def test_the_caller_llm_is_not_modified_by_a_call(fake_openai, launch_nodes):
    llm = fake_openai.llm(max_tokens=50, temperature=0.7, additional_kwargs={"seed": 7})
    before = llm.model_dump()
    synthesizer = EvidenceSynthesizer(llm=llm)

    synthesizer.synthesize(QUESTION, launch_nodes)

    assert llm.model_dump() == before
    assert llm.max_retries == 3
    assert fake_openai.bodies[0]["max_tokens"] == 50  # the LLM's own, smaller limit


async def test_async_synthesis_awaits_the_native_achat_on_the_async_client(
    fake_openai, launch_nodes
):
    def no_sync_calls(request: httpx.Request) -> httpx.Response:
        raise AssertionError("the async path must not use the sync client")

    llm = fake_openai.llm(http_client=httpx.Client(transport=httpx.MockTransport(no_sync_calls)))
    synthesizer = EvidenceSynthesizer(llm=llm)

    response = await synthesizer.asynthesize(QUESTION, launch_nodes)

    assert response.metadata["evidence_answer"].status == "answered"
    assert fake_openai.attempts == 1


@MODES
async def test_without_client_reuse_each_call_builds_a_retry_free_client(
    mode, fake_openai, launch_nodes
):
    fake_openai.status = 500
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm(reuse_client=False))

    with pytest.raises(ModelCallError):
        await synthesize(synthesizer, launch_nodes, mode)

    assert fake_openai.attempts == 1


@MODES
async def test_calls_go_through_the_client_the_llm_caches(mode, fake_openai, launch_nodes):
    llm = fake_openai.llm()
    synthesizer = EvidenceSynthesizer(llm=llm)

    await synthesize(synthesizer, launch_nodes, mode)
    cached = llm._client if mode == "sync" else llm._aclient
    await synthesize(synthesizer, launch_nodes, mode)

    # One client (one connection pool) serves every call, as in the LLM's own use; only a
    # retry-free view of it is used for these calls.
    assert cached is not None
    assert (llm._client if mode == "sync" else llm._aclient) is cached
    assert cached.max_retries == 3
    assert fake_openai.attempts == 2


# Back doors into the strict call through the LLM's own settings.


@pytest.mark.parametrize("key", ["tools", "tool_choice", "functions", "parallel_tool_calls"])
def test_tools_inside_extra_body_are_refused(key, fake_openai):
    llm = fake_openai.llm(additional_kwargs={"extra_body": {key: [{"type": "function"}]}})

    with pytest.raises(InvalidRequestError, match="tools") as raised:
        EvidenceSynthesizer(llm=llm)

    assert raised.value.field == "llm"
    assert fake_openai.attempts == 0


@MODES
async def test_strict_settings_inside_extra_body_cannot_override_ours(
    mode, fake_openai, launch_nodes
):
    llm = fake_openai.llm(
        additional_kwargs={
            "extra_body": {
                "max_tokens": 99999,
                "max_completion_tokens": 99999,
                "temperature": 1.7,
                "n": 3,
                "stream": True,
                "top_k": 20,
            }
        }
    )
    synthesizer = EvidenceSynthesizer(llm=llm, max_output_tokens=321)

    await synthesize(synthesizer, launch_nodes, mode)

    (body,) = fake_openai.bodies
    assert body["max_tokens"] == 321
    assert "max_completion_tokens" not in body
    assert body["temperature"] == 0.0
    assert body.get("n", 1) == 1
    assert body["stream"] is False
    assert body["top_k"] == 20


@pytest.mark.parametrize(
    "settings",
    [{"max_tokens": 200}, {"additional_kwargs": {"extra_body": {"max_tokens": 200}}}],
    ids=["field", "extra_body"],
)
def test_the_smaller_output_limit_is_sent_and_the_schema_follows_it(
    settings, fake_openai, launch_nodes
):
    synthesizer = EvidenceSynthesizer(llm=fake_openai.llm(**settings), max_output_tokens=2048)

    response = synthesizer.synthesize(QUESTION, launch_nodes)

    (body,) = fake_openai.bodies
    assert body["max_tokens"] == 200
    assert response.metadata["evidence_answer"].budget.max_output_tokens == 200
    schema = body["response_format"]["json_schema"]["schema"]
    expected = ledger_schema(QuoteStyle().shape(None), AnswerOptions(max_output_tokens=200))[
        "properties"
    ]["facts"]["maxItems"]
    assert schema["properties"]["facts"]["maxItems"] == expected
