"""Recipe 1: the core with your own model callback, over any OpenAI-compatible client.

For: developers who call their model through their own client (no LangChain, no LlamaIndex)
and want verified citations from ``answer_from_evidence``.

Shows: a reader class of about 20 lines that maps a ``ModelRequest`` onto the ``openai``
client: one call, no retries, the request's timeout, output limit, temperature and JSON schema.
Here it points at the embedded default reader (Qwen2.5-Coder-1.5B-Instruct on llama.cpp);
give it any ``base_url`` and ``model`` instead.

Run: ``uv run python cookbook/01_custom_model_callback.py``
"""

from __future__ import annotations

from openai import OpenAI

from evidence_first import (
    Evidence,
    EvidenceAnswer,
    ModelRequest,
    ModelResponse,
    answer_from_evidence,
)
from evidence_first.chat_completions import SCHEMA_NAME
from evidence_first.local import LocalModel


class OpenAIReader:
    """Reads evidence with any OpenAI-compatible chat-completions endpoint, one call per answer."""

    def __init__(self, client: OpenAI, model: str) -> None:
        self.client = client.with_options(max_retries=0)  # the answer must come from one call
        self.model = model

    def generate(self, request: ModelRequest) -> ModelResponse:
        """Send the request's system and user messages; no tools."""
        completion = self.client.chat.completions.create(
            model=self.model,
            messages=[
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.user},
            ],
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            timeout=request.timeout,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": request.json_schema, "strict": True},
            },
        )
        choice = completion.choices[0]
        return ModelResponse(
            text=choice.message.content or "",
            finish_reason=choice.finish_reason,  # "length" makes the answer invalid_response
            tool_calls=tuple(choice.message.tool_calls or ()),  # any makes it invalid_response
        )


SOURCES = [
    Evidence(
        id="standup-04-28",
        text="Standup, April 28. The launch moved to June 15 because the payment provider "
        "needs a security review first. Dana owns the security review.",
        speaker="Ravi",
        status="current",
    ),
    Evidence(
        id="standup-04-14",
        text="Standup, April 14. The launch is planned for June 8.",
        speaker="Ravi",
        status="superseded",
    ),
]


def main(local: LocalModel | None = None) -> EvidenceAnswer:
    """Answer one question with the given local model, or start the default reader."""
    if local is None:
        with LocalModel() as started:
            return main(started)
    client = OpenAI(base_url=local.base_url, api_key="unused")
    reader = OpenAIReader(client, model=local.model_name)
    # On a busy CPU a local model can take minutes: a modest output, the longest timeout.
    answer = answer_from_evidence(
        "When is the launch?", SOURCES, reader, max_output_tokens=512, timeout=300
    )
    print(answer)  # status, answer, facts with verified spans, omissions, or reason codes
    for fact in answer.facts:
        for c in fact.citations:
            source = answer.source(c.source_id)
            assert source.text[c.char_start : c.char_end] == c.quote  # always holds
    return answer


if __name__ == "__main__":
    main()
