"""Where a command's answers go: the one thing its two front ends do differently.

A command says short things (a confirmation, a refusal, an error) and shows private things
(memories, a listing, an export) through an ``Answer``. A text command (``InChannel``)
replies in the channel and shows by DM, telling the channel only that it did (or could not);
a slash command (``Ephemeral``) answers both in its ephemeral response, which only the asker
sees, so a closed DM does not matter. Files go the same way in both."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.commands.invocation import Invocation
from app.discord.client import MAX_UPLOAD_BYTES, Attachment, DiscordClient, InteractionWebhook
from app.discord.errors import DiscordError, DiscordTooLarge
from app.discord.split import split_message

logger = logging.getLogger(__name__)

# A long listing or export goes as at most this many messages of one file each (Discord takes
# MAX_UPLOAD_BYTES per message), or not at all.
MAX_FILES = 3
TOO_LARGE = (
    f"That is too large to send over Discord (more than {MAX_FILES} files of "
    f"{MAX_UPLOAD_BYTES // 2**20} MiB). Ask an operator for the admin export."
)
DM_FAILED = (
    "I couldn't send you a direct message, so I can't show your memories here. "
    "Allow DMs from this server's members and try again."
)


@dataclass(frozen=True, slots=True)
class Part:
    """One message of what is shown: its text and, read only when it is sent, its file."""

    text: str
    file: Callable[[], Attachment] | None = None


class Answer(Protocol):
    async def say(self, text: str) -> None:
        """A short answer where the command was given (seen by whoever sees the command)."""
        ...

    async def show(self, parts: Sequence[Part], *, sent: str, undeliverable: str) -> None:
        """What only the asker may see. ``sent``: what the channel hears once it was shown
        elsewhere; ``undeliverable``: what it hears when it could not be."""
        ...

    async def owed(self, text: str) -> None:
        """Said only where an answer is owed (an interaction waits for one), and nothing was
        said yet: a text command's channel stays quiet."""
        ...


class InChannel:
    """A text command: short answers reply to the command message, private ones go by DM.
    Every post carries a nonce from the command message, so a retried job posts nothing
    twice."""

    def __init__(self, discord: DiscordClient, invocation: Invocation) -> None:
        self._discord, self._invocation = discord, invocation
        self._said = 0

    async def say(self, text: str) -> None:
        self._said += 1
        key = f"command:{self._invocation.trigger_id}"
        await self._discord.send_message(
            self._invocation.channel_id,
            text,
            nonce_key=key if self._said == 1 else f"{key}:{self._said}",
            reply_to=self._invocation.trigger_id,
        )

    async def show(self, parts: Sequence[Part], *, sent: str, undeliverable: str) -> None:
        """DM the asker, message by message; the channel hears only that it was sent, that it
        could not be, or that it was too large for Discord (never retried: it cannot help)."""
        who = self._invocation
        try:
            for number, part in enumerate(parts, start=1):
                key = f"command-dm:{who.trigger_id}" + (f":{number}" if number > 1 else "")
                files = [part.file()] if part.file is not None else []
                await self._discord.send_dm(who.user_id, part.text, nonce_key=key, files=files)
        except DiscordTooLarge:
            await self.say(TOO_LARGE)
            return
        except DiscordError as exc:
            # Never fall back to the channel with the content: only say the DM failed.
            logger.info("command: DM failed", extra={"error": type(exc).__name__})
            await self.say(undeliverable)
            return
        await self.say(sent)

    async def owed(self, text: str) -> None:
        return None


class Ephemeral:
    """A slash command: every answer, private or not, goes into the ephemeral response (only
    the asker sees it, in the channel): the deferred response is edited with the first
    message, follow-ups carry the rest. Editing is idempotent; a follow-up is not, so each is
    sent at most once (numbered in order, claimed before it is sent): a retried job edits the
    first message again and skips the follow-ups it sent or tried."""

    def __init__(self, discord: DiscordClient, to: InteractionWebhook) -> None:
        self._discord, self._to = discord, to
        self._messages = 0

    @property
    def answered(self) -> bool:
        return self._messages > 0

    async def say(self, text: str) -> None:
        for part in split_message(text) or [text]:
            await self._message(part, [])

    async def show(self, parts: Sequence[Part], *, sent: str, undeliverable: str) -> None:
        try:
            for part in parts:
                chunks = split_message(part.text) or [""]
                files = [part.file()] if part.file is not None else []
                await self._message(chunks[0], files)
                for chunk in chunks[1:]:
                    await self._message(chunk, [])
        except DiscordTooLarge:
            await self.say(TOO_LARGE)

    async def owed(self, text: str) -> None:
        if not self.answered:
            await self.say(text)

    async def _message(self, content: str, files: list[Attachment]) -> None:
        first = self._messages == 0
        self._messages += 1
        if first:
            await self._discord.edit_original(self._to, content, files=files)
        else:
            await self._discord.follow_up(self._to, content, number=self._messages, files=files)
