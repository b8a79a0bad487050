"""The persona block (pure): persona.md's core section as written, its style section
overridable. The nightly style revision stores a new style body; only that section is ever
replaced."""

from __future__ import annotations

import re
from pathlib import Path

STYLE_HEADING = "Style"
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HEADING = re.compile(r"^##\s+(.+?)\s*$")


def _sections(text: str) -> list[tuple[str | None, list[str]]]:
    """Split into (heading, lines) pairs; the preamble before the first ``## `` has None."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match:
            sections.append((match.group(1), [line]))
        else:
            sections[-1][1].append(line)
    return sections


def _is_style(heading: str | None) -> bool:
    return heading is not None and heading.strip().lower() == STYLE_HEADING.lower()


def clean_style(override: str) -> str:
    """The override as plain body text: it may not open a heading of its own.

    A model that writes ``## Core`` into its revision must not smuggle in a second core."""
    lines = override.strip().splitlines()
    if lines and _is_style(_heading_of(lines[0])):
        lines = lines[1:]
    return "\n".join(line.lstrip("#").lstrip() if line.startswith("#") else line for line in lines)


def _heading_of(line: str) -> str | None:
    match = _HEADING.match(line)
    return match.group(1) if match else None


def strip_comments(text: str) -> str:
    return _COMMENT.sub("", text)


def style_section(text: str) -> str:
    """The style section's body as written in the persona file ('' when there is none)."""
    for heading, lines in _sections(strip_comments(text)):
        if _is_style(heading):
            return "\n".join(lines[1:]).strip()
    return ""


def channel_note(channel_persona: str) -> str:
    """A channel's persona addition as a paragraph of the style section: plain text that can
    open no heading of its own (so it can never become or replace the core)."""
    return f"In this channel, the operators add:\n{clean_style(channel_persona)}"


def compose_persona(
    text: str, style_override: str | None, channel_persona: str | None = None
) -> str:
    """The persona with only the style section's body replaced by ``style_override``, and
    ``channel_persona`` (this channel's addition) appended to that section's body."""
    text = strip_comments(text)
    override = clean_style(style_override) if style_override is not None else ""
    addition = channel_note(channel_persona) if channel_persona and channel_persona.strip() else ""
    if not override and not addition:
        return text.strip()
    parts: list[str] = []
    placed = False
    for heading, lines in _sections(text):
        if _is_style(heading) and not placed:
            body = override or "\n".join(lines[1:]).strip()
            body = "\n\n".join(p for p in (body, addition) if p)
            parts.append(f"{lines[0]}\n\n{body}\n")
            placed = True
        else:
            parts.append("\n".join(lines))
    if not placed:
        body = "\n\n".join(p for p in (override, addition) if p)
        parts.append(f"\n## {STYLE_HEADING}\n\n{body}\n")
    return "\n".join(parts).strip()


def load_persona(
    path: str | Path, style_override: str | None, channel_persona: str | None = None
) -> str:
    """Read the persona file fresh (it is rebuilt every turn), apply the override and this
    channel's addition."""
    return compose_persona(Path(path).read_text(encoding="utf-8"), style_override, channel_persona)
