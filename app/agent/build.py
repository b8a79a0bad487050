"""Wiring: settings and shared clients in, a ready TaskAgent out."""

from __future__ import annotations

import anthropic
import httpx

from app.agent.loop import AgentLimits, TaskAgent
from app.agent.sandbox import DockerSandbox, LocalSandbox, Sandbox, docker_client
from app.agent.session import SessionLimits, SessionStore
from app.agent.tools import JinaClient, Toolbox
from app.agent.urls import Resolver, system_resolver
from app.config import SandboxBackend, Settings
from app.db import SessionFactory


def build_agent(
    settings: Settings,
    *,
    anthropic: anthropic.AsyncAnthropic,
    http: httpx.AsyncClient,
    sessions: SessionFactory,
    docker_http: httpx.AsyncClient | None = None,
    resolve: Resolver = system_resolver,
    limits: AgentLimits | None = None,
    session_limits: SessionLimits | None = None,
) -> TaskAgent:
    """``docker_http`` defaults to a client on DOCKER_URL (closed by ``TaskAgent.aclose``)."""
    jina = JinaClient(
        http,
        search_url=settings.jina_search_url,
        reader_url=settings.jina_reader_url,
        api_key=settings.jina_api_key,
    )
    sandbox: Sandbox | None = None
    docker: DockerSandbox | None = None
    owned: httpx.AsyncClient | None = None
    if settings.sandbox_backend is SandboxBackend.DOCKER:
        if docker_http is None:
            docker_http = owned = docker_client(settings.docker_url)
        sandbox = docker = DockerSandbox(docker_http, settings.sandbox_image)
    elif settings.sandbox_backend is SandboxBackend.LOCAL:
        sandbox = LocalSandbox(settings.sandbox_root)
    return TaskAgent(
        anthropic,
        Toolbox(jina, sandbox, resolve=resolve),
        SessionStore(sessions, session_limits),
        model=settings.chat_model,
        limits=limits,
        sandbox=docker,
        owned_http=owned,
    )
