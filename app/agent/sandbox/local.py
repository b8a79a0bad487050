"""Development-only sandbox: a per-channel directory and a plain subprocess.

NOT isolated — the command runs as the worker's user on the worker's host. It exists so the
task agent can be tried without Docker; production uses the ``docker`` backend."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from app.agent.sandbox.base import CommandResult, TailBuffer, result_from

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
# After the shell exits, how long leftover output may take to drain once stragglers are killed.
DRAIN_S = 2.0


def minimal_env(workdir: Path) -> dict[str, str]:
    """The whole environment a command sees: nothing inherited, so no secrets leak in."""
    return {"PATH": SAFE_PATH, "HOME": str(workdir), "LANG": "C.UTF-8"}


class LocalSandbox:
    def __init__(self, root: str | Path) -> None:
        self._root = Path(root)

    def workdir(self, channel_id: int) -> Path:
        path = self._root / str(int(channel_id))
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    async def run(self, channel_id: int, command: str, timeout_s: float) -> CommandResult:
        workdir = self.workdir(channel_id)
        # Our own pipe, not asyncio's: Process.wait() would otherwise also wait for every
        # background child holding the pipe, and the shell's exit would go unnoticed.
        read_fd, write_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-lc",
                command,
                cwd=workdir,
                env=minimal_env(workdir),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                # Its own process group, so a timeout can kill everything the command started.
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        buffer = TailBuffer()
        reader = asyncio.create_task(_pump(read_fd, buffer))
        timed_out = False
        try:
            async with asyncio.timeout(timeout_s):
                await proc.wait()
        except TimeoutError:
            timed_out = True
        finally:
            # Background children must not outlive the command (nor hold the pipe open).
            _kill_group(proc.pid)
            await proc.wait()
            await _finish(reader)
        return result_from(buffer, None if timed_out else proc.returncode, timed_out=timed_out)


async def _pump(read_fd: int, buffer: TailBuffer) -> None:
    stream = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", buffering=0)
    )
    try:
        while chunk := await stream.read(65536):
            buffer.feed(chunk)
    finally:
        transport.close()


async def _finish(reader: asyncio.Task[None]) -> None:
    try:
        async with asyncio.timeout(DRAIN_S):
            await reader
    except TimeoutError:
        # A process that escaped the group (setsid) still holds the pipe; stop listening.
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
