"""The playground's chat outlives a restart: the feed's history is kept in the data folder
(typing indicators aside), bounded, and a new feed goes on numbering after it; the files
people attached stay on the fake CDN."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from app.dev.playground import FEED_SIZE, Feed
from app.discord.fake import FakeCDN


def test_a_restarted_feed_replays_what_was_said_and_numbers_on_after_it(tmp_path: Path) -> None:
    kept = tmp_path / "history.jsonl"
    before = Feed(kept_in=kept)
    before.publish("frame", {"t": "MESSAGE_CREATE", "d": {"id": "1", "content": "I love tea"}})
    before.publish("typing", {"channel_id": "9"})
    before.publish("frame", {"t": "THREAD_CREATE", "d": {"id": "2", "name": "tea talk"}})

    after = Feed(kept_in=kept)
    after.publish("message", {"id": "3", "content": "Noted!"})

    kinds = [(i, json.loads(event)["kind"]) for i, event in after.history]
    assert kinds == [(1, "frame"), (3, "frame"), (4, "message")]
    assert json.loads(after.history[1][1])["data"]["d"]["name"] == "tea talk"


def test_the_kept_history_is_bounded_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    kept = tmp_path / "history.jsonl"
    lines = [json.dumps({"id": i, "event": "{}"}) for i in range(1, FEED_SIZE + 11)]
    kept.write_text("\n".join([*lines, '{"id": 99999, "ev']) + "\n")

    feed = Feed(kept_in=kept)

    assert [i for i, _ in feed.history] == list(range(11, FEED_SIZE + 11))
    assert len(kept.read_text().splitlines()) == FEED_SIZE
    assert oct(kept.stat().st_mode & 0o777) == "0o600"


async def test_a_file_attached_before_a_restart_is_still_served(tmp_path: Path) -> None:
    before = FakeCDN(base_url="http://cdn.test", kept_in=tmp_path / "files")
    attached = before.attachment("cat.txt", b"Miso sleeps all day", "text/plain")

    after = FakeCDN(base_url="http://cdn.test", kept_in=tmp_path / "files")
    transport = httpx.ASGITransport(app=after.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://cdn.test") as cdn:
        kept = await cdn.get(attached["url"].removeprefix("http://cdn.test"))
        missing = await cdn.get("/attachments/1/2/other.txt")

    assert (kept.status_code, kept.text) == (200, "Miso sleeps all day")
    assert kept.headers["content-type"].startswith("text/plain")
    assert missing.status_code == 404
