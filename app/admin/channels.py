"""Admin channel settings: a channel's mode, persona and chat model, the same settings as the
staff commands `!bot channel mode|persona|model` (docs/operations.md). A change is seen by every
worker at its next lookup (the directory's cache version is bumped after the commit)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from app.admin.auth import require_admin
from app.admin.deps import get_app_settings, get_sessions
from app.admin.errors import ModelNotAllowed, responses
from app.admin.schemas import (
    AUTH_ERRORS,
    ChannelSettingsBody,
    ChannelSettingsUpdate,
    OwnChannelSettings,
)
from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.directory import store as directory
from app.directory.store import KEEP, Keep, Known, Mode, Rules
from app.kit.versioned import VersionedCache

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)], responses=AUTH_ERRORS)

Sessions = Annotated[SessionFactory, Depends(get_sessions)]
ChannelId = Annotated[int, Path(ge=0, le=2**63 - 1)]


def get_rules_cache(request: Request) -> VersionedCache[int, Rules]:
    cache: VersionedCache[int, Rules] = request.app.state.channel_rules
    return cache


def _body(channel_id: int, here: Known | None, rules: Rules) -> ChannelSettingsBody:
    own = here.own if here is not None else directory.Own()
    return ChannelSettingsBody(
        channel_id=str(channel_id),
        mode=rules.mode.value,
        persona=rules.persona,
        parent_id=str(rules.parent_id) if rules.parent_id is not None else None,
        model=rules.model,
        own=OwnChannelSettings(
            mode=own.mode.value if own.mode is not None else None,
            persona=own.persona,
            model=own.model,
        ),
    )


@router.get(
    "/channels/{channel_id}/settings",
    response_model=ChannelSettingsBody,
    summary="What holds in a channel: its mode and persona, and where they come from",
)
async def channel_settings(sessions: Sessions, channel_id: ChannelId) -> ChannelSettingsBody:
    async with sessions() as session:
        here, rules = await directory.rules_for(session, channel_id)
    return _body(channel_id, here, rules)


@router.put(
    "/channels/{channel_id}/settings",
    response_model=ChannelSettingsBody,
    summary="Set a channel's mode, persona and/or model (a field left out is unchanged)",
    responses=responses(ModelNotAllowed),
)
async def set_channel_settings(
    sessions: Sessions,
    settings: Annotated[Settings, Depends(get_app_settings)],
    cache: Annotated[VersionedCache[int, Rules], Depends(get_rules_cache)],
    channel_id: ChannelId,
    update: ChannelSettingsUpdate,
) -> ChannelSettingsBody:
    given = update.model_fields_set
    mode: Mode | Keep | None = KEEP
    persona: str | Keep | None = KEEP
    if "mode" in given:
        mode = Mode(update.mode) if update.mode is not None else None
    if "persona" in given:
        persona = update.persona
    model: str | Keep | None = KEEP
    if "model" in given:
        if update.model is not None and update.model not in settings.chat_models:
            raise ModelNotAllowed()
        model = update.model
    async with unit_of_work(sessions) as session:  # the body's persona is already clean
        await directory.update_own(
            session, channel_id, guild_id=None, by=None, mode=mode, persona=persona, model=model
        )
    await cache.invalidate()
    async with sessions() as session:
        here, rules = await directory.rules_for(session, channel_id)
    return _body(channel_id, here, rules)
