"""Seed 002 step 4: run a parsed chat command once per trigger, whichever front end gave it
(a text command or a slash command: the same command values, the same code). Commands never
produce a model reply; each answers through its front end's ``Answer``."""

from __future__ import annotations

from app.commands import memory
from app.commands.answer import Answer
from app.commands.authority import Authority
from app.commands.forgetme import forget_me
from app.commands.invocation import Invocation
from app.commands.parser import (
    Command,
    ForgetMe,
    MemoryExport,
    MemoryForget,
    MemoryForgetAll,
    MemoryPause,
    MemoryResume,
    MemorySearch,
    MemoryShow,
    MemoryWhy,
    Usage,
)
from app.commands.staff import run_staff_command
from app.db import unit_of_work
from app.services import Services
from app.turn import store as steps
from app.turn.store import Step


async def handle_command(
    services: Services, command: Command, who: Invocation, answer: Answer
) -> None:
    """Run ``command`` once per trigger, even if the job is retried."""
    async with services.sessions() as session:
        if await steps.done(session, who.event_id, Step.COMMAND) is not None:
            return
    await _run(services, command, who, answer)
    async with unit_of_work(services.sessions) as session:
        await steps.record(session, who.event_id, Step.COMMAND, {"command": type(command).__name__})


async def _run(services: Services, command: Command, who: Invocation, answer: Answer) -> None:
    match command:
        case MemoryShow(everything=everything):
            await memory.memory_show(services, who, answer, everything=everything)
        case MemoryWhy(memory_id=memory_id):
            await memory.memory_why(services, who, answer, memory_id)
        case MemorySearch(words=words):
            await memory.memory_search(services, who, answer, words)
        case MemoryExport():
            await memory.memory_export(services, who, answer)
        case MemoryPause():
            await memory.memory_pause(services, who, answer)
        case MemoryResume():
            await memory.memory_resume(services, who, answer)
        case MemoryForget(memory_id=memory_id):
            await memory.memory_forget(services, who, answer, memory_id)
        case MemoryForgetAll():
            await memory.memory_forget_all(services, who, answer)
        case ForgetMe():
            await forget_me(services, who, answer)
        case Usage(text=text):
            await answer.say(text)
        case _:
            authority = Authority.of(who, services.settings)
            await run_staff_command(services, command, who, answer, authority)
