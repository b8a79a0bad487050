"""Every worker job is metered: its model and decision calls are collected while it runs and
written as usage rows in one short transaction once it is done, off the reply's path (the
reply is posted before the job ends). A job that fails still writes what it spent. Calls for
a person whose erasure began meanwhile are written as nobody's, and their tokens kept as a
number by the erasure, so the person's daily budget still counts them."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import date, datetime

from app.db import SessionFactory, unit_of_work
from app.kit.clock import utcnow
from app.kit.spend import PurposeSpend, Spend, UsageKey, spend_scope
from app.privacy import store as register
from app.usage import store

log = logging.getLogger(__name__)


@asynccontextmanager
async def metered(sessions: SessionFactory) -> AsyncIterator[Spend]:
    started = utcnow()
    with spend_scope() as spend:
        try:
            yield spend
        finally:
            await write_usage(sessions, spend, since=started)


async def write_usage(sessions: SessionFactory, spend: Spend, *, since: datetime) -> None:
    """Never raises: accounting that fails is logged, and the job's outcome stands."""
    if not spend.usage:
        return
    people = {key.user_id for key in spend.usage if key.user_id is not None}
    try:
        async with unit_of_work(sessions) as session:
            erased = await register.blocked(session, people, since=since)
            await store.add(session, without(spend.usage, erased))
            for (user_id, day), tokens in tokens_of(spend.usage, erased).items():
                await register.keep_tokens(session, user_id, day, tokens)
    except Exception as exc:
        calls = sum(s.model_calls for s in spend.usage.values())
        log.error("usage not recorded", extra={"calls": calls, "error": type(exc).__name__})


def tokens_of(
    usage: Mapping[UsageKey, PurposeSpend], people: Collection[int]
) -> dict[tuple[int, date], int]:
    """Pure: the tokens ``people`` spent, by person and day (what their erasure keeps)."""
    tokens: dict[tuple[int, date], int] = {}
    for key, spent in usage.items():
        if key.user_id is not None and key.user_id in people:
            where = (key.user_id, key.day)
            tokens[where] = tokens.get(where, 0) + spent.input_tokens + spent.output_tokens
    return tokens


def without(
    usage: Mapping[UsageKey, PurposeSpend], people: Collection[int]
) -> dict[UsageKey, PurposeSpend]:
    """Pure: ``usage`` with the calls of ``people`` made nobody's (totals unchanged)."""
    kept: dict[UsageKey, PurposeSpend] = {}
    for key, spent in usage.items():
        if key.user_id in people:
            key = replace(key, user_id=None)
        kept.setdefault(key, PurposeSpend()).add(
            spent.model_calls,
            spent.input_tokens,
            spent.output_tokens,
            estimated_calls=spent.estimated_calls,
        )
    return kept
