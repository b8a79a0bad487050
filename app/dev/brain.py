"""The demo brain: scripted stand-ins for the decision model and the chat model, so that the
local stack without an Anthropic key still remembers, recalls and forgets like the real one.

Pure rules over the prompt texts the bot sends (the same texts the real models get): a
first-person statement ("I love…", "I'm…", "my … is …", and simple Japanese ones such as
「私は京都に住んでいます」 or 「抹茶が好き」) is worth keeping and becomes a note in the
speaker's words; a later statement that contradicts a note updates or deletes it; replies
are short and friendly, in the speaker's language, mention what the prompt's memory block
holds, and say what they saw of an attached image or text file."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.kit.attribution import read_lines, without_suffix

KEEP, UPDATE, DELETE = "keep", "update", "delete"
YES, NO = 0.9, 0.1

_MENTION = re.compile(r"<@!?\d+>")
_GREETING = re.compile(
    r"^(hi|hii+|hello|hey|heya|yo|thanks|thank you|thx|ty|cheers|ok|okay|cool|nice|great|lol|"
    r"good (morning|night|evening)|gm|gn|bye|see you)( (there|all|everyone|bot|again|so much))?"
    r"[\s!.?~]*$",
    re.IGNORECASE,
)
_ASKS_MEMORY = re.compile(
    r"\bwhat (do|did) you (know|remember)\b|\bremember me\b|\babout me\b", re.IGNORECASE
)
_CORRECTION = re.compile(
    r"^(no\b|nope\b|actually\b|wrong\b|that'?s (not|wrong)|not quite|incorrect)", re.IGNORECASE
)
_STOPWORD_TEXT = (
    "a an the is are was am be to of in on at for and or my their i me them they it its "
    "this that with as from now anymore any more no not never longer don't do does doesn't "
    "really very so much also too just"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# Verbs a first-person statement may start with, and their third-person forms.
_VERBS = {
    "love": "loves",
    "like": "likes",
    "enjoy": "enjoys",
    "hate": "hates",
    "prefer": "prefers",
    "live": "lives",
    "work": "works",
    "have": "has",
    "play": "plays",
    "study": "studies",
    "speak": "speaks",
    "own": "owns",
    "want": "wants",
    "collect": "collects",
    "grow": "grows",
    "cook": "cooks",
    "run": "runs",
    "read": "reads",
    "write": "writes",
    "watch": "watches",
    "drink": "drinks",
    "eat": "eats",
    "go": "goes",
    "teach": "teaches",
    "moved": "moved",
    "started": "started",
    "stopped": "stopped",
    "switched": "switched",
    "adopted": "adopted",
    "got": "got",
}
# "I'm fine", "I have a question": small talk, not facts worth a note.
_SMALL_TALK = (
    "fine",
    "good",
    "ok",
    "okay",
    "great",
    "tired",
    "back",
    "here",
    "sorry",
    "sure",
    "bored",
    "hungry",
    "a question",
    "no idea",
    "to ",
    "a minute",
    "not sure",
    "done",
    "busy",
)
# Statements that can hold only one value at a time: a new one replaces the old note.
_SINGLE_VALUED = ("lives", "works", "is from", "moved")

# Japanese: an optional first-person topic, then a few sentence shapes people use.
_JA_SELF = r"(?:(?:私|わたし|僕|ぼく|俺|おれ|あたし|うち)は)?"  # 私は…, or nothing
_JA_POLITE = r"(?:です|だ|なんです|なの)?(?:よ|ね|よね)?$"
_JA_LIVES = re.compile(_JA_SELF + r"(?P<place>.+?)に住んで(?:います|いる|る|ます)(?:よ|ね)?$")
_JA_WORKS = re.compile(_JA_SELF + r"(?P<place>.+?)で働いて(?:います|いる|る|ます)(?:よ|ね)?$")
_JA_LIKES_NOT = re.compile(
    _JA_SELF
    + r"(?:もう)?(?P<thing>.+?)が(?:好きじゃな(?:い|くなった)|好きではな(?:い|くなりました)"
    r"|嫌い)(?:です|になりました|だ)?(?:よ|ね)?$"
)
_JA_LIKES = re.compile(_JA_SELF + r"(?P<thing>.+?)が(?P<much>大)?好き" + _JA_POLITE)
_JA_I = r"(?:私|わたし|僕|ぼく|俺|おれ|あたし|うち)"
_JA_MY = re.compile(_JA_I + r"の(?P<noun>.+?)は(?P<what>.+?)" + _JA_POLITE)
_JA_AM = re.compile(_JA_I + r"は(?P<what>.+?)" + _JA_POLITE)
_JA_SMALL_TALK = ("元気", "大丈夫", "暇", "眠い", "疲れ", "ここ", "忙しい")
_JA_QUESTION = re.compile(r"(?:[?？]|(?:です|ます|でしょう)か|かな)$")
_JA_GREETING = re.compile(
    r"^(こんにちは|こんばんは|おはよう(ございます)?|ありがとう(ございます)?|おやすみ(なさい)?"
    r"|よろしく(お願いします)?|やあ|どうも)[\s!！。〜~]*$"
)
_JA_ASKS_MEMORY = re.compile(r"(覚えて(る|いる|います|ますか)|知って(る|いる)).*[?？]?$|私のこと")


@dataclass(frozen=True, slots=True)
class Statement:
    """A first-person statement rewritten about its speaker."""

    fact: str  # "Alice loves green tea."
    negative: bool  # "I don't like coffee anymore"
    slot: str | None  # lower-case prefix of a single-valued fact ("alice lives", "alice's cat")
    topic: frozenset[str]  # the words it is about, to compare with a stored note


def clean(text: str) -> str:
    """A message as a person reads it: mentions out, whitespace collapsed."""
    return " ".join(_MENTION.sub(" ", text).split())


def _pronouns(rest: str) -> str:
    swaps = {"my": "their", "me": "them", "myself": "themself", "mine": "theirs", "i": "they"}
    return " ".join(swaps.get(word.lower(), word) for word in rest.split())


def _words(text: str) -> frozenset[str]:
    found = re.findall(r"[a-z0-9']+", text.lower())
    return frozenset(word for word in found if word not in _STOPWORDS and len(word) > 1)


def _sentence(name: str, body: str) -> str:
    body = re.sub(r"\s+anymore\b", "", body.rstrip(".!~ "))
    return f"{name}{body}."


def statement(name: str, text: str) -> Statement | None:
    """The first first-person statement in ``text``, about ``name``; None for a question,
    small talk or anything about someone else."""
    found = statements(name, text)
    return found[0] if found else None


def statements(name: str, text: str) -> list[Statement]:
    """Every first-person statement in ``text``, about ``name``, in order ("I love green tea
    and my cat is called Miso" holds two)."""
    pattern = r"(?<=[.!;?。！？])\s*|\s+(?:and|but)\s+(?=i\b|i'm\b|my\b)"
    found = []
    for part in re.split(pattern, clean(text), flags=re.IGNORECASE):
        part = part.strip().rstrip("。！!")
        said = _japanese(name, part) if is_japanese(part) else _statement(name, part)
        if said is not None:
            found.append(said)
    return found


def is_japanese(text: str) -> bool:
    """Any kana or kanji: the demo then reads (and answers) the text as Japanese."""
    return bool(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", text))


def _japanese(name: str, text: str) -> Statement | None:
    """「私は京都に住んでいます」 → 「Aliceは京都に住んでいます。」 and a few shapes like it."""
    if not text or _JA_QUESTION.search(text):
        return None
    for shape, verb in ((_JA_LIVES, "に住んでいます"), (_JA_WORKS, "で働いています")):
        if match := shape.fullmatch(text):
            place = match["place"]
            slot = f"{name}は…{verb}。".lower()  # one place at a time: a new one replaces it
            return Statement(f"{name}は{place}{verb}。", False, slot, frozenset({place}))
    if match := _JA_LIKES_NOT.fullmatch(text):
        thing = match["thing"]
        return Statement(
            f"{name}はもう{thing}が好きではありません。", True, None, frozenset({thing})
        )
    if match := _JA_LIKES.fullmatch(text):
        thing, much = match["thing"], match["much"] or ""
        return Statement(f"{name}は{thing}が{much}好きです。", False, None, frozenset({thing}))
    if match := _JA_MY.fullmatch(text):
        noun, what = match["noun"], match["what"]
        slot = f"{name}の{noun}は…".lower()
        return Statement(f"{name}の{noun}は{what}です。", False, slot, frozenset({noun, what}))
    if (match := _JA_AM.fullmatch(text)) and not match["what"].startswith(_JA_SMALL_TALK):
        what = match["what"]
        return Statement(f"{name}は{what}です。", False, None, frozenset({what}))
    return None


def _small_talk(lowered: str) -> bool:
    rest = re.sub(r"^(i'm|i am|i have|i)\s+", "", lowered).rstrip("!. ")
    return len(rest.split()) <= 3 and rest.startswith(_SMALL_TALK)


def _statement(name: str, text: str) -> Statement | None:
    if not text or text.endswith("?"):
        return None
    lowered = text.lower().replace("’", "'")
    if _small_talk(lowered):
        return None
    if match := re.match(r"(?:i'm|i am) (not |no longer )?(.+)", lowered):
        rest = _pronouns(text[match.start(2) :])
        negative = match.group(1) is not None or " anymore" in lowered
        verb = " is no longer " if negative else " is "
        slot = f"{name} is from".lower() if rest.lower().startswith("from ") else None
        return Statement(_sentence(name, verb + rest), negative, slot, _words(rest))
    if match := re.match(r"my ([a-z' ]{1,30}?) (is|are|was|were) (.+)", lowered):
        noun = text[match.start(1) : match.end(1)]
        rest = _pronouns(text[match.start(3) :])
        fact = _sentence(name, f"'s {noun} {match.group(2)} {rest}")
        return Statement(fact, False, f"{name}'s {noun}".lower(), _words(f"{noun} {rest}"))
    if match := re.match(r"i (?:don't|do not|no longer|never) ([a-z]+) (.+)", lowered):
        verb, rest = match.group(1), _pronouns(text[match.start(2) :])
        return Statement(
            _sentence(name, f" no longer {verb}s {rest}"), True, None, _words(f"{verb} {rest}")
        )
    if (match := re.match(r"i ([a-z]+) (.+)", lowered)) and match.group(1) in _VERBS:
        verb = _VERBS[match.group(1)]
        rest = _pronouns(text[match.start(2) :])
        negative = " anymore" in lowered or verb == "stopped"
        slot = f"{name} {verb}".lower() if verb in _SINGLE_VALUED else None
        return Statement(_sentence(name, f" {verb} {rest}"), negative, slot, _words(rest))
    return None


# --- reading the bot's prompts ---------------------------------------------------------


def speaker_statement(prompt: str) -> Statement | None:
    """The newest statement among the lines marked ``"speaker": true`` (the write path's)."""
    _, found = speaker_statements(prompt)
    return found[-1] if found else None


def speaker_statements(prompt: str) -> tuple[int | None, list[Statement]]:
    """The statements of the newest line marked ``"speaker": true`` that holds any, and that
    line's number in the prompt (its ``"line"``, when the prompt numbers them)."""
    for said in reversed(read_lines(prompt)):
        if said.get("speaker") is True and isinstance(said.get("text"), str):
            found = statements(_name(said), said["text"])
            if found:
                number = said.get("line")
                return (number if isinstance(number, int) else None), found
    return None, []


def _name(said: dict[str, Any]) -> str:
    """The display name of a rendered line's author ("Alice #2001" → "Alice")."""
    return without_suffix(str(said.get("from", ""))).strip() or "friend"


def _last_text(text: str) -> tuple[str, str] | None:
    """(name, text) of the last rendered message in ``text``."""
    lines = [said for said in read_lines(text) if isinstance(said.get("text"), str)]
    return (_name(lines[-1]), lines[-1]["text"]) if lines else None


def _stored_note(prompt: str) -> str | None:
    match = re.search(r"^A stored memory about [^:\n]+: (\".*\")$", prompt, re.MULTILINE)
    if match is None:
        return None
    try:
        note = json.loads(match.group(1))
    except ValueError:
        return None
    return note if isinstance(note, str) else None


def _listed_notes(prompt: str) -> list[tuple[str, str]]:
    """(verdict, note) for each ``- [verdict] "note"`` line of the add question."""
    notes: list[tuple[str, str]] = []
    for match in re.finditer(r"^- \[([^\]]+)\] (\".*\")$", prompt, re.MULTILINE):
        try:
            note = json.loads(match.group(2))
        except ValueError:
            continue
        if isinstance(note, str):
            notes.append((match.group(1), note))
    return notes


def _message_to_answer(prompt: str) -> str:
    _, _, message = prompt.rpartition("Message to answer:\n")
    said = _last_text(message)
    return clean(said[1]) if said else ""


def _same(a: str, b: str) -> bool:
    return a.strip().rstrip(".。").lower() == b.strip().rstrip(".。").lower()


def _about(topic: frozenset[str], note: str) -> bool:
    """Whether a note is about the topic: shared words, or (Japanese, no spaces) the
    topic's text inside the note."""
    return bool(topic & _words(note)) or any(not t.isascii() and t in note for t in topic)


def _fills(slot: str, note: str) -> bool:
    """Whether ``note`` holds the same single-valued fact (``…`` stands for its value)."""
    lowered = note.lower()
    head, dots, tail = slot.partition("…")
    return lowered.startswith(head) and (not dots or lowered.endswith(tail))


# --- the decision model's answers -------------------------------------------------------


def worth_keeping(prompt: str) -> float:
    return YES if speaker_statement(prompt) is not None else NO


def memory_verdict(prompt: str) -> str:
    """Keep, unless a statement contradicts the note: a negation of its topic deletes
    it, a new value for a single-valued fact (where someone lives, a pet's name) updates it."""
    _, said = speaker_statements(prompt)
    note = _stored_note(prompt)
    verdicts = {_verdict(one, note) for one in said} if note is not None else set()
    return DELETE if DELETE in verdicts else UPDATE if UPDATE in verdicts else KEEP


def _verdict(said: Statement, note: str) -> str:
    if _same(said.fact, note):
        return KEEP
    if said.negative and _about(said.topic, note):
        return DELETE
    if said.slot is not None and _fills(said.slot, note):
        return UPDATE
    return KEEP


def add_memory(prompt: str) -> float:
    """Add when a statement is left that no note already says and no verdict just carried
    (an update or a delete of the note it is about)."""
    _, said = speaker_statements(prompt)
    notes = _listed_notes(prompt)
    left = [one for one in said if not any(_covers(one, v, note) for v, note in notes)]
    return YES if left else NO


def _covers(said: Statement, verdict: str, note: str) -> bool:
    if _same(said.fact, note):
        return True
    carried = (said.negative and _about(said.topic, note)) or (
        said.slot is not None and _fills(said.slot, note)
    )
    return verdict in (UPDATE, DELETE) and carried


def same_memory(prompt: str) -> bool:
    """A repeat when the new note keeps the stored note's words that matter (the bot has
    already set aside notes that differ by a name, a number, a negation or a value)."""
    notes = re.findall(r"^A (?:stored memory|new note) about [^:\n]+: (\".*\")$", prompt, re.M)
    if len(notes) != 2:
        return False
    stored, new = (json.loads(note) for note in notes)
    if is_japanese(stored):
        return stored.rstrip("。") in new or new.rstrip("。") in stored
    kept = _words(stored)
    return bool(kept) and len(kept & _words(new)) * 2 >= len(kept)


def emoji_enough(prompt: str) -> bool:
    said = _message_to_answer(prompt)
    return bool(_GREETING.match(said) or _JA_GREETING.match(said))


def emoji_choice(prompt: str, options: Sequence[str]) -> str:
    text = _message_to_answer(prompt).lower()
    rules = (
        (("thank", "thx", "cheers"), "🙏"),
        (("love", "❤"), "❤️"),
        (("lol", "haha", "funny"), "😂"),
        (("wow", "whoa", "really"), "😮"),
        (("congrat", "yay", "passed", "won"), "🎉"),
        (("?",), "👀"),
    )
    for needles, emoji in rules:
        if any(needle in text for needle in needles) and emoji in options:
            return emoji
    return "👍" if "👍" in options else options[0]


def is_correction(prompt: str) -> bool:
    """The member's reply is the last line of the correction question."""
    said = _last_text(prompt)
    return said is not None and bool(_CORRECTION.match(clean(said[1])))


# --- the chat model's texts -------------------------------------------------------------


def request_kind(messages: Sequence[dict[str, Any]]) -> str:
    """What a Messages API request asks for: a memory note, a channel summary, a style
    revision, a diary, or (anything else) a reply."""
    request = _text(messages[-1]["content"]) if messages else ""
    if "note about the speaker" in request:
        return "note"
    if "Write the updated summary." in request:
        return "episode"
    if "Write the revised style section." in request:
        return "style"
    if "今日の会話ログ" in request:
        return "diary"
    return "reply"


def chat_text(system: Sequence[str], messages: Sequence[dict[str, Any]]) -> str:
    """One Messages API answer, chosen by what the request asks for."""
    request = _text(messages[-1]["content"]) if messages else ""
    match request_kind(messages):
        case "note":
            return memory_note(system, request)
        case "episode":
            return episode(request)
        case "style":
            return style(request)
        case "diary":
            return diary(request)
    return reply(system, messages)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def memory_note(system: Sequence[str], request: str) -> str:
    """The memory writer: ``{"subject": "speaker", "fact": "<Name> …", "lines": [n]}`` in
    their words, naming the line it came from; for a new note, one per statement (an array
    when there are several), for a rewrite the statement that changes the note."""
    number, said = speaker_statements(request)
    if not said:
        return json.dumps({"subject": "none", "fact": ""})
    lines = [number] if number is not None else []
    notes = [{"subject": "speaker", "fact": one.fact, "lines": lines} for one in said]
    rewriting = _rewritten_note(request)
    if rewriting is not None:
        changes = [
            note for note, one in zip(notes, said, strict=True) if _verdict(one, rewriting) != KEEP
        ]
        return json.dumps((changes or notes)[0], ensure_ascii=False)
    return json.dumps(notes[0] if len(notes) == 1 else notes, ensure_ascii=False)


def _rewritten_note(request: str) -> str | None:
    _, found, note = request.rpartition("so it reflects the conversation: ")
    if not found:
        return None
    try:
        text = json.loads(note.strip())
    except ValueError:
        return None
    return text if isinstance(text, str) else None


def reply(
    system: Sequence[str], messages: Sequence[dict[str, Any]], notes: Sequence[str] | None = None
) -> str:
    """A short friendly reply to the newest line (in Japanese to Japanese), using the memory
    block when it helps (``notes``: its notes in the order to use them, nearest in meaning
    first when the dev stack has its embedding model), saying what it saw of attached images
    and text files."""
    people = [m["content"] for m in messages if m.get("role") == "user"]
    name, said = newest_line(messages)
    seen = attachments_seen(people[-1] if people else "")
    voice = JAPANESE if is_japanese(said) else ENGLISH
    kept = list(notes) if notes is not None else remembered(system)
    return f"{_answer(voice, name, said, kept)} {seen}".strip()


def newest_line(messages: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(name, text) of the newest line a reply request answers."""
    people = [m["content"] for m in messages if m.get("role") == "user"]
    said_text = _text(people[-1]) if people else ""
    text_part = said_text.split("\n[", 1)[0]  # the lines, before any attachment blocks
    last = _last_text(text_part)
    return (last[0], clean(last[1])) if last else ("friend", clean(text_part))


_IMAGE_LINE = re.compile(r"attached the image (?P<name>.+?) \(")
_FILE_START = re.compile(r'<file name=(?P<name>"(?:[^"\\]|\\.)*") type=[^>]*>\n')


def attachments_seen(content: Any) -> str:
    """What the model was shown of the newest message's attachments, in one sentence each."""
    if not isinstance(content, list):
        return ""
    images = [
        match["name"]
        for block in content
        if block.get("type") == "text" and (match := _IMAGE_LINE.search(block.get("text", "")))
    ]
    pictures = sum(1 for block in content if block.get("type") == "image")
    said = (
        [f"I can see your image{'s' if pictures > 1 else ''}: {', '.join(images)}."]
        if pictures
        else []
    )
    for block in content:
        text = block.get("text", "") if block.get("type") == "text" else ""
        if match := _FILE_START.search(text):
            body = text[match.end() :].split("\n</file>", 1)[0]
            first = body.strip().splitlines()[0][:60] if body.strip() else ""
            lines = len(body.splitlines())
            said.append(
                f"I read {json.loads(match['name'])} ({lines} lines); it starts: “{first}”."
            )
    return " ".join(said)


@dataclass(frozen=True, slots=True)
class Voice:
    """The demo's sentences in one language ({name}, {notes}, {fact} filled in)."""

    asks_memory: re.Pattern[str]
    greeting: re.Pattern[str]
    nothing_yet: str
    remembers: str
    thanks: str
    hello: str
    heard_with_note: str
    heard: str


ENGLISH = Voice(
    _ASKS_MEMORY,
    _GREETING,
    "I don't remember anything about you yet, {name}. Tell me about yourself!",
    "Here's what I remember, {name}: {notes}",
    "Thanks for telling me, {name}! I'll remember that: {fact}",
    "Hi {name}! Tell me something about yourself and I'll remember it.",
    "I hear you, {name}. I remember this about you: {notes}",
    "I hear you, {name}. Tell me what you like, and I'll remember it.",
)
JAPANESE = Voice(
    _JA_ASKS_MEMORY,
    _JA_GREETING,
    "まだ{name}さんのことは何も覚えていないよ。教えてね！",
    "{name}さんについて覚えていること：{notes}",
    "教えてくれてありがとう、{name}さん！覚えておくね：{fact}",
    "こんにちは、{name}さん！自分のことを教えてくれたら覚えておくね。",
    "なるほど、{name}さん。覚えていること：{notes}",
    "なるほど、{name}さん。好きなものを教えてくれたら覚えておくね。",
)


def _answer(voice: Voice, name: str, said: str, notes: list[str]) -> str:
    if voice.asks_memory.search(said):
        return (voice.remembers if notes else voice.nothing_yet).format(
            name=name, notes=" ".join(notes)
        )
    found = statements(name, said)
    if found:
        return voice.thanks.format(name=name, fact=" ".join(one.fact for one in found))
    if voice.greeting.match(said):
        return voice.hello.format(name=name)
    if notes:
        return voice.heard_with_note.format(name=name, notes=notes[0])
    return voice.heard.format(name=name)


_DATED = re.compile(r"^\[[^\]]*\]\s*")


def remembered(system: Sequence[str]) -> list[str]:
    """The notes in the reply prompt's memory block (``- note`` or ``- [date] note`` lines)."""
    for block in system:
        if block.startswith("What you remember"):
            notes = [line[2:].strip() for line in block.splitlines() if line.startswith("- ")]
            return [_DATED.sub("", note) for note in notes]
    return []


def episode(request: str) -> str:
    _, _, activity = request.partition("New activity in the channel, oldest first:\n")
    lines = read_lines(activity)
    who = sorted({_name(said) for said in lines if "from" in said})
    names = ", ".join(who) if who else "the members"
    return f"{names} chatted here ({len(lines)} events); the bot listened and answered."


def style(request: str) -> str:
    _, _, current = request.partition("Current style section:\n")
    current = current.split("\n\nToday's feedback")[0].strip()
    return current if current and current != "(none)" else "Warm, brief, one emoji at most."


def diary(request: str) -> str:
    count = len(read_lines(request))
    return f"今日はプレイグラウンドで{count}件のメッセージを読みました。"
