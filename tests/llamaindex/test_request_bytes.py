"""What each allow-listed LLM class posts, byte for byte, in each citation mode.

The bodies are recorded in ``tests/golden/requests/`` (``--record-golden``). OpenAI's LLMs
are served by ``httpx.MockTransport`` (the ``fake_openai`` endpoint), Gemini and Ollama by a
loopback server. LlamaIndex's Anthropic LLM cannot chat with the installed anthropic 2.x
(``test_provider_requests.py`` marks it): its body is what the strict copy's own client posts
with the arguments ``Anthropic.chat`` would pass it, for a model that takes no temperature (an
argument anthropic 2.x's ``messages.create`` refuses).
"""

from __future__ import annotations

import contextlib
from typing import Any

import httpx
import pytest
from llama_index.llms.openai import OpenAI

from evidence_first import ModelCallError
from llama_index.response_synthesizers.evidence_first import EvidenceSynthesizer
from llama_index.response_synthesizers.evidence_first._anthropic import strict_anthropic_call
from llama_index.response_synthesizers.evidence_first._strict_call import reader_for

QUESTION = "When is the Apollo launch?"
CITATION_MODES = pytest.mark.parametrize("mode", ["quote", "passage"])
GEMINI_MODEL = "gemini-2.5-flash"
OPENAI_HOSTS = {
    "openai": {},
    "azure-host": {"api_base": "https://my-resource.openai.azure.com/openai/v1"},
    "other-host": {"api_base": "http://vllm.internal:8000/v1"},
}
pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession from ClientSession:DeprecationWarning"
)


def _ask(llm: Any, nodes: Any, mode: str) -> None:
    synthesizer = EvidenceSynthesizer(llm=llm, citation_mode=mode, max_output_tokens=300)
    with contextlib.suppress(ModelCallError):
        synthesizer.synthesize(QUESTION, nodes)


@CITATION_MODES
@pytest.mark.parametrize("host", sorted(OPENAI_HOSTS))
def test_openai_llms_post_the_recorded_body(
    host, mode, fake_openai, launch_nodes, golden_request, monkeypatch
):
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    transport = httpx.MockTransport(fake_openai.handle)
    llm = OpenAI(
        model="gpt-4.1-mini",
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        **OPENAI_HOSTS[host],
    )
    _ask(llm, launch_nodes, mode)
    (request,) = fake_openai.requests
    golden_request(f"llamaindex-openai-{host}", mode, request.content)


@CITATION_MODES
def test_gemini_posts_the_recorded_body(mode, loopback, launch_nodes, golden_request):
    from llama_index.llms.google_genai import GoogleGenAI

    # Model metadata on GET; the reply to the call itself does not matter.
    loopback.reply = lambda path, body: {"name": f"models/{GEMINI_MODEL}"} if body is None else {}
    llm = GoogleGenAI(
        model=GEMINI_MODEL, api_key="test-key", http_options={"base_url": loopback.url}
    )
    _ask(llm, launch_nodes, mode)
    golden_request("llamaindex-gemini", mode, loopback.posts[-1].raw)


@CITATION_MODES
def test_ollama_posts_the_recorded_body(mode, loopback, launch_nodes, golden_request):
    from llama_index.llms.ollama import Ollama

    llm = Ollama(model="qwen3:4b", base_url=loopback.url, context_window=8192)
    _ask(llm, launch_nodes, mode)
    golden_request("llamaindex-ollama", mode, loopback.posts[-1].raw)


@CITATION_MODES
def test_anthropic_strict_call_posts_the_recorded_body(
    mode, loopback, launch_nodes, sent, anthropic_chat_call, golden_request
):
    from llama_index.llms.anthropic import Anthropic

    llm = Anthropic(
        model="claude-opus-4-7", base_url=loopback.url, api_key="sk-ant-test", max_tokens=4096
    )
    _ask(llm, launch_nodes, mode)  # Anthropic.chat fails before sending; the plan is made
    (request,) = sent
    strict, _ = strict_anthropic_call(request, llm, False, reader_for(llm).profile)
    with contextlib.suppress(Exception):  # the reply does not matter
        strict._client.messages.create(**anthropic_chat_call(strict, request))
    golden_request("llamaindex-anthropic", mode, loopback.posts[-1].raw)
