"""Canaries: what ``_anthropic``, ``_google`` and ``_ollama`` rely on in their frameworks.

Each fails loudly on an upgrade that renames or changes it, and asserts the behaviour that
matters (how many requests a failure costs, what reaches the wire), not only names.
"""

from __future__ import annotations

import inspect

import anthropic
import httpx
import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.llms.anthropic import Anthropic
from llama_index.llms.google_genai import GoogleGenAI
from llama_index.llms.ollama import Ollama
from ollama import ResponseError

from evidence_first import InvalidRequestError, ModelRequest
from evidence_first._sending.citing.quote import QuoteStyle
from evidence_first._sending.schema import ledger_schema
from evidence_first.adapters import schema_in
from llama_index.response_synthesizers.evidence_first import (
    EvidenceSynthesizer,
    UnenforcedSettingsWarning,
)
from llama_index.response_synthesizers.evidence_first._anthropic import (
    PROVIDER,
    sdk_takes,
    strict_anthropic_call,
)
from llama_index.response_synthesizers.evidence_first._google import PROVIDER as GOOGLE
from llama_index.response_synthesizers.evidence_first._google import strict_google_call
from llama_index.response_synthesizers.evidence_first._ollama import PROVIDER as OLLAMA
from llama_index.response_synthesizers.evidence_first._ollama import strict_ollama_call

REQUEST = ModelRequest(
    system="system",
    user="user",
    max_tokens=16,
    json_schema={"type": "object"},
    timeout=5.0,
    prompt_version="test",
)
# Ollama's format is the ledger's two-branch form, which needs the ledger's own schema.
LEDGER_REQUEST = ModelRequest(
    system="system",
    user="user",
    max_tokens=16,
    json_schema=ledger_schema(QuoteStyle().shape(None)),
    timeout=5.0,
    prompt_version="test",
)
MESSAGES = [ChatMessage(role="user", content="hi")]


# Anthropic


def test_anthropic_builds_retrying_clients_in_private_attributes_that_copies_share():
    for name in ("_client", "_aclient"):
        assert name in Anthropic.__private_attributes__
    llm = Anthropic(model="claude-sonnet-4-5", api_key="sk-ant-test")
    assert isinstance(llm._client, anthropic.Anthropic)
    assert isinstance(llm._aclient, anthropic.AsyncAnthropic)
    assert llm.max_retries == llm._client.max_retries == llm._aclient.max_retries == 10
    # Why the strict copy is given clients of its own: a copy shares the retrying ones.
    copy = llm.model_copy(update={"max_retries": 0})
    assert copy._client is llm._client


def test_the_strict_anthropic_copy_holds_retry_free_views_of_the_callers_clients():
    llm = Anthropic(model="claude-sonnet-4-5", api_key="sk-ant-test", base_url="http://x.test")

    strict, _ = strict_anthropic_call(REQUEST, llm, False, PROVIDER.profile(llm))

    for own, theirs in ((strict._client, llm._client), (strict._aclient, llm._aclient)):
        assert (own.max_retries, own.timeout) == (0, 5.0)
        assert own.base_url == theirs.base_url
        assert own._client is theirs._client  # one connection pool
        assert theirs.max_retries == 10  # the caller's clients are untouched
    assert (strict.max_tokens, strict.max_retries) == (16, 0)
    assert llm.max_tokens == 512


def test_the_anthropic_sdk_takes_output_config():
    from anthropic.resources.messages import AsyncMessages, Messages

    assert sdk_takes("output_config")
    assert "output_config" in inspect.signature(AsyncMessages.create).parameters
    assert "temperature" not in inspect.signature(Messages.create).parameters  # anthropic 2.x


def test_an_anthropic_model_without_structured_outputs_is_warned_about_and_sent_no_schema():
    llm = Anthropic(model="claude-3-5-haiku-latest", api_key="sk-ant-test")
    assert not PROVIDER.profile(llm).structured_output

    with pytest.warns(
        UnenforcedSettingsWarning, match=r"claude-3-5-haiku-latest.*prompt only"
    ) as caught:
        EvidenceSynthesizer(llm=llm)
    strict, _ = strict_anthropic_call(REQUEST, llm, False, PROVIDER.profile(llm))

    assert caught[0].filename == __file__
    assert "output_config" not in strict.additional_kwargs


def test_a_callers_output_config_keeps_its_other_settings_and_loses_its_format():
    caller = {"effort": "low", "format": {"type": "json_schema", "schema": {}}}
    llm = Anthropic(
        model="claude-sonnet-4-5",
        api_key="sk-ant-test",
        additional_kwargs={"output_config": caller},
    )

    strict, _ = strict_anthropic_call(REQUEST, llm, False, PROVIDER.profile(llm))

    config = strict.additional_kwargs["output_config"]
    assert config["effort"] == "low"
    assert config["format"]["schema"] == {"type": "object"}
    assert llm.additional_kwargs["output_config"] is caller


@pytest.mark.parametrize(
    "settings",
    [
        {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
        {"mcp_servers": [{"type": "url", "url": "https://mcp.test", "name": "m"}]},
        {"additional_kwargs": {"tool_choice": {"type": "auto"}}},
    ],
    ids=["tools", "mcp_servers", "additional_kwargs"],
)
def test_an_anthropic_llm_with_tools_is_refused(settings):
    llm = Anthropic(model="claude-sonnet-4-5", api_key="sk-ant-test", **settings)

    with pytest.raises(InvalidRequestError, match="tools") as raised:
        EvidenceSynthesizer(llm=llm)

    assert raised.value.field == "llm"


# GoogleGenAI


def _gemini(loopback, http_options=None, **settings) -> GoogleGenAI:
    # A known output limit and context window: GoogleGenAI fetches no model metadata.
    return GoogleGenAI(
        model="gemini-2.5-flash",
        api_key="test-key",
        max_tokens=64,
        context_window=1000,
        http_options={"base_url": loopback.url, **(http_options or {})},
        **settings,
    )


def test_googlegenai_retries_through_its_public_max_retries(loopback):
    llm = _gemini(loopback, max_retries=2)
    assert GoogleGenAI.model_fields["max_retries"].default == 3
    loopback.status = 500

    with pytest.raises(Exception, match="500"):
        llm.chat(MESSAGES)

    assert len(loopback.requests) == 2  # so the strict copy's max_retries=0 is what stops it


def test_the_per_request_retry_options_override_the_clients(loopback):
    retries = {"attempts": 4, "initial_delay": 0, "jitter": 0}
    llm = _gemini(loopback, http_options={"retry_options": retries}, max_retries=0)
    loopback.status = 500
    with pytest.raises(Exception, match="500"):
        llm.chat(MESSAGES)
    assert len(loopback.requests) == 4  # the client's own retries, without the strict call's
    loopback.requests.clear()

    strict, kwargs = strict_google_call(REQUEST, llm, False, GOOGLE.profile(llm))
    with pytest.raises(Exception, match="500"):
        strict.chat(MESSAGES, **kwargs)

    assert len(loopback.requests) == 1


def test_googlegenai_merges_a_per_call_generation_config_over_its_own_none_included(loopback):
    from google.genai import types

    own = types.GenerateContentConfig(
        temperature=0.9, max_output_tokens=4000, response_schema={"type": "STRING"}
    )
    llm = _gemini(loopback, generation_config=own)
    loopback.reply = lambda path, body: {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "{}"}]}, "finishReason": "STOP"}
        ]
    }
    strict, kwargs = strict_google_call(REQUEST, llm, False, GOOGLE.profile(llm))

    strict.chat(MESSAGES, **kwargs)

    config = loopback.posts[0].body["generationConfig"]
    assert config["temperature"] == 0.0
    assert config["maxOutputTokens"] == 16
    assert config["responseJsonSchema"] == {"type": "object"}
    assert "responseSchema" not in config  # Gemini refuses both schema fields at once


def test_a_googlegenai_llm_with_a_built_in_tool_is_refused(loopback):
    from google.genai import types

    llm = _gemini(loopback, built_in_tool=types.Tool(google_search=types.GoogleSearch()))

    with pytest.raises(InvalidRequestError, match="built_in_tool"):
        EvidenceSynthesizer(llm=llm)


# Ollama


@pytest.mark.parametrize("status", [500, 429])
def test_the_ollama_client_does_not_retry(status, loopback):
    loopback.status = status
    llm = Ollama(model="qwen3:4b", base_url=loopback.url, context_window=8192)
    assert "max_retries" not in Ollama.model_fields

    with pytest.raises(ResponseError):
        llm.chat(MESSAGES)

    assert len(loopback.requests) == 1


def test_an_ollama_copy_builds_its_client_from_request_timeout_or_shares_the_llms():
    llm = Ollama(model="qwen3:4b", request_timeout=120.0)

    strict, kwargs = strict_ollama_call(LEDGER_REQUEST, llm, False, OLLAMA.profile(llm))

    assert kwargs == {"format": schema_in(LEDGER_REQUEST.json_schema, "full")}
    assert strict.client._client.timeout == httpx.Timeout(5.0)
    assert llm._client is None  # the caller's LLM built nothing
    held = llm.client
    shared, _ = strict_ollama_call(LEDGER_REQUEST, llm, False, OLLAMA.profile(llm))
    # A client the LLM holds is used (through a view that refuses redirects), its own timeout
    # kept.
    assert shared.client is not held
    assert shared.client._client.timeout == held._client.timeout == httpx.Timeout(120.0)


def test_ollama_sends_additional_kwargs_as_options_over_its_temperature():
    llm = Ollama(
        model="qwen3:4b",
        context_window=8192,
        temperature=0.5,
        additional_kwargs={"temperature": 0.9},
    )
    assert llm._model_kwargs["temperature"] == 0.9  # why the strict copy drops the caller's

    strict, _ = strict_ollama_call(LEDGER_REQUEST, llm, False, OLLAMA.profile(llm))

    assert strict._model_kwargs["temperature"] == 0.0
    assert strict._model_kwargs["num_predict"] == 16
