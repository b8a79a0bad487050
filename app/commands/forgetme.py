"""`!forgetme`: erase the author (MEM-09), then answer in the channel with the counts."""

from __future__ import annotations

import logging
from dataclasses import asdict

from app.db import unit_of_work
from app.inbound.frames import MessageCreate
from app.privacy.erasure import erase_user, format_receipt
from app.services import Services

logger = logging.getLogger(__name__)


async def forget_me(services: Services, message: MessageCreate) -> None:
    """`!forgetme`: erase the author, then answer in the channel with the counts."""
    author = message.author
    names = [message.author_name, author.username, author.global_name]
    if message.member is not None:
        names.append(message.member.nick)
    async with unit_of_work(services.sessions) as session:
        # A MESSAGE_CREATE's de-duplication id is the message id.
        receipt = await erase_user(session, author.id, names=names, own_event=str(message.id))
    logger.info("forgetme: erased", extra={"user_id": author.id, **asdict(receipt)})
    await services.discord.send_message(
        message.channel_id,
        format_receipt(receipt),
        nonce_key=f"forgetme:{message.id}",
        reply_to=message.id,
    )
