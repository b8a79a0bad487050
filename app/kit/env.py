"""Settings errors that name the variables and never echo their values."""

from __future__ import annotations

from pydantic import ValidationError


def describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        name = str(error["loc"][0]).upper() if error["loc"] else "?"
        reason = "is required" if error["type"] == "missing" else error["msg"]
        problems.append(f"{name} {reason}")
    return "invalid configuration: " + "; ".join(problems)
