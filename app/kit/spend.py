"""What a block of work spent on models: decision calls, chat calls and tokens, per purpose,
and per payer (the guild and person a call was for) and JST day, for the usage rows.

``with spend_scope() as spend:`` collects everything awaited inside the block, including tasks
it starts (they inherit the context); nested scopes each see their own share. Calls made outside
any scope are simply not tracked. ``with paid_by(guild_id, user_id):`` names whom the calls
inside are for; outside it they are nobody's (a DM or no guild, no person)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from typing import Any

from app.kit.clock import jst_day, utcnow


class Budget(StrEnum):
    PERSON = "person"  # DAILY_TOKENS_PER_USER: the person's tokens, everywhere
    GUILD = "guild"  # DAILY_TOKENS_PER_GUILD: everyone's tokens in the guild


@dataclass
class PurposeSpend:
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # Calls whose server reported no usage: their tokens (counted above) are our estimate.
    estimated_calls: int = 0

    def add(
        self, calls: int, input_tokens: int, output_tokens: int, *, estimated_calls: int = 0
    ) -> None:
        self.model_calls += calls
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.estimated_calls += estimated_calls


@dataclass(frozen=True, slots=True)
class Payer:
    """Whom a call is for: the guild (None: a DM, or no guild) and the person (None: nobody
    in particular, such as the nightly diary)."""

    guild_id: int | None = None
    user_id: int | None = None


@dataclass(frozen=True, slots=True, order=True)
class UsageKey:
    """One usage row: a JST day, a payer and a purpose (a chat purpose or a question id)."""

    day: date
    guild_id: int | None
    user_id: int | None
    purpose: str


@dataclass
class Spend:
    decision_calls: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    by_purpose: dict[str, PurposeSpend] = field(default_factory=dict)
    # Chat and decision calls alike, by day, payer and purpose: what the usage table records.
    usage: dict[UsageKey, PurposeSpend] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the nightly run stores this)."""
        return {
            "decision_calls": self.decision_calls,
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "by_purpose": {
                purpose: vars(spent).copy() for purpose, spent in sorted(self.by_purpose.items())
            },
        }

    def charge(
        self,
        key: UsageKey,
        calls: int,
        input_tokens: int,
        output_tokens: int,
        *,
        estimated_calls: int = 0,
    ) -> None:
        self.usage.setdefault(key, PurposeSpend()).add(
            calls, input_tokens, output_tokens, estimated_calls=estimated_calls
        )


# The open scopes, innermost last; a tuple so a child task's copy of the context stays valid.
_scopes: contextvars.ContextVar[tuple[Spend, ...]] = contextvars.ContextVar(
    "spend_scopes", default=()
)
NOBODY = Payer()
_payer: contextvars.ContextVar[Payer] = contextvars.ContextVar("spend_payer", default=NOBODY)


@contextmanager
def spend_scope() -> Iterator[Spend]:
    spend = Spend()
    token = _scopes.set((*_scopes.get(), spend))
    try:
        yield spend
    finally:
        _scopes.reset(token)


@contextmanager
def paid_by(guild_id: int | None, user_id: int | None) -> Iterator[None]:
    token = _payer.set(Payer(guild_id, user_id))
    try:
        yield
    finally:
        _payer.reset(token)


def current_payer() -> Payer:
    return _payer.get()


def unwritten_tokens(payer: Payer, day: date) -> tuple[int, int]:
    """Tokens spent on ``day`` in the open scopes and not yet written as usage rows: the
    payer person's and the payer guild's (the outermost scope holds everything inside it)."""
    scopes = _scopes.get()
    if not scopes:
        return 0, 0
    person = guild = 0
    for key, spent in scopes[0].usage.items():
        if key.day != day:
            continue
        tokens = spent.input_tokens + spent.output_tokens
        if payer.user_id is not None and key.user_id == payer.user_id:
            person += tokens
        if payer.guild_id is not None and key.guild_id == payer.guild_id:
            guild += tokens
    return person, guild


def estimate_tokens(text: str) -> int:
    """About four characters a token: what a server that reports no usage is charged."""
    return max(1, len(text) // 4) if text else 0


def _key(purpose: str) -> UsageKey:
    payer = _payer.get()
    return UsageKey(jst_day(utcnow()), payer.guild_id, payer.user_id, purpose)


def record_decision(question: str) -> None:
    """Count one decision (answered or not); its tokens, when known, come separately."""
    scopes = _scopes.get()
    if not scopes:
        return
    key = _key(question)
    for spend in scopes:
        spend.decision_calls += 1
        spend.charge(key, 1, 0, 0)


def record_decision_tokens(question: str, *, input_tokens: int, output_tokens: int) -> None:
    """The tokens a decision spent: the in-process model's, or what the decision service's
    answer headers report."""
    scopes = _scopes.get()
    if not scopes:
        return
    key = _key(question)
    for spend in scopes:
        spend.charge(key, 0, input_tokens, output_tokens)


def record_model_call(
    purpose: str, *, input_tokens: int, output_tokens: int, estimated: bool = False
) -> None:
    """Count one model call (successful or not: a failed call has zero tokens). ``estimated``:
    the server reported no usage, so the tokens are our estimate (charged all the same)."""
    scopes = _scopes.get()
    if not scopes:
        return
    key = _key(purpose)
    guessed = 1 if estimated else 0
    for spend in scopes:
        spend.model_calls += 1
        spend.input_tokens += input_tokens
        spend.output_tokens += output_tokens
        spend.by_purpose.setdefault(purpose, PurposeSpend()).add(
            1, input_tokens, output_tokens, estimated_calls=guessed
        )
        spend.charge(key, 1, input_tokens, output_tokens, estimated_calls=guessed)
