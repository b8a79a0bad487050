"""The demo brain: scripted stand-ins for the decision model and the chat model, so that the
local stack without an Anthropic key still remembers, recalls and forgets like the real one.

Pure rules over the prompt texts the bot sends (the same texts the real models get): a
first-person statement ("I love…", "I'm…", "my … is …") is worth keeping and becomes a note
in the speaker's words; a later statement that contradicts a note updates or deletes it;
replies are short and friendly and mention what the prompt's memory block holds."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

KEEP, UPDATE, DELETE = "keep", "update", "delete"
YES, NO = 0.9, 0.1

_MENTION = re.compile(r"<@!?\d+>")
_SPEAKER_LINE = re.compile(r"^\[speaker\] (?P<name>[^:\n]+): (?P<text>.*)$", re.MULTILINE)
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
    for part in re.split(r"(?<=[.!;])\s+|\s+(?:and|but)\s+(?=i\b|i'm\b|my\b)", clean(text)):
        found = _statement(name, part.strip())
        if found is not None:
            return found
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
    """The newest statement among the lines tagged ``[speaker]`` (the write path's format)."""
    for match in reversed(list(_SPEAKER_LINE.finditer(prompt))):
        found = statement(match["name"].strip(), match["text"])
        if found is not None:
            return found
    return None


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
    _, _, message = prompt.rpartition("Message to answer, from ")
    _, _, text = message.partition(":\n")
    return clean(text)


def _same(a: str, b: str) -> bool:
    return a.strip().rstrip(".").lower() == b.strip().rstrip(".").lower()


# --- the decision model's answers -------------------------------------------------------


def worth_keeping(prompt: str) -> float:
    return YES if speaker_statement(prompt) is not None else NO


def memory_verdict(prompt: str) -> str:
    """Keep, unless the statement contradicts the note: a negation of its topic deletes
    it, a new value for a single-valued fact (where someone lives, a pet's name) updates it."""
    said, note = speaker_statement(prompt), _stored_note(prompt)
    if said is None or note is None or _same(said.fact, note):
        return KEEP
    if said.negative and said.topic & _words(note):
        return DELETE
    if said.slot is not None and note.lower().startswith(said.slot):
        return UPDATE
    return KEEP


def add_memory(prompt: str) -> float:
    """Add unless a note already says it, or a verdict just carried it (update/delete)."""
    said = speaker_statement(prompt)
    if said is None:
        return NO
    notes = _listed_notes(prompt)
    if any(verdict in (UPDATE, DELETE) for verdict, _ in notes):
        return NO
    return NO if any(_same(said.fact, note) for _, note in notes) else YES


def emoji_enough(prompt: str) -> bool:
    return bool(_GREETING.match(_message_to_answer(prompt)))


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
    _, _, reply = prompt.rpartition(" replied:\n")
    return bool(_CORRECTION.match(clean(reply)))


# --- the chat model's texts -------------------------------------------------------------


def chat_text(system: Sequence[str], messages: Sequence[dict[str, Any]]) -> str:
    """One Messages API answer, chosen by what the request asks for."""
    request = _text(messages[-1]["content"]) if messages else ""
    if "note about the speaker" in request:
        return memory_note(system, request)
    if "Write the updated summary." in request:
        return episode(request)
    if "Write the revised style section." in request:
        return style(request)
    if "今日の会話ログ" in request:
        return diary(request)
    return reply(system, messages)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def memory_note(system: Sequence[str], request: str) -> str:
    """The memory writer: ``{"subject": "speaker", "fact": "<Name> …"}`` in their words."""
    said = speaker_statement(request)
    if said is None:
        return json.dumps({"subject": "none", "fact": ""})
    return json.dumps({"subject": "speaker", "fact": said.fact}, ensure_ascii=False)


def reply(system: Sequence[str], messages: Sequence[dict[str, Any]]) -> str:
    """A short friendly reply to the newest line, using the memory block when it helps."""
    said_by_people = [_text(m["content"]) for m in messages if m.get("role") == "user"]
    last = said_by_people[-1].splitlines()[-1] if said_by_people else ""
    name, _, said = last.partition(": ")
    name, said = (name, clean(said)) if said else ("friend", clean(last))
    notes = remembered(system)
    if _ASKS_MEMORY.search(said):
        if not notes:
            return f"I don't remember anything about you yet, {name}. Tell me about yourself!"
        return f"Here's what I remember, {name}: " + " ".join(notes)
    found = statement(name, said)
    if found is not None:
        return f"Thanks for telling me, {name}! I'll remember that: {found.fact}"
    if _GREETING.match(said):
        return f"Hi {name}! Tell me something about yourself and I'll remember it."
    if notes:
        return f"I hear you, {name}. I remember this about you: {notes[0]}"
    return f"I hear you, {name}. Tell me what you like, and I'll remember it."


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
    lines = [line for line in activity.split("\n\nWrite")[0].splitlines() if line.strip()]
    who = sorted({line.split(":", 1)[0] for line in lines if ":" in line})
    names = ", ".join(who) if who else "the members"
    return f"{names} chatted here ({len(lines)} events); the bot listened and answered."


def style(request: str) -> str:
    _, _, current = request.partition("Current style section:\n")
    current = current.split("\n\nToday's feedback")[0].strip()
    return current if current and current != "(none)" else "Warm, brief, one emoji at most."


def diary(request: str) -> str:
    count = sum(1 for line in request.splitlines() if ": " in line)
    return f"今日はプレイグラウンドで{count}件のメッセージを読みました。"
