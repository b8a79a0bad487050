"""Which real models `python -m app dev` uses: an exported OPENAI_BASE_URL wins (a local
Ollama makes the playground real with no key and no cloud), then ANTHROPIC_API_KEY, else the
demo brain."""

from __future__ import annotations

from app.config import Provider
from app.dev.stack import StartFailed, real_models


def test_an_exported_endpoint_drives_chat_and_decisions_on_the_same_model() -> None:
    environ = {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "CHAT_MODEL": "llama3.1:8b"}

    assert real_models(environ) is Provider.OPENAI
    assert environ["CHAT_PROVIDER"] == environ["JEV_PROVIDER"] == "openai"
    assert environ["JEV_MODEL"] == "llama3.1:8b"


def test_an_endpoint_without_a_model_is_refused_with_what_to_export() -> None:
    refused = real_models({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"})

    assert isinstance(refused, StartFailed) and "CHAT_MODEL" in str(refused)


def test_without_an_endpoint_anthropic_or_the_demo_brain() -> None:
    assert real_models({"ANTHROPIC_API_KEY": "k"}) is Provider.ANTHROPIC
    assert real_models({}) is None


def test_explicit_choices_are_kept() -> None:
    environ = {
        "OPENAI_BASE_URL": "http://127.0.0.1:1234/v1",
        "CHAT_MODEL": "qwen2.5-7b",
        "JEV_PROVIDER": "anthropic",
        "JEV_MODEL": "claude-haiku-5-5",
    }

    assert real_models(environ) is Provider.OPENAI
    assert (environ["JEV_PROVIDER"], environ["JEV_MODEL"]) == ("anthropic", "claude-haiku-5-5")
