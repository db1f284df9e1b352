"""What each allow-listed chat model class posts, byte for byte, in each citation mode.

The bodies are recorded in ``tests/golden/requests/`` (``--record-golden``). OpenAI's and
Azure's own hosts are served by ``httpx.MockTransport``, every other provider by a loopback
server; the reply does not matter, only what was sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_mistralai import ChatMistralAI
from langchain_ollama import ChatOllama
from langchain_openai import AzureChatOpenAI, ChatOpenAI

from evidence_first import Evidence, ModelCallError
from langchain_evidence_first import EvidenceAnswerer

SOURCES = [
    Evidence(id="standup", text="Standup notes. The launch moved to June 15.", status="current"),
    Evidence(id="email", text="The budget review is on Friday, May 8.", status="superseded"),
]
QUESTION = {"question": "When is the launch?", "sources": SOURCES}
AZURE = {
    "azure_endpoint": "https://example.openai.azure.com",
    "azure_deployment": "gpt-4.1-mini",
    "api_version": "2024-10-21",
}
# Each provider's real class, given the server's root.
ON_LOOPBACK: dict[str, Callable[[str], Any]] = {
    "openai-elsewhere": lambda url: ChatOpenAI(model="m", api_key="sk-test", base_url=f"{url}/v1"),
    "anthropic": lambda url: ChatAnthropic(
        model="claude-haiku-4-5", api_key="sk-ant-test", base_url=url
    ),
    "ollama": lambda url: ChatOllama(model="llama3.2", base_url=url),
    "google": lambda url: ChatGoogleGenerativeAI(
        model="gemini-2.5-flash", api_key="k", base_url=url
    ),
    "mistral": lambda url: ChatMistralAI(model="mistral-small-latest", api_key="k", base_url=url),
}
ON_OPENAI_HOSTS: dict[str, tuple[type, dict[str, Any]]] = {
    "openai": (ChatOpenAI, {"model": "gpt-4.1-mini"}),
    "azure": (AzureChatOpenAI, AZURE),
}
CITATION_MODES = pytest.mark.parametrize("mode", ["quote", "passage"])
pytestmark = [
    # The replies are empty: whatever a client makes of them is beside the point.
    pytest.mark.filterwarnings("ignore::langchain_evidence_first.UnenforcedSettingsWarning"),
    pytest.mark.filterwarnings(
        "ignore:Inheritance class AiohttpClientSession from ClientSession:DeprecationWarning"
    ),
]


def _ask(llm: Any, mode: str) -> None:
    answerer = EvidenceAnswerer(llm=llm, citation_mode=mode, max_output_tokens=300)
    with contextlib.suppress(ModelCallError):
        answerer.invoke(QUESTION)


@CITATION_MODES
@pytest.mark.parametrize("provider", sorted(ON_LOOPBACK))
def test_a_provider_posts_the_recorded_body(provider, mode, loopback, golden_request):
    endpoint = loopback.answering(200, {})
    _ask(ON_LOOPBACK[provider](endpoint.url), mode)
    golden_request(f"langchain-{provider}", mode, endpoint.posts[-1].raw)


@CITATION_MODES
@pytest.mark.parametrize("provider", sorted(ON_OPENAI_HOSTS))
def test_chat_openai_on_its_own_hosts_posts_the_recorded_body(provider, mode, golden_request):
    sent: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500, json={"error": {"message": "crafted"}})

    cls, settings = ON_OPENAI_HOSTS[provider]
    transport = httpx.MockTransport(reply)
    _ask(cls(api_key="sk-test", http_client=httpx.Client(transport=transport), **settings), mode)
    (request,) = sent
    golden_request(f"langchain-{provider}", mode, request.content)
