"""Pure parts of the task agent's tools: the run_command description and time limits."""

from __future__ import annotations

import pytest

from app.agent.tools import WEB_TIMEOUT_S, run_command_spec, tool_time_limit


def test_without_network_the_description_says_so() -> None:
    description = run_command_spec(network=False)["description"]

    assert "no network access" in description
    assert "internet" not in description


def test_with_network_the_description_says_so() -> None:
    description = run_command_spec(network=True)["description"]

    assert "network access" in description and "no network" not in description


@pytest.mark.parametrize(
    ("name", "time_left_s", "limit_s"),
    [
        ("run_command", None, 60.0),  # no budget: the tool's own limit
        ("run_command", 100.0, 60.0),
        ("run_command", 30.5, 28.0),  # whole seconds, leaving the 2 s before KILL
        ("run_command", 2.5, 0.0),
        ("run_command", -4.0, -6.0),
        ("web_search", None, WEB_TIMEOUT_S),
        ("web_search", 100.0, WEB_TIMEOUT_S),
        ("read_page", 12.5, 12.5),
        ("read_page", -1.0, -1.0),
    ],
)
def test_a_tool_gets_its_own_limit_cut_to_the_time_left(
    name: str, time_left_s: float | None, limit_s: float
) -> None:
    assert tool_time_limit(name, time_left_s, command_timeout_s=60.0) == limit_s
