"""Every chat-model call goes through the metered client: only the adapter modules may speak a
provider's SDK. This walks app/ (AST) so an unmetered call cannot be written by accident."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
SDKS = {"anthropic", "openai"}
# The adapters: each translates our ChatRequest for one provider and is wrapped by MeteredChat.
ADAPTERS = {"chat/anthropic.py", "chat/openai.py"}
CLIENTS = {
    "Anthropic",
    "AsyncAnthropic",
    "OpenAI",
    "AsyncOpenAI",
    "AzureOpenAI",
    "AsyncAzureOpenAI",
}


def sdk_uses(tree: ast.AST) -> list[str]:
    """Pure: each import of an SDK, and each construction of an SDK client, by line."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _sdk(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and _sdk(node.module):
            found.append(f"{node.lineno}: from {node.module} import …")
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else None
            name = node.func.id if isinstance(node.func, ast.Name) else name
            if name in CLIENTS:
                found.append(f"{node.lineno}: {name}(…)")
    return found


def _sdk(module: str) -> bool:
    return module.split(".")[0] in SDKS


def test_no_module_outside_the_adapters_uses_a_model_sdk() -> None:
    offenders = {}
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP).as_posix()
        if relative in ADAPTERS:
            continue
        if uses := sdk_uses(ast.parse(path.read_text(encoding="utf-8"))):
            offenders[relative] = uses
    assert offenders == {}


def test_the_walk_finds_imports_and_clients_however_they_are_written() -> None:
    source = (
        "import anthropic\n"
        "from openai import AsyncOpenAI\n"
        "import openai.types as t\n"
        "client = anthropic.AsyncAnthropic()\n"
        "other = AsyncOpenAI(base_url='x')\n"
        "from app.chat.base import ChatModel\n"
    )
    assert sdk_uses(ast.parse(source)) == [
        "1: import anthropic",
        "2: from openai import …",
        "3: import openai.types",
        "4: AsyncAnthropic(…)",
        "5: AsyncOpenAI(…)",
    ]


def test_the_adapters_named_here_exist() -> None:
    assert (APP / "chat/anthropic.py").is_file()
