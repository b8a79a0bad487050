"""The task agent: a bounded tool loop with web tools and a per-channel sandbox."""

from app.agent.build import build_agent
from app.agent.loop import AgentLimits, TaskAgent
from app.agent.prompt import TaskRequest

__all__ = ["AgentLimits", "TaskAgent", "TaskRequest", "build_agent"]
