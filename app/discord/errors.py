"""Typed failures of Discord REST calls, mapped from Discord's JSON error shape.

Messages hold the method, route template, status, Discord's code and Discord's own text —
never the bot token or a request's headers."""

from __future__ import annotations

# Discord JSON error codes we act on (https://discord.com/developers/docs/topics/opcodes-and-status-codes).
UNKNOWN_CHANNEL = 10003
UNKNOWN_MESSAGE = 10008
UNKNOWN_WEBHOOK = 10015
UNKNOWN_USER = 10013
UNKNOWN_INTERACTION = 10062
ALREADY_ACKNOWLEDGED = 40060
INVALID_WEBHOOK_TOKEN = 50027
REQUEST_TOO_LARGE = 40005
MISSING_ACCESS = 50001
CANNOT_DM_USER = 50007
MISSING_PERMISSIONS = 50013
INVALID_FORM_BODY = 50035


class DiscordError(Exception):
    """A Discord call that did not succeed. ``status`` is the HTTP status (None when no
    response came back), ``code`` Discord's JSON error code (None when absent)."""

    def __init__(self, message: str, *, status: int | None = None, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status}, code={self.code})"


class DiscordDMClosed(DiscordError):
    """The user does not accept direct messages from the bot (code 50007)."""


class DiscordMissingAccess(DiscordError):
    """The bot cannot see the channel or lacks a permission (403, 50001, 50013)."""


class DiscordNotFound(DiscordError):
    """The channel, message or user does not exist (404, e.g. 10003, 10008)."""


class DiscordTooLarge(DiscordError):
    """The files are over Discord's upload limit (413, code 40005): sending again cannot help."""


class DiscordAlreadyAcknowledged(DiscordError):
    """The interaction was answered already (400, code 40060): an interaction takes one
    callback, whoever sent it."""


class DiscordInteractionGone(DiscordError):
    """The interaction can no longer be answered: its three seconds passed before the
    callback (10062), or its token's fifteen minutes before an edit (50027, 10015)."""


class DiscordUnavailable(DiscordError):
    """Discord kept failing (5xx, timeouts, connection errors) until the attempts ran out."""


class DiscordRateLimited(DiscordUnavailable):
    """Still rate limited after the last attempt, or asked to wait longer than we will."""


def error_for(status: int, code: int | None, message: str) -> DiscordError:
    """The typed error for a non-success response; ``message`` is already safe to show."""
    if code == CANNOT_DM_USER:
        return DiscordDMClosed(message, status=status, code=code)
    if code == ALREADY_ACKNOWLEDGED:
        return DiscordAlreadyAcknowledged(message, status=status, code=code)
    if code in (UNKNOWN_INTERACTION, UNKNOWN_WEBHOOK, INVALID_WEBHOOK_TOKEN):
        return DiscordInteractionGone(message, status=status, code=code)
    if status == 403 or code in (MISSING_ACCESS, MISSING_PERMISSIONS):
        return DiscordMissingAccess(message, status=status, code=code)
    if status == 404 or code in (UNKNOWN_CHANNEL, UNKNOWN_MESSAGE, UNKNOWN_USER):
        return DiscordNotFound(message, status=status, code=code)
    if status == 413 or code == REQUEST_TOO_LARGE:
        return DiscordTooLarge(message, status=status, code=code)
    if status == 429:
        return DiscordRateLimited(message, status=status, code=code)
    if status >= 500:
        return DiscordUnavailable(message, status=status, code=code)
    return DiscordError(message, status=status, code=code)
