"""The decision-service client: POST {JEV_URL}/v1/decide, strict answers, None on any failure.

Jev is asked three times before a mention's reply and again by every memory write, so its
client is the leanest one we have: aiohttp, whose request costs about a third of the CPU of
an httpx one (bench.turn, three pairs in one run: the react step's own time 7.0 → 5.1 ms).
The session is the decider's own, opened and closed with it (``open_decider``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp

from app.decision.base import DecisionAnswer, NoAnswerReason, NoDecision
from app.decision.vocabulary import Question
from app.decision.wire import fit_answer, request_body, tokens_of
from app.kit.spend import record_decision_tokens
from app.kit.tls import httpx_tls


def decision_session() -> aiohttp.ClientSession:
    """The decision service's connection pool. The trust store is the one the httpx clients
    use (certifi, or SSL_CERT_FILE). The environment's proxy is read once, by the decider
    (``env_proxy``): aiohttp's ``trust_env`` reads it and ~/.netrc again on every request,
    through a thread, and doubled a call's time on a quiet loop."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=httpx_tls()))


def env_proxy(url: str) -> str | None:
    """The proxy HTTP_PROXY / HTTPS_PROXY (or ALL_PROXY) names for ``url``, unless NO_PROXY
    exempts its host: as httpx applied them to Jev (on Linux; urllib reads the system's
    settings on macOS and Windows)."""
    parts = urlsplit(url)
    if proxy_bypass(parts.hostname or ""):
        return None
    proxies = getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


class HttpDecider:
    """An AnswerSource over the decision service: ``decide`` raises NoDecision with its
    reason (the LoggedDecider in front of it turns that into None). ``timeout_s`` bounds the
    whole call, connecting and reading included."""

    def __init__(
        self,
        web: aiohttp.ClientSession,
        *,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
    ) -> None:
        self._web = web
        self._url = base_url.rstrip("/") + "/v1/decide"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._proxy = env_proxy(self._url)

    def __repr__(self) -> str:  # never show the key
        return f"HttpDecider(url={self._url!r})"

    async def decide(
        self, question: Question, prompt: str, options: Sequence[str] | None
    ) -> DecisionAnswer:
        body = request_body(question, prompt, options)
        try:
            # A redirect is not followed: the key would go where the service pointed.
            async with self._web.post(
                self._url,
                json=body,
                headers=self._headers,
                timeout=self._timeout,
                proxy=self._proxy,
                allow_redirects=False,
            ) as response:
                status, headers = response.status, response.headers
                content = await response.read()
        except TimeoutError:
            raise NoDecision("decision service timed out", reason=NoAnswerReason.TIMEOUT) from None
        except aiohttp.ClientError as exc:
            raise NoDecision(
                f"decision service unreachable: {type(exc).__name__}",
                reason=NoAnswerReason.CONNECTION,
            ) from None
        if status != 200:
            raise NoDecision(f"decision service answered {status}", reason=NoAnswerReason.STATUS)
        try:
            payload = json.loads(content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise NoDecision("body is not JSON", reason=NoAnswerReason.MALFORMED) from None
        answer = fit_answer(question.kind, options, payload)
        if (spent := tokens_of(headers)) is not None:
            record_decision_tokens(question.value, input_tokens=spent[0], output_tokens=spent[1])
        return answer
