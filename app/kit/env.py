"""Settings errors that name the variables and never echo their values, and the rule every
shared secret (GATEWAY_TOKEN, ADMIN_SECRET) must meet before a process starts."""

from __future__ import annotations

import re

from pydantic import ValidationError

MIN_SECRET_CHARS = 32
GENERATE_HINT = 'generate one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'

# Compared case-insensitively with punctuation removed; a value that is one of these words
# repeated ("changeme-changeme-…") is a placeholder too.
_PLACEHOLDER_WORDS = (
    "changeme",
    "changeit",
    "secret",
    "password",
    "passwd",
    "test",
    "token",
    "example",
    "default",
    "dummy",
    "placeholder",
    "replaceme",
    "admin",
    "todo",
    "none",
    "null",
)
# Fragments no generated secret contains by chance, but every template value does.
_PLACEHOLDER_FRAGMENTS = (
    "changeme",
    "placeholder",
    "replaceme",
    "yoursecret",
    "yourtoken",
    "yourgateway",
)


def is_placeholder(value: str) -> bool:
    folded = re.sub(r"[\W_]", "", value.lower())
    if len(set(folded)) <= 1:  # empty, or "xxxxxxxx…", "00000000…"
        return True
    if any(fragment in folded for fragment in _PLACEHOLDER_FRAGMENTS):
        return True
    return any(
        len(folded) % len(word) == 0 and folded == word * (len(folded) // len(word))
        for word in _PLACEHOLDER_WORDS
    )


def weak_secret(value: str) -> str | None:
    """Why ``value`` cannot serve as a shared secret, or None. Never contains the value."""
    if not value.strip():
        return f"is empty; {GENERATE_HINT}"
    if is_placeholder(value):
        return f"is a placeholder; {GENERATE_HINT}"
    if len(value) < MIN_SECRET_CHARS:
        return f"is shorter than {MIN_SECRET_CHARS} characters; {GENERATE_HINT}"
    return None


def describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        reason = "is required" if error["type"] == "missing" else error["msg"]
        reason = reason.removeprefix("Value error, ")
        if error["loc"]:
            problems.append(f"{str(error['loc'][0]).upper()} {reason}")
        else:  # a rule over several variables names them in its own message
            problems.append(reason)
    return "invalid configuration: " + "; ".join(problems)
