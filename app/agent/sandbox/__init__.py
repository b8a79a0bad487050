"""Sandbox backends for run_command, chosen by SANDBOX_BACKEND."""

from __future__ import annotations

from app.agent.sandbox.base import (
    COMMAND_TIMEOUT_S,
    OUTPUT_TAIL_CHARS,
    CommandResult,
    Sandbox,
    SandboxBusy,
    SandboxError,
)
from app.agent.sandbox.docker import DockerSandbox, docker_client
from app.agent.sandbox.local import LocalSandbox

__all__ = [
    "COMMAND_TIMEOUT_S",
    "OUTPUT_TAIL_CHARS",
    "CommandResult",
    "DockerSandbox",
    "LocalSandbox",
    "Sandbox",
    "SandboxBusy",
    "SandboxError",
    "docker_client",
]
