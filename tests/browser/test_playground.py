"""The playground in a real browser: Debian's Chromium, driven by Playwright, against
`python -m app dev` started as a subprocess on a fresh data folder (embedded servers). The
browser opens the link the stack printed, as a person would; its token works once.
(test_newcomer.py writes the README's screenshot.)"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.devstack import DevStack, running_dev_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

CHROMIUM = "/usr/bin/chromium"
# As root Chromium needs --no-sandbox; the rest keep it off a network it cannot reach.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 20_000
# Assertions wait for the page as long as actions do: a reply or a memory job on a loaded
# machine (four test workers, the local embedding model) takes longer than Playwright's 5 s.
expect.set_options(timeout=WAIT_MS)

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        not Path(CHROMIUM).exists() and not os.environ.get("CI"),
        reason="Debian's chromium is not installed (bash .ci/run installs it)",
    ),
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevStack]:
    with running_dev_stack(tmp_path_factory.mktemp("browser") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def signed_in(stack: DevStack, browser: Any) -> Iterator[Any]:
    """One browser profile that opened the printed link: its session cookie serves every
    tab after it (the harness keeps a copy for its own admin calls)."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(WAIT_MS)
    first = context.new_page()
    first.goto(stack.link)
    expect(first.locator("#live")).to_contain_text("connected")
    assert first.url == f"{stack.url}/playground"  # the spent token left the address bar
    [cookie] = context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
        "playground_session",
        True,
        "Strict",
    )
    stack.session = cookie["value"]
    first.close()
    yield context
    context.close()


@pytest.fixture
def page(stack: DevStack, signed_in: Any) -> Iterator[Any]:
    tab = signed_in.new_page()
    tab.goto(f"{stack.url}/playground")
    expect(tab.locator("#live")).to_contain_text("connected")
    yield tab
    tab.close()


def test_a_browser_without_the_link_gets_no_secrets(
    stack: DevStack, signed_in: Any, browser: Any
) -> None:
    context = browser.new_context()
    context.set_default_timeout(WAIT_MS)
    stranger = context.new_page()
    answers: list[Any] = []
    stranger.on("response", lambda r: answers.append(r) if "config.json" in r.url else None)
    stranger.goto(stack.link)  # the link again, once it was spent
    expect(stranger.locator("#live")).to_contain_text("printed on its console")
    assert [answer.status for answer in answers] == [403]
    assert stack.config["gatewayToken"] not in answers[0].text()
    assert context.cookies() == []
    context.close()


def send(page: Any, text: str, *, mention: bool = True) -> None:
    """Type into the message box and press Enter, as a person would."""
    box = page.get_by_label("Mention @companion")
    box.set_checked(mention)
    field = page.locator("#text")
    field.fill(text)
    field.press("Enter")
    expect(field).to_have_value("")
    expect(page.locator("#send-status")).to_have_text("")


def open_channel(page: Any, name: str) -> None:
    page.locator("#channels").get_by_role("button", name=name).click()


def memory_dm(page: Any, fact: str) -> None:
    """`!memory show` until its DM lists ``fact`` (the memory job runs after the reply)."""
    for attempt in range(4):
        open_channel(page, "general")
        confirmations = page.locator("#messages li.msg.bot", has_text="sent you a DM")
        before = confirmations.count()
        send(page, "!memory show")
        expect(confirmations).to_have_count(before + 1)
        page.locator("#dm-button").click()
        expect(page.locator("#channel-title")).to_contain_text("DM Alice")
        listing = page.locator("#messages li.msg.bot").last
        if fact in listing.inner_text() or attempt == 3:
            expect(listing).to_contain_text(fact)
            return


def test_alice_chats_with_the_bot_and_a_nightly_is_rolled_back(
    page: Any, stack: DevStack, tmp_path: Path
) -> None:
    expect(page.locator("#models-note")).to_contain_text("No ANTHROPIC_API_KEY")
    expect(page.get_by_label("You are")).to_have_value(stack.config["people"][0]["id"])

    send(page, "I love green tea")
    mine = page.locator("#messages li.msg[data-author='Alice']").last
    expect(mine).to_contain_text("@companion I love green tea")
    expect(mine.locator(".reactions")).to_contain_text("❤️")
    reply = page.locator("#messages li.msg.bot").last
    expect(reply).to_contain_text("I'll remember that: Alice loves green tea.")
    expect(reply).to_contain_text("replying to Alice")

    memory_dm(page, "Alice loves green tea.")

    open_channel(page, "general")
    send(page, "I'm training for a marathon", mention=False)
    expect(page.locator("#messages")).to_contain_text("I'm training for a marathon")
    page.get_by_role("button", name="Run nightly now").click()
    status = page.locator("#nightly-status")
    expect(status).to_contain_text("finished: added 1", timeout=60_000)

    page.locator("#runs").get_by_role("button", name="Roll back run #1…").click()
    report = page.locator("#rollback")
    expect(report).to_be_visible()
    expect(report).to_contain_text("Dry run: rolling back run #1")
    expect(report).to_contain_text("memories it added, to delete: #2")
    runs = httpx.get(
        f"{stack.url}/nightly/runs/1",
        headers={"authorization": f"Bearer {stack.config['adminSecret']}"},
        timeout=5,
    ).json()
    assert runs["rolledBackAt"] is None  # the dry run changed nothing
    page.get_by_role("button", name="Confirm rollback").click()
    expect(status).to_contain_text("Rolled back run #1: deleted 1")
    expect(page.locator("#run-1")).to_contain_text("rolled back")

    shot = tmp_path / "playground.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000


def test_the_console_shows_alices_memories_and_her_ledger(page: Any, stack: DevStack) -> None:
    send(page, "my cat is called Miso")
    expect(page.locator("#messages li.msg.bot").last).to_contain_text("Alice's cat is called Miso.")
    page.get_by_role("button", name="Refresh").click()
    memories, ledger = page.locator("#memories"), page.locator("#ledger")
    expect(memories).to_contain_text("Alice's cat is called Miso.")
    expect(memories).to_contain_text("source: self")
    expect(memories).to_contain_text("learned in: Playground (guild)")
    memories.locator("summary").first.click()
    source = memories.locator("li.source").first
    expect(source).to_contain_text("#general in Playground: https://discord.com/channels/")
    expect(ledger.locator("li.entry.action-add")).not_to_have_count(0)
    expect(ledger.locator("li.entry.action-read")).not_to_have_count(0)
    expect(ledger).to_contain_text("by extraction")


def test_bob_edits_deletes_reacts_and_replies_to_the_bot(page: Any, stack: DevStack) -> None:
    page.get_by_label("You are").select_option(label="Bob")
    open_channel(page, "random")
    expect(page.locator("#channel-title")).to_have_text("#random")

    send(page, "hello there", mention=False)
    mine = page.locator("#messages li.msg[data-author='Bob']").last
    expect(mine).to_contain_text("hello there")
    mine.get_by_role("button", name="Edit").click()
    editor = page.get_by_label("Edit message")
    editor.fill("hello again")
    editor.press("Enter")
    expect(mine).to_contain_text("hello again")
    expect(mine).to_contain_text("(edited)")
    mine.get_by_role("button", name="React with 👍").click()
    expect(mine.locator(".reactions")).to_contain_text("👍 1")
    mine.get_by_role("button", name="Delete").click()
    expect(mine).to_contain_text("(message deleted)")

    send(page, "I'm a nurse")
    reply = page.locator("#messages li.msg.bot").last
    expect(reply).to_contain_text("I'll remember that: Bob is a nurse.")
    reply.get_by_role("button", name="Reply").click()
    expect(page.locator("#replying")).to_contain_text("Replying to companion")
    send(page, "no, I'm a doctor", mention=False)
    answer = page.locator("#messages li.msg[data-author='Bob']").last
    expect(answer).to_contain_text("replying to companion")
    expect(answer).to_contain_text("no, I'm a doctor")


def png(width: int = 8, height: int = 8) -> bytes:
    """A small valid PNG (a blue square), so the page can show it as the browser would."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x30\x60\xd0" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_alice_attaches_a_photo_and_a_file_and_sees_the_bot_typing(
    page: Any, stack: DevStack, tmp_path: Path
) -> None:
    photo, notes = tmp_path / "cat.png", tmp_path / "notes.txt"
    photo.write_bytes(png())
    notes.write_text("Shopping list\nmilk\neggs\n", encoding="utf-8")
    page.locator("#attach").set_input_files([str(photo), str(notes)])
    expect(page.locator("#attached")).to_contain_text("cat.png")

    send(page, "what do you see in these?")
    typing = page.locator("#typing")
    expect(typing).to_have_text("companion is typing…")  # the demo takes a moment to write
    reply = page.locator("#messages li.msg.bot", has_text="I can see your image")
    expect(reply).to_contain_text("I can see your image: cat.png.")
    expect(reply).to_contain_text("I read notes.txt (3 lines); it starts: “Shopping list”.")
    expect(typing).to_have_text("")  # the reply ended it

    mine = page.locator("#messages li.msg[data-author='Alice']", has_text="what do you see")
    picture = mine.locator(".files img")
    expect(picture).to_have_attribute("alt", "image cat.png")
    assert picture.evaluate("img => img.naturalWidth") == 8  # served by the fake CDN
    expect(mine.locator(".files")).to_contain_text("notes.txt")


def test_a_thread_under_general_and_a_japanese_statement_remembered(
    page: Any, stack: DevStack
) -> None:
    page.get_by_label("New thread in #general").fill("週末の予定")
    page.get_by_role("button", name="Start thread").click()
    expect(page.locator("#channel-title")).to_have_text("#general › 週末の予定")
    expect(page.get_by_role("button", name="thread 週末の予定 in #general")).to_be_visible()

    send(page, "私は京都に住んでいます")
    reply = page.locator("#messages li.msg.bot").last
    expect(reply).to_contain_text("覚えておくね：Aliceは京都に住んでいます。")
    recalled = page.locator("#messages li.msg.bot", has_text="覚えていること")
    for attempt in range(4):  # the memory job runs after the reply (and embeds what it writes)
        send(page, "私のこと覚えてる？")
        # A reply waits for the local embedding model too (the query, the demo's recall).
        expect(page.locator("#messages li.msg.bot")).to_have_count(2 + attempt, timeout=20_000)
        if recalled.filter(has_text="Aliceは京都に住んでいます。").count():
            break
    expect(recalled.last).to_contain_text("Aliceは京都に住んでいます。")

    page.get_by_role("button", name="Refresh").click()
    memories, ledger = page.locator("#memories"), page.locator("#ledger")
    expect(memories).to_contain_text("Aliceは京都に住んでいます。")
    memories.locator("summary").first.click()
    expect(memories.locator("li.source").first).to_contain_text("#general › 週末の予定")
    expect(ledger).not_to_contain_text("by admin")  # the console's own reads, hidden
    page.get_by_label("Show the console's own reads").check()
    expect(ledger).to_contain_text("by admin")


def slash_command(page: Any, command: str) -> None:
    """Type "/" and a command's start, then choose it in the menu."""
    field = page.locator("#text")
    field.fill(command[:4])
    page.locator("#slash").get_by_role("button", name=command).click()


def test_alice_forgets_with_a_slash_command_and_only_she_sees_the_answers(
    page: Any, stack: DevStack
) -> None:
    send(page, "I love hiking")
    expect(page.locator("#messages li.msg.bot").last).to_contain_text("Alice loves hiking.")
    answers = page.locator("#messages li.slash-answer")
    for attempt in range(4):  # the memory job runs after the reply
        before = answers.count()
        slash_command(page, "/memory show")
        page.get_by_role("button", name="Send /memory show").click()
        expect(answers).to_have_count(before + 1)
        expect(answers.last).not_to_contain_text("thinking")
        if "Alice loves hiking." in answers.last.inner_text() or attempt == 3:
            break
    expect(answers.last).to_contain_text("Alice loves hiking.")
    expect(answers.last).to_contain_text("Only you can see this")

    slash_command(page, "/memory forget")
    page.locator("#slash-memory").press_sequentially("hik")
    choice = page.locator("#slash-memory-choices").get_by_role("button", name="Alice loves hiking")
    choice.click()
    page.get_by_role("button", name="Send /memory forget").click()
    expect(answers.last).to_contain_text("Done: I forgot memory")

    page.get_by_label("You are").select_option(label="Bob")
    expect(page.locator("#messages li.slash-answer")).to_have_count(0)  # Alice's alone
    page.get_by_label("You are").select_option(label="Alice")
    expect(answers.last).to_contain_text("Done: I forgot memory")


def test_the_slash_menu_opens_when_its_script_arrived_after_the_page_started(
    stack: DevStack, signed_in: Any
) -> None:
    """On a slow connection slash.js (deferred) can run after the page showed its first
    channel: the menu must not depend on having seen that."""
    tab = signed_in.new_page()
    held: list[Any] = []
    tab.route("**/playground/slash.js", lambda route: held.append(route))
    tab.goto(f"{stack.url}/playground", wait_until="commit")
    expect(tab.locator("#live")).to_contain_text("connected")  # started: its channel shown
    assert len(held) == 1
    held[0].continue_()
    tab.wait_for_function("() => window.playground.listeners.length > 0")  # slash.js ran

    slash_command(tab, "/memory show")
    expect(tab.get_by_role("button", name="Send /memory show")).to_be_visible()
    tab.close()
