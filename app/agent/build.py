"""Wiring: settings and shared clients in, a ready TaskAgent out."""

from __future__ import annotations

import logging

import httpx

from app.agent.loop import AgentLimits, TaskAgent
from app.agent.sandbox import DockerSandbox, LocalSandbox, Sandbox, docker_client
from app.agent.sandbox.docker import NO_NETWORK
from app.agent.store import SessionLimits, SessionStore
from app.agent.tools import JinaClient, Toolbox
from app.agent.urls import Resolver, system_resolver
from app.chat.base import ChatModel
from app.config import SandboxBackend, Settings, SettingsError
from app.db import SessionFactory

log = logging.getLogger(__name__)


def build_agent(
    settings: Settings,
    *,
    chat: ChatModel,
    http: httpx.AsyncClient,
    sessions: SessionFactory,
    docker_http: httpx.AsyncClient | None = None,
    resolve: Resolver = system_resolver,
    limits: AgentLimits | None = None,
    session_limits: SessionLimits | None = None,
) -> TaskAgent:
    """``docker_http`` defaults to a client on DOCKER_URL (closed by ``TaskAgent.aclose``)."""
    limits = limits or AgentLimits()
    jina = JinaClient(
        http,
        search_url=settings.jina_search_url,
        reader_url=settings.jina_reader_url,
        api_key=settings.jina_api_key,
    )
    sandbox: Sandbox | None = None
    docker: DockerSandbox | None = None
    owned: httpx.AsyncClient | None = None
    network = False
    if settings.sandbox_backend is SandboxBackend.DOCKER:
        if docker_http is None:
            docker_http = owned = docker_client(settings.docker_url)
        sandbox = docker = DockerSandbox(
            docker_http,
            settings.sandbox_image,
            network=settings.sandbox_network,
            max_containers=settings.sandbox_max_containers,
        )
        network = settings.sandbox_network != NO_NETWORK
    elif settings.sandbox_backend is SandboxBackend.LOCAL:
        sandbox = _local_sandbox(settings)
        network = True  # the host's own
    toolbox = Toolbox(
        jina,
        sandbox,
        resolve=resolve,
        command_network=network,
        command_staff_only=settings.sandbox_backend is SandboxBackend.LOCAL,
        min_tool_s=limits.min_tool_s,
    )
    return TaskAgent(
        chat,
        toolbox,
        SessionStore(sessions, session_limits),
        model=settings.chat_model,
        limits=limits,
        sandbox=docker,
        owned_http=owned,
    )


def _local_sandbox(settings: Settings) -> LocalSandbox:
    # Settings validation refuses this already; settings copied in code skip validation.
    if not settings.sandbox_local_unsafe:
        raise SettingsError("SANDBOX_BACKEND=local needs SANDBOX_LOCAL_UNSAFE=true")
    log.warning(
        "UNSAFE: SANDBOX_BACKEND=local runs model-chosen commands unsandboxed on this host, "
        "as the worker's user, where the worker's secrets can be read; run_command is offered "
        "to staff only. Use SANDBOX_BACKEND=docker in production.",
        extra={"sandbox_root": settings.sandbox_root},
    )
    return LocalSandbox(settings.sandbox_root)
