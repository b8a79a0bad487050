"""The per-person limiter on a real Redis with a clock the test moves: a rolling window, an
answer kept per event (a retried job spends no second slot), one notice per window, and
everything let through when Redis is gone."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from app.usage.limiter import Limit, Limiter
from tests.support.servers import free_port

ALICE, BOB = 2001, 2002


@dataclass
class Clock:
    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_the_window_rolls_a_minute_after_each_admitted_event(redis: Redis) -> None:
    clock = Clock()
    limiter = Limiter(redis, clock=clock)
    assert await limiter.admit(Limit.TURNS, ALICE, "e1", 2)
    clock.now += 30
    assert await limiter.admit(Limit.TURNS, ALICE, "e2", 2)
    assert not await limiter.admit(Limit.TURNS, ALICE, "e3", 2)
    assert await limiter.admit(Limit.TURNS, BOB, "e4", 2)  # each person has their own
    assert await limiter.admit(Limit.COMMANDS, ALICE, "e5", 2)  # and each limit its own
    clock.now += 30.001  # e1 is a minute old: its slot is free again, e2's is not
    assert await limiter.admit(Limit.TURNS, ALICE, "e6", 2)
    assert not await limiter.admit(Limit.TURNS, ALICE, "e7", 2)


async def test_an_event_asked_again_keeps_its_first_answer(redis: Redis) -> None:
    clock = Clock()
    limiter = Limiter(redis, clock=clock)
    assert await limiter.admit(Limit.TURNS, ALICE, "e1", 1)
    assert not await limiter.admit(Limit.TURNS, ALICE, "e2", 1)
    for _ in range(3):  # a retried job: the same answers, and no slot spent
        assert await limiter.admit(Limit.TURNS, ALICE, "e1", 1)
        assert not await limiter.admit(Limit.TURNS, ALICE, "e2", 1)
    assert await redis.zcard(f"limit:turns:{{{ALICE}}}") == 1


async def test_one_notice_per_person_and_kind_per_window(redis: Redis) -> None:
    limiter = Limiter(redis)
    assert await limiter.notice_due("turns", ALICE, "e1", 60)
    assert not await limiter.notice_due("turns", ALICE, "e2", 60)
    assert await limiter.notice_due("turns", ALICE, "e1", 60)  # its retry may still send it
    assert await limiter.notice_due("commands", ALICE, "e3", 60)
    assert await limiter.notice_due("turns", BOB, "e4", 60)
    ttl_ms = await redis.pttl(f"limit:turns:{{{ALICE}}}:notice")
    assert 0 < ttl_ms <= 60_000


async def test_without_redis_everyone_is_let_through_and_no_notice_is_sent() -> None:
    gone = Redis(port=free_port(), socket_connect_timeout=0.2)
    try:
        limiter = Limiter(gone)
        for event in ("e1", "e2", "e3"):
            assert await limiter.admit(Limit.TURNS, ALICE, event, 1)
        assert not await limiter.notice_due("turns", ALICE, "e1", 60)
    finally:
        await gone.aclose()
