"""`python -m app dev` end to end: a subprocess on embedded Postgres and Redis, driven the way
the playground drives it (gateway frames to /webhook, the feed back, the admin API).

Nothing here uses the shared Postgres or Redis; each stack has its own data folder."""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.devstack import DevStack, Playground, running_dev_stack

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    with running_dev_stack(tmp_path_factory.mktemp("dev") / "data") as running:
        running.sign_in()  # as the browser that opens the printed link
        yield running


@pytest.fixture
def playground(stack: DevStack) -> Iterator[Playground]:
    client = Playground(stack)
    yield client
    client.close()


def memories_shown(play: Playground, who: str, *, want: str | None, gone: str | None) -> str:
    """Run `!memory show` as ``who`` until its DM lists ``want`` / no longer lists ``gone``
    (the memory job runs after the reply, so the first listing may predate it)."""
    deadline = time.monotonic() + 20
    while True:
        text = play.dm_after(who, play.say(who, "!memory show"))
        if (want is None or want in text) and (gone is None or gone not in text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"`!memory show` for {who} still says: {text}")


def test_first_start_serves_healthz_and_the_playground_within_a_minute(stack: DevStack) -> None:
    assert stack.ready_after_s < 60
    assert httpx.get(f"{stack.url}/healthz", timeout=5).json() == {"status": "ok"}
    assert httpx.get(f"{stack.url}/readyz", timeout=5).json()["ready"] is True
    page = httpx.get(f"{stack.url}/playground", timeout=5)
    assert page.status_code == 200
    assert "Companion playground" in page.text
    assert "embedded PostgreSQL" in stack.output and "embedded Redis" in stack.output
    assert "demo brain" in stack.output


def test_embedded_servers_listen_on_sockets_in_the_data_folder(stack: DevStack) -> None:
    assert stat.S_ISSOCK((stack.data_dir / "postgres" / ".s.PGSQL.5432").stat().st_mode)
    assert stat.S_ISSOCK((stack.data_dir / "redis" / "redis.sock").stat().st_mode)
    # postmaster.pid's sixth line is the TCP listen address: empty means no TCP at all.
    assert (stack.data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[5] == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful when started as root")
def test_as_root_postgres_runs_as_an_unprivileged_user(stack: DevStack) -> None:
    pgdata = stack.data_dir / "postgres"
    postmaster = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    assert Path(f"/proc/{postmaster}").stat().st_uid != 0
    assert pgdata.stat().st_uid != 0


def test_secrets_are_generated_owner_only(stack: DevStack) -> None:
    secrets_file = stack.data_dir / "secrets.json"
    assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
    stored = json.loads(secrets_file.read_text())
    assert stored["gateway_token"] == stack.config["gatewayToken"]
    assert len(stored["gateway_token"]) >= 32 and len(stored["admin_secret"]) >= 32
    assert stored["gateway_token"] not in stack.output
    assert stored["admin_secret"] not in stack.output


def test_a_mention_gets_a_reaction_and_a_reply_and_the_fact_is_remembered(
    playground: Playground,
) -> None:
    message_id = playground.say("Alice", "I love green tea", mention=True)
    playground.wait_for(
        "the bot's reaction",
        lambda e: e["kind"] == "reaction" and e["data"]["message_id"] == message_id,
    )
    reply = playground.reply_to(message_id)
    assert reply == "Thanks for telling me, Alice! I'll remember that: Alice loves green tea."
    listing = memories_shown(playground, "Alice", want="Alice loves green tea.", gone=None)
    assert "green tea" in listing


def test_a_contradiction_deletes_the_memory(playground: Playground) -> None:
    playground.say("Alice", "I love oolong", mention=True)
    memories_shown(playground, "Alice", want="Alice loves oolong.", gone=None)
    playground.say("Alice", "I don't like oolong anymore", mention=True)
    memories_shown(playground, "Alice", want=None, gone="Alice loves oolong.")


def test_recall_puts_the_memory_in_the_reply(playground: Playground) -> None:
    playground.say("Alice", "I'm a night owl", mention=True)
    memories_shown(playground, "Alice", want="Alice is a night owl.", gone=None)
    question = playground.say("Alice", "what do you remember about me?", mention=True)
    reply = playground.reply_to(question)
    assert reply.startswith("Here's what I remember, Alice:")
    assert "Alice is a night owl." in reply


def test_the_webhook_still_refuses_a_wrong_gateway_token(stack: DevStack) -> None:
    answer = httpx.post(
        f"{stack.url}/webhook",
        json={"op": 0, "t": "MESSAGE_CREATE", "d": {}},
        headers={"x-discord-gateway-token": "not-the-token"},
        timeout=5,
    )
    assert answer.status_code == 401


def test_the_playground_answers_only_to_local_host_names(stack: DevStack) -> None:
    foreign = httpx.get(
        f"{stack.url}/playground/config.json",
        headers={"host": "rebound.example", **stack.cookies},
        timeout=5,
    )
    assert foreign.status_code == 403
    assert "gatewayToken" not in foreign.text


def test_the_config_is_only_for_the_browser_that_opened_the_printed_link(
    stack: DevStack,
) -> None:
    stored = json.loads((stack.data_dir / "secrets.json").read_text())
    token = stack.link.split("?t=", 1)[1]
    config = f"{stack.url}/playground/config.json"
    refused = [
        httpx.get(config, timeout=5),  # any local process, without the link
        httpx.get(config, headers={"x-playground-token": token}, timeout=5),  # spent already
        httpx.get(config, headers={"x-playground-token": "guessed"}, timeout=5),
        httpx.get(config, headers={"cookie": "playground_session=guessed"}, timeout=5),
        httpx.get(f"{stack.url}/playground/events", timeout=5),
        httpx.post(f"{stack.url}/playground/attachments", content=b"x", timeout=5),
    ]
    assert [answer.status_code for answer in refused] == [403] * len(refused)
    for answer in refused:
        assert stored["admin_secret"] not in answer.text
        assert stored["gateway_token"] not in answer.text
        assert "set-cookie" not in answer.headers
    assert "printed on its console" in refused[0].json()["detail"]
    assert stack.config["adminSecret"] == stored["admin_secret"]  # the signed-in browser's


def test_the_data_folder_and_the_log_are_owner_only(stack: DevStack) -> None:
    log = stack.data_dir / "dev.log"
    assert log.stat().st_size > 0
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    # As root, Postgres runs as its own system user, which must pass through to its folder.
    folder = 0o711 if os.geteuid() == 0 else 0o700
    assert stat.S_IMODE(stack.data_dir.stat().st_mode) == folder
    assert stack.link.split("?t=", 1)[1] not in log.read_text()


def test_a_nightly_run_learns_from_an_unaddressed_message_and_rolls_back(
    playground: Playground,
) -> None:
    playground.say("Bob", "I'm training for a marathon")  # no mention: no turn, no reply
    started = playground.admin("POST", "/nightly/run")
    assert started.status_code == 202, started.text
    run_id = started.json()["runId"]
    run = _finished_run(playground, run_id)
    assert run["status"] == "finished", run
    listing = memories_shown(playground, "Bob", want="Bob is training for a marathon.", gone=None)
    # Each listed memory reads "`<id>` · <where it was learned> · <note>".
    line = next(row for row in listing.splitlines() if "Bob is training" in row)
    marathon_id = int(line.split("`")[1])
    assert marathon_id in run["summary"]["added"]

    dry = playground.admin("POST", "/memory/rollback", {"runId": run_id, "dryRun": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["dryRun"] is True and marathon_id in dry.json()["deleted"]
    memories_shown(playground, "Bob", want="Bob is training for a marathon.", gone=None)

    done = playground.admin("POST", "/memory/rollback", {"runId": run_id})
    assert done.status_code == 200, done.text
    assert sorted(done.json()["deleted"]) == sorted(dry.json()["deleted"])
    memories_shown(playground, "Bob", want=None, gone="marathon")
    again = playground.admin("POST", "/memory/rollback", {"runId": run_id, "dryRun": True})
    assert again.status_code == 409


def _finished_run(playground: Playground, run_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run: dict[str, Any] = playground.admin("GET", f"/nightly/runs/{run_id}").json()
        if run["status"] != "running":
            return run
        time.sleep(0.2)  # polling the run's status, bounded by the deadline
    raise AssertionError(f"nightly run {run_id} still running after 60 s")


def test_a_second_start_reuses_the_data_the_secrets_and_the_chat(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with running_dev_stack(data_dir) as first:
        first.sign_in()
        play = Playground(first)
        said = play.say("Alice", "my cat is called Miso", mention=True)
        answer = play.reply_to(said)
        memories_shown(play, "Alice", want="Alice's cat is called Miso.", gone=None)
        play.close()
        secrets_before = (data_dir / "secrets.json").read_text()
    assert first.process.returncode == 0, first.output
    assert "postgres   stopped" in first.output
    assert not (data_dir / "postgres" / "postmaster.pid").exists()

    with running_dev_stack(data_dir) as second:
        assert second.ready_after_s < 60
        assert (data_dir / "secrets.json").read_text() == secrets_before
        assert second.link != first.link  # a new link each start; the secrets stay
        second.sign_in()
        play = Playground(second)
        memories_shown(play, "Alice", want="Alice's cat is called Miso.", gone=None)
        play.accepted(said)  # the chat is still there: the feed replays what was said
        assert play.reply_to(said) == answer
        play.close()
    assert second.process.returncode == 0, second.output
