"""`!forgetme` and `/forgetme`: register the asker's erasure (MEM-09) and answer at once that
it started; the worker erases in batches and DMs the receipt when it is done."""

from __future__ import annotations

import logging

from app.commands.answer import Answer
from app.commands.invocation import Invocation
from app.privacy.erasure import STARTED, start_erasure
from app.privacy.store import RequestedBy
from app.services import Services

logger = logging.getLogger(__name__)


async def forget_me(services: Services, who: Invocation, answer: Answer) -> None:
    """Start (or, for a retried command, rejoin) the asker's erasure, then say so. Nothing is
    taken from the command but the asker's id: names are never the caller's to choose."""
    erasure = await start_erasure(
        services.sessions,
        services.queue,
        who.user_id,
        requested_by=RequestedBy.FORGETME,
        command_event_id=who.event_id,  # the erasing event itself is not closed unrun
        channel_id=who.channel_id,
    )
    logger.info("forgetme: erasure started", extra={"erasure_id": erasure.id})
    await answer.say(STARTED)
