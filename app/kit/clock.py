"""Time helpers: UTC now, JST day labels, the nightly window."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

JST = ZoneInfo("Asia/Tokyo")


def utcnow() -> datetime:
    return datetime.now(UTC)


def jst_day(moment: datetime) -> date:
    return moment.astimezone(JST).date()


def previous_day_window(moment: datetime) -> tuple[datetime, datetime]:
    """The 24 hours before ``moment``: the nightly run's window."""
    return moment - timedelta(hours=24), moment
