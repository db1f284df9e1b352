"""The public surface: each public module's names pinned, and each object naming where it is."""

import importlib
import inspect
import pickle
import typing
import warnings

import pydantic
import pytest

import evidence_first
from evidence_first import adapters

# The seven public modules: the core's five and the two integrations.
PUBLIC_MODULES = (
    "evidence_first",
    "evidence_first.adapters",
    "evidence_first.local",
    "evidence_first.chat_completions",
    "evidence_first.render",
    "langchain_evidence_first",
    "llama_index.response_synthesizers.evidence_first",
)


def _classes_and_functions() -> list[tuple[str, str, object]]:
    found = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type) or inspect.isfunction(value):
                found.append((module_name, name, value))
    return found


EXPORTED = _classes_and_functions()


@pytest.mark.parametrize(
    ("module_name", "names"),
    [
        (
            "evidence_first.local",
            [
                "DEFAULT_READER",
                "INSTALL_HINT",
                "KNOWN_MODELS",
                "TINY_MODEL",
                "KnownModel",
                "LocalModel",
                "LocalModelError",
                "assemble",
                "default_cache_dir",
                "idle_cores",
                "is_installed",
                "shared_local_model",
            ],
        ),
        (
            "evidence_first.chat_completions",
            [
                "SCHEMA_NAME",
                "ChatCompletionsModel",
                "ReplyLimits",
                "chat_completions_body",
                "reply_limits",
                "token_logprobs",
            ],
        ),
        ("evidence_first.render", ["render_html", "render_markdown", "render_text"]),
    ],
)
def test_the_other_public_modules_names_are_pinned(module_name, names):
    assert sorted(importlib.import_module(module_name).__all__) == sorted(names)


def test_the_adapters_names_are_pinned():
    assert sorted(adapters.__all__) == sorted(
        [
            "DIALECTS",
            "MAX_SOURCES",
            "NESTED_SETTINGS",
            "SCHEMA_NAME",
            "STRICT_KEYS",
            "TOOL_KEYS",
            "AnswerOptionFields",
            "AnswerOptions",
            "Dialect",
            "DialectName",
            "ModelProfileWarning",
            "OptionArgs",
            "Provider",
            "ProviderFamily",
            "SourceSelection",
            "UnenforcedSettingsWarning",
            "aanswer_selection",
            "acall_refusing_redirects",
            "answer_metadata",
            "answer_selection",
            "astream_selection",
            "call_refusing_redirects",
            "chat_completions_settings",
            "checked_int",
            "evidence_error",
            "family_for_url",
            "is_instance_of",
            "json_safe_metadata",
            "limits_in",
            "metadata_fields",
            "normalized_finish_reason",
            "openai_response_format",
            "option_error",
            "outcome_text",
            "output_format",
            "positional_id",
            "profile_for_name",
            "profile_of",
            "publish",
            "refuse_retries",
            "refuse_tools",
            "refused_redirect",
            "schema_in",
            "select_sources",
            "source_evidence",
            "status_failure",
            "stream_selection",
            "token_logprobs",
            "unbracketed",
            "warn_once",
            "warn_unenforced_once",
            "without_redirects",
            "without_strict_keys",
        ]
    )
    for name in adapters.__all__:
        assert getattr(adapters, name) is not None


@pytest.mark.parametrize(
    ("module_name", "name", "value"),
    EXPORTED,
    ids=[f"{module_name}.{name}" for module_name, name, _ in EXPORTED],
)
def test_every_exported_object_names_the_public_module_it_is_imported_from(
    module_name, name, value
):
    home = value.__module__
    assert not any(part.startswith("_") for part in home.split(".")), (name, home)
    # What pickle, cloudpickle (Ray) and the API reference follow back to the object.
    assert getattr(importlib.import_module(home), value.__qualname__) is value
    assert pickle.loads(pickle.dumps(value)) is value
    if isinstance(value, type):
        # Annotations still resolve, though looked up in the public module.
        typing.get_type_hints(value)
    if isinstance(value, type) and issubclass(value, pydantic.BaseModel):
        # Pydantic resolved the fields where they were written: a rebuild and a subclass work.
        assert value.model_rebuild(force=True)
        subclass = type("Extended", (value,), {"__annotations__": {"note": str}, "note": ""})
        assert "note" in subclass.model_fields


def test_the_front_exports_what_its_objects_name():
    assert evidence_first.answer_from_evidence.__module__ == "evidence_first"
    assert evidence_first.EvidenceAnswer.__module__ == "evidence_first"
    assert repr(evidence_first.Evidence) == "<class 'evidence_first.Evidence'>"
    assert adapters.AnswerOptions.__module__ == "evidence_first.adapters"
    assert adapters.UnenforcedSettingsWarning.__module__ == "evidence_first.adapters"


def test_an_unknown_adapters_name_is_an_attribute_error_without_a_warning():
    # Nothing is published yet: a name adapters no longer exports is simply gone.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no_such_name"):
            adapters.no_such_name  # noqa: B018
        assert not hasattr(adapters, "no_such_name")
