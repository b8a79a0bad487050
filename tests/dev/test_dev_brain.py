"""The demo brain's rules, on prompt texts shaped like the bot's (pure, no servers)."""

from __future__ import annotations

import json

import pytest

from app.dev import brain
from app.dev.models import RULES
from app.discord.attachments import AttachmentRef, Fetched, Image, TextFile, content_blocks

CONVERSATION = (
    "Conversation (lines tagged [bot, context only] are the bot's own words and are never "
    "a source of facts about anyone):\n"
)


def exchange(*lines: str) -> str:
    return CONVERSATION + "\n".join(lines)


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        ("<@1100000000000000100> I love green tea!", "Alice loves green tea."),
        ("I'm training for a marathon", "Alice is training for a marathon."),
        ("my cat is called Miso", "Alice's cat is called Miso."),
        ("I live in Osaka now", "Alice lives in Osaka now."),
        ("I love my dog Rex", "Alice loves their dog Rex."),
        ("I don't like coffee anymore", "Alice no longer likes coffee."),
        ("Hello there. I work at a bakery.", "Alice works at a bakery."),
    ],
)
def test_a_first_person_statement_becomes_a_note_about_the_speaker(said: str, fact: str) -> None:
    found = brain.statement("Alice", said)
    assert found is not None and found.fact == fact


@pytest.mark.parametrize(
    "said", ["hi!", "what do you know about me?", "I'm fine", "I have a question", "Bob loves tea"]
)
def test_small_talk_questions_and_other_people_are_not_worth_keeping(said: str) -> None:
    prompt = exchange(f"[speaker] Alice: {said}", "[bot, context only] companion: Hi Alice!")
    assert brain.statement("Alice", said) is None
    assert brain.worth_keeping(prompt) < 0.5


def test_only_the_speakers_lines_count_not_the_bots_or_others() -> None:
    prompt = exchange(
        "[other person] Bob: I love jazz",
        "[bot, context only] companion: I love helping",
        "[speaker] Alice: nice weather",
    )
    assert brain.worth_keeping(prompt) < 0.5
    assert json.loads(brain.memory_note(["…"], prompt + "\n\nWrite a new note about the speaker."))[
        "subject"
    ] == ("none")


def test_the_writer_answers_the_json_the_write_path_expects() -> None:
    request = exchange("[speaker] Alice: I love green tea") + (
        "\n\nWrite a new note about the speaker."
    )
    text = brain.chat_text(
        ["You write one short memory note …"], [{"role": "user", "content": request}]
    )
    assert json.loads(text) == {"subject": "speaker", "fact": "Alice loves green tea."}


def verdict_prompt(said: str, note: str) -> str:
    return (
        exchange(f"[speaker] Alice: {said}")
        + f"\n\nA stored memory about Alice: {json.dumps(note)}\n\nIn light of what Alice said…"
    )


@pytest.mark.parametrize(
    ("said", "note", "verdict"),
    [
        ("I love oolong", "Alice loves green tea.", "keep"),
        ("I don't like green tea anymore", "Alice loves green tea.", "delete"),
        ("I live in Osaka now", "Alice lives in Tokyo.", "update"),
        ("my cat is called Tama", "Alice's cat is called Miso.", "update"),
        ("I love green tea", "Alice loves green tea.", "keep"),
    ],
)
def test_verdicts_keep_unless_the_statement_contradicts(said: str, note: str, verdict: str) -> None:
    assert brain.memory_verdict(verdict_prompt(said, note)) == verdict


def add_prompt(said: str, *listed: tuple[str, str]) -> str:
    lines = "\n".join(f"- [{v}] {json.dumps(n)}" for v, n in listed)
    return exchange(f"[speaker] Alice: {said}") + (
        f"\n\nExisting memories about Alice, with the verdict each just received:\n{lines}\n\n"
        "Did Alice state above a new durable fact…"
    )


def test_a_new_fact_is_added_once_and_a_covered_one_is_not() -> None:
    assert brain.add_memory(add_prompt("I love oolong", ("keep", "Alice loves green tea."))) >= 0.5
    assert brain.add_memory(add_prompt("I love oolong", ("keep", "Alice loves oolong."))) < 0.5
    assert (
        brain.add_memory(add_prompt("I live in Osaka", ("update", "Alice lives in Tokyo."))) < 0.5
    )


def decision(message: str) -> str:
    return f"Recent conversation:\nAlice: {message}\n\nMessage to answer, from Alice:\n{message}"


def test_thanks_and_hi_are_enough_for_an_emoji_and_a_statement_is_not() -> None:
    assert brain.emoji_enough(decision("<@1100000000000000100> thanks!")) is True
    assert brain.emoji_enough(decision("hi")) is True
    assert brain.emoji_enough(decision("<@1100000000000000100> I love green tea")) is False


def test_the_emoji_is_always_one_of_the_options() -> None:
    assert brain.emoji_choice(decision("thank you"), ["👍", "🙏"]) == "🙏"
    assert brain.emoji_choice(decision("thank you"), ["👍", "❤️"]) == "👍"
    assert brain.emoji_choice(decision("I love tea"), ["❤️", "😂"]) == "❤️"


def test_nothing_is_a_task_and_stale_memories_are_kept() -> None:
    assert RULES["is_task"]({"prompt": "search the web for tea"}) is False
    assert RULES["stale_keep"]({"prompt": "…", "options": ["keep", "delete"]}) == "keep"


def test_a_reply_to_the_bot_that_says_no_is_a_correction() -> None:
    prompt = "Bot said:\nYou love tea.\n\nAlice replied:\nno, I love coffee"
    assert brain.is_correction(prompt) is True
    assert brain.is_correction("Bot said:\nHi\n\nAlice replied:\nthanks!") is False


def test_the_reply_uses_the_memory_block_and_answers_the_last_person() -> None:
    system = [
        "What you remember from earlier conversations (notes…):\n\nAbout Alice:\n"
        "- Alice loves green tea.\n- Alice is a night owl.",
        "persona",
    ]
    messages = [
        {"role": "user", "content": "Alice: <@1100000000000000100> what do you remember about me?"},
        {"role": "assistant", "content": "an older bot line logged after it"},
    ]
    text = brain.chat_text(system, messages)
    assert text == "Here's what I remember, Alice: Alice loves green tea. Alice is a night owl."


def test_a_statement_is_acknowledged_in_the_reply() -> None:
    text = brain.reply(["persona"], [{"role": "user", "content": "Bob: I'm a nurse"}])
    assert text == "Thanks for telling me, Bob! I'll remember that: Bob is a nurse."


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        ("私は京都に住んでいます", "Aliceは京都に住んでいます。"),
        ("<@1100000000000000100> 抹茶が好き", "Aliceは抹茶が好きです。"),
        ("わたしは抹茶が大好きです！", "Aliceは抹茶が大好きです。"),
        ("私の猫はミソです", "Aliceの猫はミソです。"),
        ("僕は大阪で働いています", "Aliceは大阪で働いています。"),
        ("私は学生です", "Aliceは学生です。"),
    ],
)
def test_a_japanese_first_person_statement_becomes_a_note(said: str, fact: str) -> None:
    found = brain.statement("Alice", said)
    assert found is not None and found.fact == fact


@pytest.mark.parametrize(
    "said", ["京都に住んでいますか？", "こんにちは", "私は元気です", "抹茶は好き？"]
)
def test_japanese_questions_greetings_and_small_talk_are_not_notes(said: str) -> None:
    assert brain.statement("Alice", said) is None


@pytest.mark.parametrize(
    ("said", "note", "verdict"),
    [
        ("私は大阪に住んでいます", "Aliceは京都に住んでいます。", "update"),
        ("もう抹茶が好きじゃない", "Aliceは抹茶が好きです。", "delete"),
        ("ほうじ茶が好き", "Aliceは抹茶が好きです。", "keep"),
        ("私の猫はタマです", "Aliceの猫はミソです。", "update"),
    ],
)
def test_japanese_contradictions_update_or_delete(said: str, note: str, verdict: str) -> None:
    assert brain.memory_verdict(verdict_prompt(said, note)) == verdict


def test_a_japanese_speaker_is_answered_in_japanese_with_what_is_remembered() -> None:
    system = ["What you remember (…):\n\nAbout Alice:\n- Aliceは京都に住んでいます。", "persona"]
    asked = [{"role": "user", "content": "Alice: 私のこと覚えてる？"}]
    assert (
        brain.reply(system, asked) == "Aliceさんについて覚えていること：Aliceは京都に住んでいます。"
    )
    told = [{"role": "user", "content": "Alice: 抹茶が好き"}]
    assert (
        brain.reply(["persona"], told)
        == "教えてくれてありがとう、Aliceさん！覚えておくね：Aliceは抹茶が好きです。"
    )
    assert brain.emoji_enough(decision("こんにちは！")) is True


def test_the_reply_says_what_it_saw_of_an_image_and_a_text_file() -> None:
    cat = AttachmentRef("cat.png", "image/png", 1000, "https://cdn.discordapp.com/cat.png")
    notes = AttachmentRef("notes.txt", "text/plain", 11, "https://cdn.discordapp.com/notes.txt")
    seen: list[Fetched] = [
        Image(cat, "image/png", b"\x89PNG...."),
        TextFile(notes, "milk\neggs\n", False),
    ]
    line = "Alice: look [attached: cat.png (image/png, 1000 B); notes.txt (text/plain, 11 B)]"
    content = [{"type": "text", "text": line}, *content_blocks("Alice", seen)]
    text = brain.reply(["persona"], [{"role": "user", "content": content}])
    assert text == (
        "I hear you, Alice. Tell me what you like, and I'll remember it. "
        "I can see your image: cat.png. I read notes.txt (2 lines); it starts: “milk”."
    )
