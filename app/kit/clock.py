"""Time helpers: UTC now, JST day labels, Discord snowflake timestamps."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

JST = ZoneInfo("Asia/Tokyo")
DISCORD_EPOCH_MS = 1420070400000


def utcnow() -> datetime:
    return datetime.now(UTC)


def jst_day(moment: datetime) -> date:
    return moment.astimezone(JST).date()


def previous_day_window(moment: datetime) -> tuple[datetime, datetime]:
    """The 24 hours before ``moment``: the nightly run's window."""
    return moment - timedelta(hours=24), moment


def snowflake_time(snowflake: int) -> datetime:
    return datetime.fromtimestamp(((snowflake >> 22) + DISCORD_EPOCH_MS) / 1000, tz=UTC)


def parse_discord_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
