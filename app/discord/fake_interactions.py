"""The fake Discord's application commands and interactions: what ``PUT
/applications/{id}/commands`` registered, the interactions a person's use of them makes
(``use``: the INTERACTION_CREATE's ``d``, built from the registered options as Discord's
client builds it), and their answers, held to Discord's rules — one callback within three
seconds (then 10062 Unknown interaction; a second one 40060), edits and follow-ups by the
token for fifteen minutes (then 50027), ephemeral messages seen by their asker only."""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse

CALLBACK_WINDOW_S = 3.0
TOKEN_LIFETIME_S = 15 * 60.0
DEFERRED, MESSAGE, CHOICES = 5, 4, 8
EPHEMERAL = 1 << 6
APPLICATION_COMMAND, AUTOCOMPLETE = 2, 4
SUB_COMMAND, SUB_COMMAND_GROUP, USER, CHANNEL = 1, 2, 6, 7
_GROUPS = (SUB_COMMAND, SUB_COMMAND_GROUP)


def _error(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


@dataclass
class Interacting:
    """One interaction as Discord keeps it, and what the bot answered."""

    id: int
    token: str
    application_id: int
    user_id: int
    channel_id: int
    kind: int
    created: float
    callbacks: list[dict[str, Any]] = field(default_factory=list)  # accepted, in order
    refused: list[int] = field(default_factory=list)  # callbacks refused (their codes)
    original: dict[str, Any] | None = None
    followups: list[dict[str, Any]] = field(default_factory=list)

    @property
    def choices(self) -> list[dict[str, Any]] | None:
        for callback in self.callbacks:
            if callback.get("type") == CHOICES:
                return list((callback.get("data") or {}).get("choices") or [])
        return None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The answer as the asker sees it: the original response, then the follow-ups."""
        return ([self.original] if self.original is not None else []) + self.followups


@dataclass
class FakeInteractions:
    application_id: int
    snowflake: Callable[[], int]
    notify: Callable[[str, dict[str, Any]], None]
    clock: Callable[[], float] = time.monotonic
    commands: dict[int | None, list[dict[str, Any]]] = field(default_factory=dict)  # by guild
    made: dict[int, Interacting] = field(default_factory=dict)
    uploads: dict[str, bytes] = field(default_factory=dict)  # attachment id -> its bytes
    _command_ids: dict[tuple[int | None, str], int] = field(default_factory=dict)
    _files: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- what a person does ---------------------------------------------------------------

    def use(
        self,
        command: str,
        values: Mapping[str, Any] | None = None,
        *,
        user_id: int,
        channel_id: int,
        guild_id: int | None = None,
        roles: Sequence[int] = (),
        username: str = "someone",
        focused: str | None = None,
    ) -> dict[str, Any]:
        """The INTERACTION_CREATE ``d`` for ``/memory forget`` with ``values`` by option name
        (``focused``: the option being typed, making it an autocomplete). Only a registered
        command and its own options can be used, as in Discord's client."""
        path = command.strip().lstrip("/").split()
        definition = self._registered(path[0], guild_id)
        options, resolved = self._options(definition, path[1:], values or {}, focused)
        kind = AUTOCOMPLETE if focused else APPLICATION_COMMAND
        interaction = Interacting(
            self.snowflake(), secrets.token_urlsafe(48), self.application_id, user_id,
            channel_id, kind, self.clock(),
        )  # fmt: skip
        self.made[interaction.id] = interaction
        user = {"id": str(user_id), "username": username, "global_name": None}
        d: dict[str, Any] = {
            "id": str(interaction.id),
            "application_id": str(self.application_id),
            "type": kind,
            "token": interaction.token,
            "version": 1,
            "channel_id": str(channel_id),
            "locale": "en-US",
            "data": {
                "id": definition["id"],
                "name": definition["name"],
                "type": 1,
                "options": options,
                **({"resolved": resolved} if resolved else {}),
            },
        }
        if guild_id is None:
            return {**d, "user": user, "context": 1}
        member = {"user": user, "roles": [str(r) for r in roles], "nick": None}
        return {**d, "guild_id": str(guild_id), "member": member, "context": 0}

    def _registered(self, name: str, guild_id: int | None) -> dict[str, Any]:
        for scope in (guild_id, None):
            for definition in self.commands.get(scope, []):
                if definition["name"] == name:
                    return definition
        raise KeyError(f"/{name} is not registered (run register-commands first)")

    def _options(
        self,
        definition: Mapping[str, Any],
        path: Sequence[str],
        values: Mapping[str, Any],
        focused: str | None,
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        known = {o["name"]: o for o in definition.get("options") or []}
        if path:
            sub = known[path[0]]
            inner, resolved = self._options(sub, path[1:], values, focused)
            return [{"type": sub["type"], "name": sub["name"], "options": inner}], resolved
        options, resolved = [], {}
        for name, value in values.items():
            kind = known[name]["type"]  # KeyError: no such option
            option: dict[str, Any] = {"type": kind, "name": name, "value": value}
            if name == focused:
                option.update(focused=True, value=str(value))
            options.append(option)
            if kind == USER:
                resolved.setdefault("users", {})[str(value)] = {"id": str(value), "username": "u"}
            if kind == CHANNEL:
                resolved.setdefault("channels", {})[str(value)] = {"id": str(value), "type": 0}
        return options, resolved

    def find(self, interaction_id: int | str) -> Interacting:
        return self.made[int(interaction_id)]

    # -- the REST side ----------------------------------------------------------------------

    def route(self, method: str, parts: list[str], data: Any) -> Response | None:
        """The answer to a request on an interaction or command route, or None."""
        match method, parts:
            case "GET", ["", "applications", "@me"]:
                return JSONResponse(
                    {"id": str(self.application_id), "name": "companion", "bot_public": False}
                )
            case (("PUT" | "GET"), ["", "applications", app, "commands"]):
                return self._commands(method, app, None, data)
            case (("PUT" | "GET"), ["", "applications", app, "guilds", guild, "commands"]):
                return self._commands(method, app, int(guild), data)
            case "POST", ["", "interactions", interaction_id, token, "callback"]:
                return self._callback(int(interaction_id), token, data)
            case (("PATCH" | "GET"), ["", "webhooks", app, token, "messages", "@original"]):
                return self._original(method, app, token, data)
            case "POST", ["", "webhooks", app, token]:
                return self._follow_up(app, token, data)
        return None

    def _commands(self, method: str, app: str, guild_id: int | None, data: Any) -> Response:
        if app != str(self.application_id):
            return _error(403, 50001, "Missing Access")
        if method == "PUT":
            # A bulk overwrite: the set becomes exactly this; a name keeps its id.
            self.commands[guild_id] = [
                {
                    **command,
                    "id": str(self._command_id(guild_id, command["name"])),
                    "application_id": str(self.application_id),
                    "version": str(self.snowflake()),
                    **({"guild_id": str(guild_id)} if guild_id is not None else {}),
                }
                for command in data or []
            ]
        return JSONResponse(self.commands.get(guild_id, []))

    def _command_id(self, guild_id: int | None, name: str) -> int:
        key = (guild_id, name)
        if key not in self._command_ids:
            self._command_ids[key] = self.snowflake()
        return self._command_ids[key]

    def _callback(self, interaction_id: int, token: str, data: Any) -> Response:
        found = self.made.get(interaction_id)
        if found is None or found.token != token:
            return _error(404, 10062, "Unknown interaction")
        if found.callbacks:
            found.refused.append(40060)
            return _error(400, 40060, "Interaction has already been acknowledged.")
        if self.clock() - found.created > CALLBACK_WINDOW_S:
            found.refused.append(10062)
            return _error(404, 10062, "Unknown interaction")
        kind = data.get("type")
        if (kind == CHOICES) != (found.kind == AUTOCOMPLETE):
            return _error(400, 50035, "Invalid Form Body")
        found.callbacks.append(dict(data))
        if kind in (DEFERRED, MESSAGE):
            flags = int((data.get("data") or {}).get("flags") or 0)
            content = (data.get("data") or {}).get("content") or ""
            found.original = self._message(found, content, flags, loading=kind == DEFERRED)
        elif kind == CHOICES:
            choices = found.choices or []
            self.notify("autocomplete", {"interaction_id": str(found.id), "choices": choices})
        return Response(status_code=204)

    def _by_token(self, app: str, token: str) -> Interacting | Response:
        found = next((i for i in self.made.values() if i.token == token), None)
        if found is None or app != str(found.application_id):
            return _error(404, 10015, "Unknown Webhook")
        if self.clock() - found.created > TOKEN_LIFETIME_S:
            return _error(401, 50027, "Invalid Webhook Token")
        return found

    def _original(self, method: str, app: str, token: str, data: Any) -> Response:
        found = self._by_token(app, token)
        if isinstance(found, Response):
            return found
        if found.original is None:
            return _error(404, 10008, "Unknown Message")
        if method == "PATCH":
            found.original.update(
                content=data.get("content") or "",
                attachments=self._attachments(data),
                loading=False,
            )
            self.notify("interaction_message", found.original)
        return JSONResponse(found.original)

    def _follow_up(self, app: str, token: str, data: Any) -> Response:
        found = self._by_token(app, token)
        if isinstance(found, Response):
            return found
        if not found.callbacks:
            return _error(404, 10015, "Unknown Webhook")
        flags = int(data.get("flags") or 0)
        message = self._message(found, data.get("content") or "", flags, files=data)
        found.followups.append(message)
        return JSONResponse(message)

    def _message(
        self,
        found: Interacting,
        content: str,
        flags: int,
        *,
        loading: bool = False,
        files: Any = None,
    ) -> dict[str, Any]:
        message = {
            "id": str(self.snowflake()),
            "channel_id": str(found.channel_id),
            "type": 20,  # CHAT_INPUT_COMMAND: a reply to the command
            "content": content,
            "flags": flags,
            "ephemeral": bool(flags & EPHEMERAL),
            "visible_to": str(found.user_id) if flags & EPHEMERAL else None,
            "interaction_id": str(found.id),
            "loading": loading,
            "attachments": self._attachments(files),
            "author": {"id": str(self.application_id), "bot": True},
        }
        self.notify("interaction_message", message)
        return message

    def _attachments(self, data: Any) -> list[dict[str, Any]]:
        """The files a multipart body carried (``__files__``); their bytes in ``uploads``."""
        files = data.get("__files__", []) if isinstance(data, dict) else []
        described = []
        for name, raw in files:
            attachment_id = str(next(self._files))
            self.uploads[attachment_id] = raw
            described.append({"id": attachment_id, "filename": name, "size": len(raw)})
        return described

    def file(self, message: Mapping[str, Any], filename: str) -> bytes:
        """The bytes attached to an answer as ``filename``."""
        [found] = [a for a in message["attachments"] if a["filename"] == filename]
        return self.uploads[found["id"]]
