"""The answerer's typed input, and the answerer as an agent's tool.

An agent model fills a tool's arguments from its JSON schema, which langchain-core's
``as_tool`` takes from the runnable's input schema. The tool's content is what the agent
reads, the verified answer or the sentence stating a non-answer, as the text an
``output="message"`` message holds; its artifact keeps the answer, as ``create_retriever_tool``
keeps its documents (``response_format="content_and_artifact"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, create_model, model_validator

from evidence_first import Evidence, EvidenceAnswer
from langchain_evidence_first._message import answer_message

__all__ = ["AnswererInput", "QuestionInput", "answer_tool", "tool_reply"]


def _as_given(item: object) -> object:
    """A source as it came; the answerer reads it, and the answer keeps the caller's object.

    A mapping is read by the answerer as evidence fields, its errors naming the field.
    """
    if isinstance(item, (Document, Evidence, Mapping, str)):
        return item
    # A ValueError, which pydantic reports as a validation error of this item.
    msg = f"a source must be a Document, Evidence, a mapping or a string, not {type(item).__name__}"
    raise ValueError(msg)


# What JSON can carry, as the answerer reads it: a text, or an object of the evidence fields a
# model is sent (JSON carries no Document). Taken from Evidence's own fields, so they agree.
_SENT_FIELDS: dict[str, Any] = {
    name: (Evidence.model_fields[name].annotation, Evidence.model_fields[name])
    for name in ("id", "text", "speaker", "observed_at", "status")
}
_SourceFields: type[BaseModel] = create_model(
    "SourceFields",
    __doc__="A source: its ID and text; who said it, when, and whether it still holds.",
    **_SENT_FIELDS,
)
_Source = Annotated[
    Document | Evidence | dict[str, Any] | str,
    PlainValidator(_as_given, json_schema_input_type=_SourceFields | str),
]


class AnswererInput(BaseModel):
    """A question, and the sources to answer it from."""

    model_config = ConfigDict(title="EvidenceAnswererInput")

    question: str = Field(description="The question to answer.")
    sources: list[_Source] = Field(
        description=(
            'The sources to answer from (or under "context" instead, never both): each a '
            'text (its ID is its place, "doc-1" for the first), an object with "id" and '
            '"text", or a Document. Only what they say is answered, each citation checked.'
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _context_is_sources(cls, data: Any) -> Any:
        # As the answerer reads its input: "context" for "sources", never both.
        if not isinstance(data, Mapping) or "context" not in data:
            return data
        if "sources" in data:
            msg = 'both "sources" and "context" given; pass the sources under one key only'
            raise ValueError(msg)
        read = {key: value for key, value in data.items() if key != "context"}
        return {**read, "sources": data["context"]}


class QuestionInput(BaseModel):
    """The question a retrieving answerer retrieves for, then answers."""

    question: str = Field(description="The question to answer from the documents found for it.")


def tool_reply(output: EvidenceAnswer | AIMessage) -> tuple[str, dict[str, Any]]:
    """The tool's content and artifact: the message's text and its ``response_metadata``.

    The text is what ``| StrOutputParser()`` gives (the verified answer without fact markers,
    or the sentence stating the outcome), whichever output the answerer returns; the artifact
    holds the answer's ``as_dict()``, JSON values only, for ``answer_of(tool_message)``.
    """
    message = output if isinstance(output, AIMessage) else answer_message(output)
    return message.text, dict(message.response_metadata)


def answer_tool(
    runnable: Runnable[Any, EvidenceAnswer | AIMessage],
    schema: type[BaseModel],
    *,
    name: str,
    description: str,
) -> StructuredTool:
    """A tool that invokes ``runnable`` with its arguments, as ``as_tool`` would.

    A ``str`` input runnable is invoked with the tool's one argument, any other with the
    arguments as its input mapping.
    """
    as_text = runnable.InputType is str

    def given(arguments: dict[str, Any]) -> Any:
        return next(iter(arguments.values())) if as_text else arguments

    def call(callbacks: Callbacks = None, **arguments: Any) -> tuple[str, dict[str, Any]]:
        return tool_reply(runnable.invoke(given(arguments), config={"callbacks": callbacks}))

    async def acall(callbacks: Callbacks = None, **arguments: Any) -> tuple[str, dict[str, Any]]:
        output = await runnable.ainvoke(given(arguments), config={"callbacks": callbacks})
        return tool_reply(output)

    return StructuredTool.from_function(
        func=call,
        coroutine=acall,
        name=name,
        description=description,
        args_schema=schema,
        response_format="content_and_artifact",
    )


def tool_schema(
    default: type[BaseModel],
    args_schema: type[BaseModel] | None,
    arg_types: dict[str, type] | None,
    name: str,
) -> type[BaseModel]:
    """The tool's arguments: the caller's schema, or one from ``arg_types``, or ``default``."""
    if args_schema is not None:
        return args_schema
    if arg_types is not None:
        fields: dict[str, Any] = {key: (kind, ...) for key, kind in arg_types.items()}
        built: type[BaseModel] = create_model(name, **fields)
        return built
    return default
