"""Seed 002 step 4: run a parsed chat command once per trigger. Commands never produce a
model reply; each answers the person in the channel (or by DM where the seed says so)."""

from __future__ import annotations

from app.commands import memory
from app.commands.authority import Authority
from app.commands.forgetme import forget_me
from app.commands.memory import Asker
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
    StaffCommand,
    Usage,
)
from app.commands.staff import run_staff_command
from app.db import unit_of_work
from app.frames.events import MessageCreate
from app.services import Services
from app.turn import store as steps
from app.turn.store import Step


async def handle_command(
    services: Services, command: Command, message: MessageCreate, event_id: str
) -> None:
    """Run ``command`` once per trigger, even if the job is retried."""
    async with services.sessions() as session:
        if await steps.done(session, event_id, Step.COMMAND) is not None:
            return
    await _run(services, command, message)
    async with unit_of_work(services.sessions) as session:
        await steps.record(session, event_id, Step.COMMAND, {"command": type(command).__name__})


async def _run(services: Services, command: Command, message: MessageCreate) -> None:
    asker = Asker.of(message)
    match command:
        case MemoryShow(everything=everything):
            await memory.memory_show(services, asker, everything=everything)
        case MemoryWhy(memory_id=memory_id):
            await memory.memory_why(services, asker, memory_id)
        case MemorySearch(words=words):
            await memory.memory_search(services, asker, words)
        case MemoryExport():
            await memory.memory_export(services, asker)
        case MemoryPause():
            await memory.memory_pause(services, asker)
        case MemoryResume():
            await memory.memory_resume(services, asker)
        case MemoryForget(memory_id=memory_id):
            await memory.memory_forget(services, asker, memory_id)
        case MemoryForgetAll():
            await memory.memory_forget_all(services, asker)
        case ForgetMe():
            await forget_me(services, message)
        case Usage(text=text):
            await answer(services, message, text)
        case _:
            await staff_command(services, command, message)


async def answer(services: Services, message: MessageCreate, text: str) -> None:
    await services.discord.send_message(
        message.channel_id, text, nonce_key=f"command:{message.id}", reply_to=message.id
    )


async def staff_command(services: Services, command: StaffCommand, message: MessageCreate) -> None:
    await run_staff_command(services, command, message, Authority.of(message, services.settings))
