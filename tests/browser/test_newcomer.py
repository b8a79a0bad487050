"""The newcomer's first minutes in the playground, in Debian's Chromium on a fresh
`python -m app dev`: the chat follows the newest message, a compound statement becomes a
memory per fact, `!memory why` links only the message a fact came from, and the console's
refreshes add no ledger rows while nothing changes. It writes the README's screenshot."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.devstack import DevStack, running_dev_stack
from tests.browser.test_playground import (  # noqa: F401  (the fixtures, for this module's stack)
    WAIT_MS,
    browser,
    expect,
    open_channel,
    pytestmark,
    send,
    signed_in,
)

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "playground.png"
COMPOUND = "I love green tea and my cat is called Miso"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    with running_dev_stack(tmp_path_factory.mktemp("newcomer") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def page(stack: DevStack, signed_in: Any) -> Iterator[Any]:  # noqa: F811
    """One tab for the whole walk, with every failed request and console error it saw."""
    tab = signed_in.new_page()
    tab.failures = []
    tab.on("response", lambda r: tab.failures.append(r.url) if r.status >= 400 else None)
    tab.on("console", lambda m: tab.failures.append(m.text) if m.type == "error" else None)
    tab.goto(f"{stack.url}/playground")
    expect(tab.locator("#live")).to_contain_text("connected")
    yield tab
    tab.close()


def ledger_size(stack: DevStack, person: str) -> int:
    answer = httpx.get(
        f"{stack.url}/users/{person}/memory-log?limit=500",
        headers={"authorization": f"Bearer {stack.config['adminSecret']}"},
        timeout=5,
    )
    assert answer.status_code == 200, answer.text
    return len(answer.json()["rows"])


def bob_says(page: Any, text: str) -> None:
    """Bob posts in #general (a frame to /webhook, as his own client would) while Alice reads."""
    page.evaluate(
        """async (text) => {
          const { state, dispatch } = window.playground;
          const bob = state.config.people[1];
          const id = (BigInt(Date.now() - 1420070400000) << 22n).toString();
          await dispatch("MESSAGE_CREATE", {
            id, channel_id: state.channel, guild_id: state.config.guild.id, type: 0,
            content: text, timestamp: new Date().toISOString(), mentions: [], attachments: [],
            author: { id: bob.id, username: bob.name.toLowerCase(), global_name: bob.name },
            member: { nick: null, roles: [] },
          });
        }""",
        text,
    )


def test_the_chat_follows_the_newest_message_unless_the_reader_scrolled_up(page: Any) -> None:
    messages = page.locator("#messages")
    for n in range(1, 11):
        send(page, f"warming up, message {n} of 10", mention=False)
        expect(messages.locator("li.msg").last).to_contain_text(f"message {n} of 10")
    assert messages.evaluate("list => list.scrollHeight > list.clientHeight")  # it overflows
    expect(messages.locator("li.msg").last).to_be_in_viewport()

    messages.evaluate("list => { list.scrollTop = 0; }")  # Alice scrolls up to read
    bob_says(page, "Bob here: did I miss anything?")
    marker = page.get_by_role("button", name="New messages")
    expect(marker).to_be_visible()
    expect(messages.locator("li.msg").last).to_contain_text("Bob here")
    expect(messages.locator("li.msg").last).not_to_be_in_viewport()
    marker.click()
    expect(messages.locator("li.msg").last).to_be_in_viewport()
    expect(marker).to_be_hidden()


def test_a_compound_statement_gives_two_memories_and_why_links_only_its_message(
    page: Any, stack: DevStack
) -> None:
    send(page, COMPOUND)
    said = page.locator("#messages li.msg[data-author='Alice']", has_text=COMPOUND).last
    said_id = (said.get_attribute("id") or "").removeprefix("m-")
    reply = page.locator("#messages li.msg.bot").last
    expect(reply).to_contain_text("Alice loves green tea.")
    expect(reply).to_contain_text("Alice's cat is called Miso.")

    memories = page.locator("#memories li.memory")  # the console follows the memory job
    expect(memories).to_have_count(2, timeout=60_000)
    cat = memories.filter(has_text="Alice's cat is called Miso.")
    cat_id = re.sub(r"\D", "", cat.locator("strong").inner_text())

    send(page, f"!memory why {cat_id}", mention=False)
    page.locator("#dm-button").click()
    why = page.locator("#messages li.msg.bot", has_text=f"Memory {cat_id}:")  # `id`, as code.last
    expect(why).to_contain_text("From these messages:")
    links = re.findall(r"https://discord\.com/channels/\S+", why.inner_text())
    assert [link.rsplit("/", 1)[1] for link in links] == [said_id]
    open_channel(page, "general")


def test_the_consoles_refreshes_add_no_ledger_rows_while_nothing_changes(
    page: Any, stack: DevStack
) -> None:
    alice = stack.config["people"][0]["id"]
    refresh = page.get_by_role("button", name="Refresh")
    with page.expect_response(re.compile(r"/memory-log")):
        refresh.click()
    before = ledger_size(stack, alice)
    for _ in range(3):
        with page.expect_response(re.compile(r"/memory-log")):
            refresh.click()
    assert ledger_size(stack, alice) == before


def test_staff_mention_someone_from_the_member_list_and_see_their_name(
    page: Any, stack: DevStack
) -> None:
    alice = stack.config["people"][0]["id"]
    page.get_by_label("You are").select_option(label="Sam (staff)")
    field = page.locator("#text")
    field.fill("!bot memory ")
    page.locator("#members").get_by_role("button", name=re.compile("^Alice")).click()
    expect(field).to_have_value(f"!bot memory <@{alice}> ")
    field.press("Enter")
    sent = page.locator("#messages li.msg[data-author='Sam']").last
    expect(sent).to_contain_text("!bot memory @Alice")
    expect(sent.locator(".mention")).to_have_text("@Alice")

    page.locator("#dm-button").click()
    listing = page.locator("#messages li.msg.bot").last
    expect(listing).to_contain_text("Alice's cat is called Miso.")
    page.get_by_label("You are").select_option(label="Alice")
    open_channel(page, "general")


def test_a_reload_counts_nothing_as_unread_and_no_request_fails(page: Any) -> None:
    page.reload()
    expect(page.locator("#live")).to_contain_text("connected")
    expect(page.locator("#messages li.msg").last).to_be_in_viewport()
    expect(page.locator("[data-channel] .badge:visible")).to_have_count(0)
    assert page.failures == []


def test_the_readmes_screenshot_shows_the_playground_as_it_is(page: Any) -> None:
    page.locator("#memories summary").first.click()
    page.screenshot(path=str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 10_000
