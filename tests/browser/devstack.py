"""Run `python -m app dev` as a person would: a subprocess with its own data folder, no
DATABASE_URL / REDIS_URL (so the embedded servers start), stopped with Ctrl-C (SIGINT). The
playground's link, with its one-time token, is read from what the stack prints."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from app.dev.playground import SESSION_COOKIE, TOKEN_HEADER

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0  # first start under a loaded CI: migrations, the embedding model
STOP_TIMEOUT_S = 40.0


@dataclass
class DevStack:
    process: subprocess.Popen[str]
    data_dir: Path
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    url: str = ""
    link: str = ""  # the playground link the console printed, with its one-time token
    session: str = ""  # the page's session cookie, once someone opened the link
    ready_after_s: float = 0.0
    reader: threading.Thread | None = None

    @property
    def cookies(self) -> dict[str, str]:
        """The session cookie, as a browser that opened the link sends it."""
        assert self.session, "nobody opened the playground link yet (sign_in)"
        return {"cookie": f"{SESSION_COOKIE}={self.session}"}

    def sign_in(self) -> None:
        """Do what the page does with the printed link: spend its token on the config
        request and keep the session cookie it sets."""
        token = self.link.split("?t=", 1)[1]
        answer = httpx.get(
            f"{self.url}/playground/config.json", headers={TOKEN_HEADER: token}, timeout=5
        )
        assert answer.status_code == 200, answer.text
        self.session = answer.cookies[SESSION_COOKIE]

    @property
    def config(self) -> dict[str, Any]:
        answer = httpx.get(f"{self.url}/playground/config.json", headers=self.cookies, timeout=5)
        assert answer.status_code == 200, answer.text
        config: dict[str, Any] = answer.json()
        return config

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if match := re.search(r"playground (http://\S+)/playground\?t=\S+", line):
                self.url, self.link = match.group(1), match.group(0).split(" ", 1)[1]
            if line.startswith("ready in "):
                self.ready.set()
        self.ready.set()  # the process ended: stop waiting

    def stop(self) -> int:
        """Ctrl-C, then wait (bounded) for the clean exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
            raise AssertionError(f"dev stack did not stop on SIGINT:\n{self.output}") from None
        finally:
            if self.reader is not None:
                self.reader.join(STOP_TIMEOUT_S)  # it ends at the pipe's end of file
            if self.process.stdout is not None:
                self.process.stdout.close()


def dev_env() -> dict[str, str]:
    """The environment of a fresh machine: none of the stack's URLs or keys."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_"))}
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "JEV_URL"):
        env.pop(name, None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


# The embedded server's start can fail under a loaded CI (seen once in several full runs, with
# four workers starting stacks): a fresh data folder is then started once more, and a second
# failure shows the server's own log.
POSTGRES_FAILED = "embedded Postgres did not start"


def _start(data_dir: Path) -> tuple[DevStack, bool]:
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "dev", "--data-dir", str(data_dir), "--port", "0"],
        cwd=REPO,
        env=dev_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    stack = DevStack(process, data_dir)
    stack.reader = threading.Thread(target=stack._read, daemon=True)
    stack.reader.start()
    ready = stack.ready.wait(START_TIMEOUT_S) and process.poll() is None and bool(stack.link)
    return stack, ready


def _postgres_log(data_dir: Path) -> str:
    log = data_dir / "postgres" / "log"
    return log.read_text(errors="replace")[-4000:] if log.exists() else "(no server log)"


@contextmanager
def running_dev_stack(data_dir: Path) -> Iterator[DevStack]:
    """Start the dev stack on a free port; yield it once it printed that it is ready."""
    began = time.monotonic()
    fresh = not data_dir.exists()
    stack, ready = _start(data_dir)
    if not ready and fresh and POSTGRES_FAILED in stack.output:
        first = f"{stack.output}\n{_postgres_log(data_dir)}"
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
        print(f"dev stack's first start failed, starting again:\n{first}", file=sys.stderr)
        stack, ready = _start(data_dir)
    try:
        if not ready:
            raise AssertionError(
                f"dev stack did not get ready:\n{stack.output}\n{_postgres_log(data_dir)}"
            )
        stack.ready_after_s = time.monotonic() - began
        yield stack
    finally:
        stack.stop()


class Playground:
    """A client that does what the page does: frames to /webhook, the feed back."""

    def __init__(self, stack: DevStack) -> None:
        self.url = stack.url
        self.config = stack.config
        self.cookies = stack.cookies
        self.session = f"test-{time.monotonic_ns()}"
        self.seq = 0
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def person(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = next(p for p in self.config["people"] if p["name"] == name)
        return found

    @property
    def general(self) -> str:
        channel: str = self.config["guild"]["channels"][0]["id"]
        return channel

    def _follow(self) -> None:
        events = f"{self.url}/playground/events"
        with httpx.stream("GET", events, headers=self.cookies, timeout=None) as response:
            for line in response.iter_lines():
                if self._stop.is_set():
                    return
                if line.startswith("data: "):
                    with self._lock:
                        self.events.append(json.loads(line[6:]))

    def close(self) -> None:
        self._stop.set()

    def frame(self, t: str, d: dict[str, Any]) -> httpx.Response:
        self.seq += 1
        return httpx.post(
            f"{self.url}/webhook",
            json={"op": 0, "t": t, "s": self.seq, "d": d},
            headers={
                "x-discord-gateway-token": self.config["gatewayToken"],
                "x-discord-gateway-session": self.session,
            },
            timeout=10,
        )

    def say(self, who: str, text: str, *, mention: bool = False, dm: bool = False) -> str:
        """Post a MESSAGE_CREATE as ``who``; return its id."""
        person = self.person(who)
        bot = self.config["bot"]
        message_id = str(((int(time.time() * 1000) - 1_420_070_400_000) << 22) | self.seq + 1)
        d: dict[str, Any] = {
            "id": message_id,
            "channel_id": person["dmChannel"] if dm else self.general,
            "type": 0,
            "content": f"<@{bot['id']}> {text}" if mention else text,
            "timestamp": datetime.now(UTC).isoformat(),
            "author": {"id": person["id"], "username": who.lower(), "global_name": who},
            "mentions": [{"id": bot["id"], "username": bot["name"], "bot": True}]
            if mention
            else [],
        }
        if not dm:
            d["guild_id"] = self.config["guild"]["id"]
            d["member"] = {"nick": None, "roles": []}
        answer = self.frame("MESSAGE_CREATE", d)
        assert answer.json() == {"status": "ok"}, answer.text
        return message_id

    def wait_for(
        self, what: str, test: Any, *, after: int = 0, timeout: float = 20.0
    ) -> tuple[int, dict[str, Any]]:
        """The first feed event (``{"kind", "data"}``) past index ``after`` passing ``test``,
        with its index, within ``timeout``."""
        deadline = time.monotonic() + timeout
        seen = after
        while time.monotonic() < deadline:
            with self._lock:
                fresh = self.events[seen:]
            for offset, event in enumerate(fresh):
                if test(event):
                    return seen + offset, event
            seen += len(fresh)
            self._stop.wait(0.05)  # a bounded poll of the feed the reader thread fills
        raise AssertionError(f"no {what} within {timeout} s; feed tail: {self.events[-5:]}")

    def accepted(self, message_id: str) -> int:
        """The feed index of our own MESSAGE_CREATE: what the bot did after it follows it."""
        index, _ = self.wait_for(
            f"frame {message_id}",
            lambda e: e["kind"] == "frame" and e["data"]["d"].get("id") == message_id,
        )
        return index

    def reply_to(self, message_id: str, timeout: float = 20.0) -> str:
        """The text of the bot's reply to ``message_id``."""
        _, event = self.wait_for(
            f"the reply to {message_id}",
            lambda e: (
                e["kind"] == "message"
                and (e["data"].get("message_reference") or {}).get("message_id") == message_id
            ),
            timeout=timeout,
        )
        content: str = event["data"]["content"]
        return content

    def dm_after(self, who: str, message_id: str) -> str:
        """The first DM to ``who`` after our message ``message_id`` reached the feed."""
        dm = self.person(who)["dmChannel"]
        _, event = self.wait_for(
            f"a DM to {who}",
            lambda e: e["kind"] == "message" and e["data"]["channel_id"] == dm,
            after=self.accepted(message_id),
        )
        content: str = event["data"]["content"]
        return content

    def admin(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(
            method,
            f"{self.url}{path}",
            json=body,
            headers={"authorization": f"Bearer {self.config['adminSecret']}"},
            timeout=10,
        )
