"""Discord's API description held against requests: its routes, methods and bodies, Discord's
own errors for a misfit, snowflakes as integers, and the fake Discord asking it every time."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import httpx
import pytest

from app.discord.described import OPERATIONS, SHIPPED, Description, Request, _refs
from app.discord.fake import MISFITS, FakeDiscord
from tests.support.servers import serve

DESCRIPTION = Description.shipped()


def check(method: str, path: str, body: Any = None, **kw: Any) -> Any:
    return DESCRIPTION.check(Request(method, path, body=body, **kw))


def test_the_bots_message_fits_and_an_over_long_one_gets_discords_invalid_form_body() -> None:
    reply = {
        "content": "hello",
        "allowed_mentions": {"parse": ["users"], "replied_user": True},
        "nonce": "a" * 25,
        "enforce_nonce": True,
        "message_reference": {"message_id": "12", "fail_if_not_exists": False},
    }
    assert check("POST", "/channels/5/messages", reply) is None
    misfit = check("POST", "/channels/5/messages", {**reply, "nonce": "a" * 26})
    assert misfit.status == 400
    assert misfit.body["code"] == 50035 and misfit.body["message"] == "Invalid Form Body"
    assert "nonce" in misfit.body["errors"]


def test_an_unknown_route_is_404_and_an_unknown_method_405() -> None:
    assert check("GET", "/channels/5/nowhere").status == 404
    assert check("DELETE", "/users/@me").status == 405
    assert check("GET", "/users/@me") is None


def test_snowflakes_may_be_integers_but_never_other_words() -> None:
    assert check("POST", "/users/@me/channels", {"recipient_id": 123}) is None
    assert check("POST", "/users/@me/channels", {"recipient_id": "123"}) is None
    assert check("POST", "/users/@me/channels", {"recipient_id": "abc"}).status == 400
    assert check("POST", "/channels/general/messages", {"content": "x"}).status == 400


def test_interaction_callbacks_and_answers_are_held_to_their_schemas() -> None:
    callback = "/interactions/123/a-token/callback"
    assert check("POST", callback, {"type": 5, "data": {"flags": 64}}) is None
    choices = {"choices": [{"name": "a", "value": 1}]}
    assert check("POST", callback, {"type": 8, "data": choices}) is None
    assert check("POST", callback, {"type": 8, "data": {"choices": []}}) is None
    assert check("POST", callback, {"type": 42}).status == 400
    edit = "/webhooks/9/a-token/messages/@original"
    assert check("PATCH", edit, {"content": "x" * 2000}) is None
    assert check("PATCH", edit, {"content": "x" * 2001}).status == 400


def test_the_copy_describes_every_operation_and_holds_every_schema_it_names() -> None:
    spec = json.loads(resources.files("app.discord").joinpath(*SHIPPED).read_text())
    for method, template in OPERATIONS:
        assert method.lower() in spec["paths"][template], (method, template)
    schemas = spec["components"]["schemas"]
    assert set(_refs(spec)) <= set(schemas)
    assert "responses" not in json.dumps(spec["paths"])  # requests only


async def test_the_fake_answers_a_misfit_as_discord_would_and_keeps_it() -> None:
    fake = FakeDiscord(token="t")
    async with serve(fake.app) as url, httpx.AsyncClient() as http:
        response = await http.post(
            f"{url}/channels/5/messages",
            json={"content": "hi", "nonce": "n" * 30},
            headers={"Authorization": "Bot t"},
        )
    assert response.status_code == 400 and response.json()["code"] == 50035
    assert fake.posted == []
    assert [m.path for m in MISFITS] == ["/channels/5/messages"]
    taken = fake.take_misfits()
    assert len(taken) == 1 and MISFITS == []


@pytest.mark.parametrize("path", ["/gateway/bot", "/applications/@me", "/users/@me"])
def test_reads_without_a_body_fit(path: str) -> None:
    assert check("GET", path) is None
