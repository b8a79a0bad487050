"""The nightly style revision: the day's reactions and corrections → a revised style section.

Only the persona's style section is ever proposed or stored; the core is not shown as editable
and ``app.persona`` never lets an override replace it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession

from app.chat.base import ChatFailed, ChatModel, Purpose
from app.nightly import store as runs
from app.persona import clean_style, style_section
from app.signals.store import SignalLine

SIGNAL_CAP = 60  # the newest signals of the day; bounds the prompt
STYLE_MAX_TOKENS = 600
STYLE_MAX_CHARS = 2000
BOT_TEXT_CHARS = 200

STYLE_SYSTEM = (
    "You maintain the STYLE section of a Discord bot's persona: how it talks (tone, length, "
    "language, emoji use), never who it is. You get the current style section and the "
    "feedback members gave the bot today (emoji reactions on its messages and explicit "
    "corrections). Propose a revised style section that keeps what worked and fixes what "
    "members objected to. Change little when the feedback is mild. Output only the new "
    "style section's text: no heading, no preamble, at most ten short lines."
)


async def current_style(session: AsyncSession, persona_path: str) -> str:
    """The style in force now: the active override, else the persona file's section."""
    override = await runs.active_style(session)
    if override is not None:
        return override.content
    return await asyncio.to_thread(_file_style, persona_path)


def _file_style(persona_path: str) -> str:
    path = Path(persona_path)
    return style_section(path.read_text(encoding="utf-8")) if path.is_file() else ""


def style_request(style: str, signals: list[SignalLine]) -> str:
    lines = []
    for signal in signals:
        about = (signal.bot_text or "(message not in the log)")[:BOT_TEXT_CHARS]
        if signal.kind == "correction":
            lines.append(f"- correction of «{about}»: {signal.value}")
        else:
            lines.append(f"- reaction {signal.value} on «{about}»")
    return (
        f"Current style section:\n{style or '(none)'}\n\n"
        "Today's feedback:\n" + "\n".join(lines) + "\n\nWrite the revised style section."
    )


async def revise_style(chat: ChatModel, style: str, signals: list[SignalLine]) -> str:
    """One chat call; the result is plain style text (headings stripped), bounded in length."""
    text = await chat.write(
        Purpose.STYLE,
        system=[STYLE_SYSTEM],
        messages=[{"role": "user", "content": style_request(style, signals)}],
        max_tokens=STYLE_MAX_TOKENS,
    )
    revised = clean_style(text)[:STYLE_MAX_CHARS].strip()
    if not revised:
        raise ChatFailed("style: empty revision")
    return revised
