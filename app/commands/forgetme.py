"""`!forgetme`: register the author's erasure (MEM-09) and answer at once that it started;
the worker erases in batches and DMs the receipt when it is done."""

from __future__ import annotations

import logging

from app.frames.events import MessageCreate
from app.privacy.erasure import STARTED, start_erasure
from app.privacy.store import RequestedBy
from app.services import Services

logger = logging.getLogger(__name__)


async def forget_me(services: Services, message: MessageCreate) -> None:
    """Start (or, for a retried command, rejoin) the author's erasure, then say so. Nothing
    is taken from this frame but the author's id: names are never the caller's to choose."""
    erasure = await start_erasure(
        services.sessions,
        services.queue,
        message.author.id,
        requested_by=RequestedBy.FORGETME,
        command_event_id=str(message.id),  # a MESSAGE_CREATE's de-duplication id
        channel_id=message.channel_id,
    )
    logger.info("forgetme: erasure started", extra={"erasure_id": erasure.id})
    await services.discord.send_message(
        message.channel_id, STARTED, nonce_key=f"forgetme:{message.id}", reply_to=message.id
    )
