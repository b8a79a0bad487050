"""The decision-service client: POST {JEV_URL}/v1/decide, strict answers, None on any failure."""

from __future__ import annotations

import json
from collections.abc import Sequence

import httpx

from app.decision.base import DecisionAnswer, NoAnswerReason, NoDecision
from app.decision.vocabulary import Question
from app.decision.wire import fit_answer, request_body, tokens_of
from app.kit.spend import record_decision_tokens


class HttpDecider:
    """An AnswerSource over the decision service: ``decide`` raises NoDecision with its
    reason (the LoggedDecider in front of it turns that into None)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
    ) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/v1/decide"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(timeout_s)

    def __repr__(self) -> str:  # never show the key
        return f"HttpDecider(url={self._url!r})"

    async def decide(
        self, question: Question, prompt: str, options: Sequence[str] | None
    ) -> DecisionAnswer:
        body = request_body(question, prompt, options)
        try:
            response = await self._http.post(
                self._url, json=body, headers=self._headers, timeout=self._timeout
            )
        except httpx.TimeoutException:
            raise NoDecision("decision service timed out", reason=NoAnswerReason.TIMEOUT) from None
        except httpx.HTTPError as exc:
            raise NoDecision(
                f"decision service unreachable: {type(exc).__name__}",
                reason=NoAnswerReason.CONNECTION,
            ) from None
        if response.status_code != 200:
            raise NoDecision(
                f"decision service answered {response.status_code}", reason=NoAnswerReason.STATUS
            )
        try:
            payload = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise NoDecision("body is not JSON", reason=NoAnswerReason.MALFORMED) from None
        answer = fit_answer(question.kind, options, payload)
        if (spent := tokens_of(response.headers)) is not None:
            record_decision_tokens(question.value, input_tokens=spent[0], output_tokens=spent[1])
        return answer
