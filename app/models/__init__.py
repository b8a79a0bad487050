"""SQLAlchemy tables, one module per aggregate; importing this package registers them all."""

from app.models.agent import AgentSession
from app.models.base import Base
from app.models.inbox import CompletedStep, InboxEvent
from app.models.memory import Episode, Memory, MemoryLog, Observation, Pin
from app.models.messages import Message
from app.models.nightly import NightlyRun, StyleOverride
from app.models.signals import Signal

__all__ = [
    "AgentSession",
    "Base",
    "CompletedStep",
    "Episode",
    "InboxEvent",
    "Memory",
    "MemoryLog",
    "Message",
    "NightlyRun",
    "Observation",
    "Pin",
    "Signal",
    "StyleOverride",
]
