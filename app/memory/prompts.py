"""Pure prompt text for the memory write path: what Jev is asked and what the writer is told.

The exchange is rendered with every line tagged by role, so neither model mistakes the bot's
own words (or a stored memory) for something the speaker said."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from app.channel.exchange import Exchange, Line

MAX_FACT_CHARS = 300
SUBJECTS = ("speaker", "other", "none")


def _one_line(text: str) -> str:
    # A newline inside a message must not be able to forge a new tagged line.
    return " / ".join(part.strip() for part in text.splitlines() if part.strip())


def _tag(line: Line, speaker_id: int) -> str:
    if line.is_bot:
        return f"[bot, context only] {line.author_name}"
    if line.author_id == speaker_id:
        return f"[speaker] {line.author_name}"
    return f"[other person] {line.author_name}"


def render_marked(exchange: Exchange) -> str:
    """The exchange, oldest first, one tagged line per message."""
    return "\n".join(
        f"{_tag(line, exchange.speaker_id)}: {_one_line(line.shown)}" for line in exchange.lines
    )


def _conversation(exchange: Exchange) -> str:
    return (
        "Conversation (lines tagged [bot, context only] are the bot's own words and are never "
        f"a source of facts about anyone):\n{render_marked(exchange)}"
    )


def worth_keeping_prompt(exchange: Exchange) -> str:
    name = exchange.speaker_name
    return (
        f"{_conversation(exchange)}\n\n"
        f"Does {name} state, in their own words above, a durable fact about themself worth "
        "remembering for future conversations: a preference, a relationship, an ongoing "
        "situation or a plan? Small talk, questions, facts about other people and the bot's "
        "words do not count."
    )


def verdict_prompt(exchange: Exchange, content: str) -> str:
    name = exchange.speaker_name
    return (
        f"{_conversation(exchange)}\n\n"
        f"A stored memory about {name}: {json.dumps(content, ensure_ascii=False)}\n\n"
        f"In light of what {name} said above, should this memory be kept as it is (keep), "
        f"rewritten with new or corrected information from {name} (update), or deleted "
        f"because {name} said it is no longer true or asked to forget it (delete)?"
    )


@dataclass(frozen=True, slots=True)
class VerdictLine:
    content: str
    verdict: str | None


def add_prompt(exchange: Exchange, verdicts: Sequence[VerdictLine]) -> str:
    name = exchange.speaker_name
    listed = "\n".join(
        f"- [{v.verdict or 'no answer: kept'}] {json.dumps(v.content, ensure_ascii=False)}"
        for v in verdicts
    )
    return (
        f"{_conversation(exchange)}\n\n"
        f"Existing memories about {name}, with the verdict each just received:\n{listed}\n\n"
        f"Did {name} state above a new durable fact about themself (a preference, a "
        "relationship, an ongoing situation or a plan) that none of these memories, after "
        "their verdicts, already covers?"
    )


def writer_system(speaker_name: str) -> str:
    return (
        "You write one short memory note for a companion bot about exactly one person: "
        f"{speaker_name}, the speaker (lines tagged [speaker]).\n"
        "Rules:\n"
        f"- Write only a fact about {speaker_name} that {speaker_name} stated in their own "
        "lines: a preference, a relationship, an ongoing situation or a plan.\n"
        "- Lines tagged [bot, context only] are the bot's own words: never take a fact from "
        "them. Lines tagged [other person] may only give context.\n"
        "- A note being rewritten is only the text to correct; do not treat it as a new "
        "source, and do not invent anything.\n"
        f"- One sentence, at most {MAX_FACT_CHARS} characters, in the language of the "
        f'conversation, starting with "{speaker_name}".\n'
        "Answer with JSON only, no prose: "
        '{"subject": "speaker", "fact": "<the note>"}. '
        f"If the only fact is about someone other than {speaker_name}, answer "
        '{"subject": "other", "fact": "<that fact>"}. '
        f"If the conversation holds no fact about {speaker_name}, answer "
        '{"subject": "none", "fact": ""}.'
    )


def writer_request(exchange: Exchange, rewriting: str | None) -> str:
    """The one user turn the writer sees: the exchange, and the record when rewriting it."""
    task = (
        "Write a new note about the speaker."
        if rewriting is None
        else "Rewrite this note about the speaker so it reflects the conversation: "
        f"{json.dumps(rewriting, ensure_ascii=False)}"
    )
    return f"{_conversation(exchange)}\n\n{task}"


@dataclass(frozen=True, slots=True)
class Written:
    """The writer's answer: ``subject`` is one of SUBJECTS or ``invalid``."""

    subject: str
    fact: str

    @property
    def usable(self) -> bool:
        return self.subject == "speaker" and bool(self.fact)


def parse_written(text: str) -> Written:
    """Read the writer's JSON; anything else is ``invalid`` and will be discarded."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return Written("invalid", text.strip())
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return Written("invalid", text.strip())
    if not isinstance(data, dict):
        return Written("invalid", text.strip())
    subject, fact = data.get("subject"), data.get("fact")
    if subject not in SUBJECTS or not isinstance(fact, str):
        return Written("invalid", text.strip())
    fact = _one_line(fact)
    if len(fact) > MAX_FACT_CHARS:
        return Written("invalid", fact)
    return Written(subject, fact)
