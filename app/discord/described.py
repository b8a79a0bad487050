"""Discord's published API description, held against a request: does its route exist, with
this method, and do its parameters and body fit the operation's request schema? When not,
the answer is Discord's own error (404, 405, or 400 ``{"code": 50035, "errors": …,
"message": "Invalid Form Body"}``). The fake Discord asks this about every request it gets.

The description is ``app/discord/openapi/discord-api.json``: the operations the bot calls,
copied (requests only) from discord/discord-api-spec's ``openapi.json`` under its MIT license
(``app/discord/openapi/LICENSE``). ``python -m app.discord.described <openapi.json>``
copies them again from a newer upstream file. As Discord itself does, snowflakes are taken as
integers too where the description says strings."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

INVALID_FORM_BODY = 50035
FORM = "Invalid Form Body"
SHIPPED = ("openapi", "discord-api.json")
DOCUMENT = "urn:discord-api"
# The operations the bot calls (and the fake Discord serves): what the copy keeps.
OPERATIONS: tuple[tuple[str, str], ...] = (
    ("GET", "/users/@me"),
    ("GET", "/gateway/bot"),
    ("GET", "/applications/@me"),
    ("POST", "/users/@me/channels"),
    ("POST", "/channels/{channel_id}/messages"),
    ("GET", "/channels/{channel_id}/messages/{message_id}"),
    ("GET", "/channels/{channel_id}"),
    ("POST", "/channels/{channel_id}/typing"),
    ("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji_name}/@me"),
    ("GET", "/applications/{application_id}/commands"),
    ("PUT", "/applications/{application_id}/commands"),
    ("GET", "/applications/{application_id}/guilds/{guild_id}/commands"),
    ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands"),
    ("POST", "/interactions/{interaction_id}/{interaction_token}/callback"),
    ("GET", "/webhooks/{webhook_id}/{webhook_token}/messages/@original"),
    ("PATCH", "/webhooks/{webhook_id}/{webhook_token}/messages/@original"),
    ("POST", "/webhooks/{webhook_id}/{webhook_token}"),
)
_KEPT = ("operationId", "parameters", "requestBody")
# jsonschema's failed keyword, as Discord names the problem in its error bodies.
_CODES = {
    "maxLength": "BASE_TYPE_MAX_LENGTH",
    "minLength": "BASE_TYPE_MIN_LENGTH",
    "required": "BASE_TYPE_REQUIRED",
    "enum": "BASE_TYPE_CHOICES",
    "maxItems": "BASE_TYPE_MAX_LENGTH",
    "minItems": "BASE_TYPE_MIN_LENGTH",
    "maximum": "NUMBER_TYPE_MAX",
    "minimum": "NUMBER_TYPE_MIN",
    "type": "BASE_TYPE_BAD_TYPE",
}


@dataclass(frozen=True)
class Misfit:
    """A request the description does not allow: Discord's answer to it, and why."""

    method: str
    path: str
    status: int
    body: dict[str, Any]
    problems: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.method} {self.path} -> {self.status}: {'; '.join(self.problems)}"


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    pattern: re.Pattern[str]
    literal_segments: int
    parameters: dict[str, dict[str, Any]]  # name -> {"in", "schema", "required"}
    bodies: dict[str, str] = field(default_factory=dict)  # content type -> schema pointer


@dataclass(frozen=True)
class Request:
    """What is checked of one request: ``path`` raw (percent-encoded), the body as parsed
    JSON (for multipart, ``payload_json`` with a string per ``files[n]`` part)."""

    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    content_type: str = "application/json"


class Description:
    """The operations of a (copied) OpenAPI document, ready to check requests against."""

    def __init__(self, spec: dict[str, Any]) -> None:
        spec = _lenient_snowflakes(spec)
        self._registry: Registry[Any] = Registry().with_resource(
            DOCUMENT, Resource.from_contents(spec, default_specification=DRAFT202012)
        )
        self._operations = sorted(
            _operations(spec), key=lambda op: (-op.literal_segments, op.template)
        )
        self._validators: dict[str, Draft202012Validator] = {}

    @classmethod
    @cache
    def shipped(cls) -> Description:
        raw = resources.files("app.discord").joinpath(*SHIPPED).read_text(encoding="utf-8")
        return cls(json.loads(raw))

    def check(self, request: Request) -> Misfit | None:
        """None when ``request`` fits the description; otherwise Discord's answer to it."""
        segments = [unquote(part) for part in request.path.split("?", 1)[0].split("/")]
        path = "/".join(segments)
        routed = [op for op in self._operations if op.pattern.fullmatch(path)]
        if not routed:
            return _misfit(request, 404, "404: Not Found", ["no such route"])
        operation = next((op for op in routed if op.method == request.method), None)
        if operation is None:
            return _misfit(request, 405, "405: Method Not Allowed", ["no such method here"])
        match = operation.pattern.fullmatch(path)
        assert match is not None
        problems = self._parameters(operation, match.groupdict(), request.query)
        problems.update(self._body(operation, request))
        if not problems:
            return None
        body = {"code": INVALID_FORM_BODY, "errors": _nested(problems), "message": FORM}
        return Misfit(
            request.method,
            request.path,
            400,
            body,
            tuple(f"{where or 'body'}: {message}" for where, (_, message) in problems.items()),
        )

    def _parameters(
        self, operation: Operation, path: Mapping[str, str], query: Mapping[str, str]
    ) -> dict[str, tuple[str, str]]:
        problems: dict[str, tuple[str, str]] = {}
        for name, parameter in operation.parameters.items():
            given = path.get(name) if parameter["in"] == "path" else query.get(name)
            if given is None:
                if parameter.get("required"):
                    problems[name] = ("BASE_TYPE_REQUIRED", "This field is required")
                continue
            value = _from_text(given, parameter["schema"])
            error = best_match(self._validator_for(parameter["schema"]).iter_errors(value))
            if error is not None:
                problems[name] = _problem(error)
        return problems

    def _body(self, operation: Operation, request: Request) -> dict[str, tuple[str, str]]:
        if not operation.bodies:
            return {}
        media = request.content_type.split(";", 1)[0].strip().lower()
        pointer = operation.bodies.get(media)
        if pointer is None:
            return {"": ("CONTENT_TYPE_INVALID", f"a body of type {media or 'none'}")}
        validator = self._validator(pointer)
        problems: dict[str, tuple[str, str]] = {}
        for error in validator.iter_errors(request.body):
            deepest = best_match([error]) or error
            where = ".".join(str(part) for part in deepest.absolute_path)
            problems.setdefault(where, _problem(deepest))
        return problems

    def _validator(self, pointer: str) -> Draft202012Validator:
        if pointer not in self._validators:
            schema = {"$ref": f"{DOCUMENT}#{pointer}"}
            self._validators[pointer] = Draft202012Validator(schema, registry=self._registry)
        return self._validators[pointer]

    def _validator_for(self, schema: dict[str, Any]) -> Draft202012Validator:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._validators:
            resolved = {"$ref": f"{DOCUMENT}{schema['$ref']}"} if "$ref" in schema else dict(schema)
            self._validators[key] = Draft202012Validator(resolved, registry=self._registry)
        return self._validators[key]


def _problem(error: ValidationError) -> tuple[str, str]:
    """Discord's code and message for one failed keyword (never the value itself: it may be
    long, or someone's words)."""
    keyword, limit = str(error.validator), error.validator_value
    messages = {
        "maxLength": f"Must be {limit} or fewer in length.",
        "minLength": f"Must be {limit} or more in length.",
        "maxItems": f"Must be {limit} or fewer in length.",
        "minItems": f"Must be {limit} or more in length.",
        "maximum": f"Must be {limit} or less.",
        "minimum": f"Must be {limit} or more.",
        "required": "This field is required",
        "type": f"Must be of type {limit}.",
        "enum": f"Value must be one of {limit}.",
        "pattern": "Value is not a valid snowflake." if "0-9" in str(limit) else "Invalid value.",
    }
    return _CODES.get(keyword, "BASE_TYPE_INVALID"), messages.get(keyword, f"Invalid ({keyword}).")


def _misfit(request: Request, status: int, message: str, problems: list[str]) -> Misfit:
    return Misfit(
        request.method, request.path, status, {"code": 0, "message": message}, tuple(problems)
    )


def _nested(problems: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """Discord's error tree: each failing field's path as nested keys, ``_errors`` at the leaf."""
    tree: dict[str, Any] = {}
    for where, (code, message) in problems.items():
        node = tree
        for part in [p for p in where.split(".") if p]:
            node = node.setdefault(part, {})
        node.setdefault("_errors", []).append({"code": code, "message": message})
    return tree


def _from_text(text: str, schema: Mapping[str, Any]) -> Any:
    """A path or query parameter as the JSON value its schema expects (booleans, integers)."""
    kind = schema.get("type")
    if kind == "boolean" and text.lower() in ("true", "false", "1", "0"):
        return text.lower() in ("true", "1")
    if kind == "integer" and re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _operations(spec: Mapping[str, Any]) -> Iterable[Operation]:
    for template, item in spec.get("paths", {}).items():
        shared = {p["name"]: p for p in item.get("parameters", [])}
        pattern, literals = _route_pattern(template)
        for method, operation in item.items():
            if method == "parameters":
                continue
            parameters = {**shared, **{p["name"]: p for p in operation.get("parameters", [])}}
            content = (operation.get("requestBody") or {}).get("content", {})
            escaped = template.replace("~", "~0").replace("/", "~1")
            bodies = {
                media: f"/paths/{escaped}/{method}/requestBody/content/"
                f"{media.replace('/', '~1')}/schema"
                for media in content
            }
            yield Operation(method.upper(), template, pattern, literals, parameters, bodies)


def _route_pattern(template: str) -> tuple[re.Pattern[str], int]:
    parts, literals = [], 0
    for segment in template.split("/"):
        if segment.startswith("{") and segment.endswith("}"):
            parts.append(f"(?P<{segment[1:-1]}>[^/]+)")
        else:
            parts.append(re.escape(segment))
            literals += 1
    return re.compile("/".join(parts)), literals


def _lenient_snowflakes(spec: dict[str, Any]) -> dict[str, Any]:
    """Discord takes a snowflake as a JSON integer too: its type gains ``integer`` (the
    pattern still holds for strings)."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {key: walk(value) for key, value in node.items()}
        if out.get("format") == "snowflake":
            kinds = out.get("type", "string")
            kinds = [kinds] if isinstance(kinds, str) else list(kinds)
            out["type"] = [*kinds, "integer"] if "integer" not in kinds else kinds
            out.setdefault("minimum", 0)
        return out

    result: dict[str, Any] = walk(spec)
    return result


# --- the copy ---------------------------------------------------------------------------------


def extract(upstream: Mapping[str, Any], operations: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The requests of ``operations`` from Discord's whole description, with every schema
    they reference (transitively); responses are left out."""
    paths: dict[str, dict[str, Any]] = {}
    for method, template in operations:
        item = upstream["paths"][template]
        kept = paths.setdefault(template, {})
        if "parameters" in item:
            kept["parameters"] = item["parameters"]
        operation = item[method.lower()]
        kept[method.lower()] = {key: operation[key] for key in _KEPT if key in operation}
    schemas = upstream["components"]["schemas"]
    wanted, todo = set(), list(_refs(paths))
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo += _refs(schemas[name])
    return {
        "openapi": upstream["openapi"],
        "info": {
            **upstream["info"],
            "x-copied-from": "https://github.com/discord/discord-api-spec (openapi.json), "
            "the requests of the operations the bot calls",
        },
        "paths": paths,
        "components": {"schemas": {name: schemas[name] for name in sorted(wanted)}},
    }


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"].rsplit("/", 1)[-1]] if "$ref" in node else []
        return found + [r for key, value in node.items() if key != "$ref" for r in _refs(value)]
    if isinstance(node, list):
        return [r for item in node for r in _refs(item)]
    return []


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m app.discord.described <discord-api-spec openapi.json>")
        return 2
    upstream = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    target = Path(__file__).parent.joinpath(*SHIPPED)
    target.write_text(json.dumps(extract(upstream, OPERATIONS), indent=1) + "\n", "utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
