"""FastAPI dependencies over the process-wide resources the API's lifespan builds."""

from __future__ import annotations

from fastapi import Request

from app.config import Settings
from app.db import SessionFactory
from app.kit.queue import JobQueue


def get_app_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_sessions(request: Request) -> SessionFactory:
    sessions: SessionFactory = request.app.state.sessions
    return sessions


def get_queue(request: Request) -> JobQueue:
    queue: JobQueue = request.app.state.queue
    return queue
