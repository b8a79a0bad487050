"""The development-only local sandbox: timeouts kill the process group, tails, isolation, env."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from app.agent.sandbox import OUTPUT_TAIL_CHARS, LocalSandbox


def _dead(pid: int) -> bool:
    """Dead: no such process, or only a zombie waiting for its new parent to reap it."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def gone(pid: int, within_s: float = 2.0) -> bool:
    """Dead now, or within a short deadline: SIGKILL is delivered asynchronously, and on a
    loaded machine the kernel may not have finished the process when the call returns."""
    deadline = time.monotonic() + within_s
    while not _dead(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path)
    pid_file = tmp_path / "child.pid"
    # The child sleep would outlive its parent shell if only the shell were killed.
    command = f"sleep 300 & echo $! > {pid_file}; echo started; sleep 300"

    # Room for the shell to start and print on a loaded machine; the sleeps far outlast it.
    result = await sandbox.run(1, command, timeout_s=2.0)

    assert result.timed_out
    assert result.exit_code is None
    assert result.output == "started\n"
    assert gone(int(pid_file.read_text()))


async def test_background_jobs_do_not_outlive_a_finished_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"

    result = await LocalSandbox(tmp_path).run(1, f"sleep 300 & echo $! > {pid_file}", 10)

    assert (result.exit_code, result.timed_out) == (0, False)
    assert gone(int(pid_file.read_text()))


async def test_output_keeps_only_the_last_four_thousand_characters(tmp_path: Path) -> None:
    expected = "".join(f"{i}\n" for i in range(1, 5001))

    result = await LocalSandbox(tmp_path).run(1, "seq 1 5000; echo err >&2", 10)

    combined = expected + "err\n"
    assert result.output == combined[-OUTPUT_TAIL_CHARS:]
    assert len(result.output) == 4000
    assert result.truncated
    assert result.exit_code == 0


async def test_exit_code_is_reported(tmp_path: Path) -> None:
    result = await LocalSandbox(tmp_path).run(1, "echo nope; exit 3", 10)

    assert (result.exit_code, result.output, result.truncated) == (3, "nope\n", False)


async def test_channels_have_separate_working_directories(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path)

    first = await sandbox.run(1, "echo one > note.txt; pwd", 10)
    second = await sandbox.run(2, "pwd; cat note.txt", 10)
    again = await sandbox.run(1, "cat note.txt", 10)

    assert first.output == f"{tmp_path / '1'}\n"
    assert second.output.startswith(f"{tmp_path / '2'}\n")
    assert second.exit_code != 0
    assert again.output == "one\n"


async def test_the_environment_holds_no_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPANION_FAKE_SECRET", "s3cr3t-value-123")
    monkeypatch.setenv("JINA_API_KEY", "jina-from-env")

    result = await LocalSandbox(tmp_path).run(5, "env", 10)

    assert result.exit_code == 0
    assert "s3cr3t-value-123" not in result.output
    assert "COMPANION_FAKE_SECRET" not in result.output
    assert "jina-from-env" not in result.output
    assert f"HOME={tmp_path / '5'}" in result.output
