"""Request and response bodies of the admin API (camelCase on the wire; the OpenAPI
document at /openapi.json)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from app.directory.store import MAX_PERSONA_CHARS, clean_persona


class CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class RollbackRequest(CamelModel):
    """Absent or ``{}``: the latest run. Strict: ``"12"`` or ``true`` for an id is a 422."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, strict=True, extra="forbid"
    )

    run_id: int | None = Field(
        default=None, ge=1, le=2**63 - 1, description="the run to undo; latest if absent"
    )
    dry_run: bool = Field(default=False, description="report the plan without changing anything")


class SkippedChange(CamelModel):
    memory_id: int
    action: Literal["add", "update", "delete"]
    reason: str


class RollbackReport(CamelModel):
    run_id: int
    dry_run: bool
    deleted: list[int] = Field(description="memories the run added, deleted again")
    restored: list[int] = Field(description="memories the run updated, put back")
    reinserted: list[int] = Field(description="memories the run deleted, brought back")
    skipped: list[SkippedChange] = Field(description="changes left alone, with the reason")


class ContentRedactedBody(CamelModel):
    content_redacted: Literal[True] = True
    run_id: int
    detail: str = (
        "the run's ledger text is past LEDGER_CONTENT_DAYS and was removed: it cannot be undone"
    )


class AlreadyRolledBackBody(CamelModel):
    already_rolled_back: Literal[True] = True
    run_id: int


class NightlyStartedBody(CamelModel):
    run_id: int
    day: date


class AlreadyRanBody(CamelModel):
    already_ran: Literal[True] = True
    run_id: int


class NotQueuedBody(CamelModel):
    detail: str = "the run was created but its first step could not be queued; it resumes soon"
    run_id: int


class RunSummary(CamelModel):
    added: list[int] = Field(default_factory=list)
    updated: list[int] = Field(default_factory=list)
    deleted: list[int] = Field(default_factory=list)
    decayed: list[int] = Field(default_factory=list, description="removed by the decay pass")
    expired: list[int] = Field(
        default_factory=list, description="purged past MEMORY_RETENTION_DAYS (MEM-06)"
    )
    errors: list[str] = Field(default_factory=list)
    decision_calls: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class StyleRevision(CamelModel):
    id: int
    guild_id: str | None = Field(
        description="the guild it was made for and applies in; null: a deployment-wide "
        "revision from before styles were per guild, applied nowhere"
    )
    content: str
    created_at: datetime
    reverted_at: datetime | None


class NightlyRunBody(CamelModel):
    id: int
    run_id: int
    day: date
    status: Literal["running", "finished", "failed"]
    step: str | None = Field(description="the pending step while running")
    window_start: datetime | None
    window_end: datetime | None
    diary: str | None
    summary: RunSummary
    style_revisions: list[StyleRevision] = Field(description="one per guild the night revised")
    started_at: datetime
    finished_at: datetime | None
    rolled_back_at: datetime | None


class ErrorBody(BaseModel):
    detail: str


class OriginBody(CamelModel):
    kind: Literal["guild", "dm", "unknown", "any"] = Field(
        description="where it was learned: a guild, a DM, unknown (private), or any (by hand)"
    )
    guild_id: str | None = Field(description="the guild, when kind is guild")


class SourceBody(CamelModel):
    message_id: str
    channel_id: str
    guild_id: str | None = Field(description="null for a DM")
    link: str = Field(description="jump link to the message")
    batch: str | None = Field(description="the write path's trigger (reply, nightly, batch)")


class MemoryBody(CamelModel):
    id: int
    user_id: str
    content: str
    source: Literal["self", "operator", "import"]
    origin: OriginBody
    sources: list[SourceBody]
    created_at: datetime | None
    updated_at: datetime | None


class LedgerRowBody(CamelModel):
    id: int
    memory_id: int | None
    user_id: str
    actor: str
    action: Literal["read", "add", "update", "delete", "rollback"]
    reason: str
    before: Any = Field(description="the memory before (JSON), or {'redacted': true}")
    after: Any = Field(description="after (JSON); a read's list of memory ids")
    run_id: int | None
    created_at: datetime


class LedgerPage(CamelModel):
    rows: list[LedgerRowBody] = Field(description="newest first")
    next_before: int | None = Field(description="pass as ?before= for the next page")


class ErasureStartedBody(CamelModel):
    erasure_id: int
    status: Literal["running", "done", "failed"]


class ErasureBody(CamelModel):
    """One erasure: its state and, once done, its receipt (counts per table only)."""

    erasure_id: int
    user_id: str
    status: Literal["running", "done", "failed"]
    receipt: dict[str, int] | None = Field(
        description="what was removed, blanked or replaced, counted per kind; null until done"
    )
    started_at: datetime
    finished_at: datetime | None


class DeadLetterBody(CamelModel):
    """A given-up event: what it was and why, never its payload (no message text)."""

    id: str = Field(description="the event's de-duplication id (a message id for messages)")
    type: str = Field(description="the gateway dispatch type, e.g. MESSAGE_CREATE")
    received_at: datetime
    dead_at: datetime = Field(description="when its last attempt failed")
    attempts: int
    last_error: str | None = Field(description="the last failure's exception type")


class DeadLettersBody(CamelModel):
    events: list[DeadLetterBody] = Field(description="newest dead first, at most `limit`")
    total: int = Field(description="every dead letter, however many are listed")


class ReplayQueuedBody(CamelModel):
    event_id: str
    queued: bool = Field(
        description="false when Redis refused the job; the sweeper enqueues it within seconds"
    )


class NotDeadBody(CamelModel):
    detail: str = "the event is not dead: it is pending or handled"
    event_id: str


ChannelMode = Literal["mention", "free", "off"]


class OwnChannelSettings(CamelModel):
    mode: ChannelMode | None = Field(description="set on this channel itself; null: not set")
    persona: str | None = Field(description="set on this channel itself; null: not set")
    model: str | None = Field(
        default=None, description="set on this channel itself (one of CHAT_MODELS); null: not set"
    )


class ChannelSettingsBody(CamelModel):
    """What holds in the channel: its own settings, else its parent's (a thread), else the
    default (`mention`, no persona)."""

    channel_id: str
    mode: ChannelMode
    persona: str | None = Field(description="added to the persona's style section here")
    parent_id: str | None = Field(description="the parent channel, for a thread")
    model: str | None = Field(
        default=None, description="the chat model of replies and tasks here; null: CHAT_MODEL"
    )
    own: OwnChannelSettings


class ChannelSettingsUpdate(CamelModel):
    """The same settings as `!bot channel mode|persona|model`. A field left out is unchanged;
    null unsets it (a thread then follows its parent, a channel the default)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, strict=True, extra="forbid"
    )

    mode: ChannelMode | None = None
    persona: str | None = Field(default=None, min_length=1, max_length=MAX_PERSONA_CHARS)
    model: str | None = Field(
        default=None, min_length=1, description="one of CHAT_MODELS (400 otherwise)"
    )

    @field_validator("persona")
    @classmethod
    def _plain_text(cls, value: str | None) -> str | None:
        # As stored: control characters out; nothing left is refused like an empty one.
        return clean_persona(value) if value is not None else None


class UsageSpent(CamelModel):
    calls: int = Field(description="model and decision calls, answered or not")
    input_tokens: int
    output_tokens: int = Field(
        description="a decision over JEV_URL counts the tokens its answer's headers report"
    )
    estimated_calls: int = Field(
        description="of `calls`, those whose server reported no usage (an OpenAI-compatible "
        "one): their tokens, counted in the tokens and the daily caps, are an estimate of "
        "about four characters a token; 0 when every call's usage was reported"
    )


class UsageRowBody(UsageSpent):
    guild_id: str | None = Field(description="the guild; null for DMs (or no guild at all)")
    user_id: str | None = Field(
        description="whom the calls were for; null for nobody in particular (episodes, diary)"
    )
    purpose: str = Field(
        description="a chat purpose (reply, memory_text, diary, episode, style, task) or a "
        "decision question id (is_task, worth_keeping, …)"
    )


class UsageBody(CamelModel):
    day: date = Field(description="the JST day")
    guild_id: str | None = Field(description="the guild asked for; null: every guild and DM")
    total: UsageSpent = Field(description="the whole day there, every row counted")
    rows: list[UsageRowBody] = Field(description="most tokens first, at most `limit`")
    more: int = Field(description="rows beyond `limit`, not listed")


AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "missing or wrong bearer token"},
    503: {"model": ErrorBody, "description": "ADMIN_SECRET is not set"},
}
