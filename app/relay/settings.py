"""The relay's own settings: it is a separate process and needs no database."""

from __future__ import annotations

from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.kit.env import describe, weak_secret
from app.relay.shards import AUTO, ShardCount, parse_shard_count, parse_shard_ids, shard_of_pod


class RelaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    discord_bot_token: SecretStr
    gateway_token: SecretStr
    webhook_url: str = "http://localhost:8000/webhook"
    discord_api_base: str = "https://discord.com/api/v10"
    # When set, used instead of asking GET /gateway/bot (a local fake gateway in tests).
    discord_gateway_url: str | None = None

    relay_queue_size: PositiveInt = 1000
    relay_max_in_flight: PositiveInt = 16
    relay_drain_deadline_s: PositiveFloat = 10.0
    relay_metrics_port: int = Field(default=9101, ge=0, le=65535)
    relay_webhook_timeout_s: PositiveFloat = 10.0
    relay_rest_timeout_s: PositiveFloat = 10.0
    relay_retry_base_s: PositiveFloat = 0.5
    relay_retry_max_s: PositiveFloat = 30.0
    relay_reconnect_base_s: PositiveFloat = 1.0
    relay_reconnect_max_s: PositiveFloat = 60.0
    # How many shards the bot runs ("auto": GET /gateway/bot's recommendation) and which of
    # them this process holds (unset: all). Processes splitting the shards name the count.
    relay_shard_count: ShardCount = AUTO
    relay_shard_ids: str | None = None
    # Kubernetes: the StatefulSet pod's name (downward API); it holds the shard of its ordinal.
    relay_pod_name: str | None = None
    log_level: str = "INFO"

    @field_validator("gateway_token")
    @classmethod
    def _strong_gateway_token(cls, value: SecretStr) -> SecretStr:
        reason = weak_secret(value.get_secret_value())
        if reason is not None:
            # A custom error reads "GATEWAY_TOKEN is empty", not "… Value error, is empty".
            raise PydanticCustomError("weak_secret", reason)
        return value

    @field_validator("discord_bot_token")
    @classmethod
    def _bot_token_present(cls, value: SecretStr) -> SecretStr:
        # `DISCORD_BOT_TOKEN=` (as in .env.example) is as missing as no variable at all.
        if not value.get_secret_value().strip():
            raise PydanticCustomError("missing_secret", "is empty")
        return value

    @field_validator("relay_shard_count", mode="before")
    @classmethod
    def _shard_count(cls, value: object) -> ShardCount:
        try:
            return parse_shard_count(value)
        except ValueError as exc:
            raise PydanticCustomError("shard_count", str(exc)) from None

    @field_validator("relay_shard_ids", mode="before")
    @classmethod
    def _shard_ids(cls, value: object, info: ValidationInfo) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if "relay_shard_count" not in info.data:
            return value  # the count is invalid and already reported
        try:
            ids = parse_shard_ids(str(value), info.data["relay_shard_count"])
        except ValueError as exc:
            raise PydanticCustomError("shard_ids", str(exc)) from None
        return ",".join(map(str, ids))

    @field_validator("relay_pod_name", mode="before")
    @classmethod
    def _pod_name(cls, value: object, info: ValidationInfo) -> object:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if "relay_shard_count" not in info.data or "relay_shard_ids" not in info.data:
            return value  # the count or the ids are invalid and already reported
        try:
            shard_of_pod(str(value), info.data["relay_shard_count"], info.data["relay_shard_ids"])
        except ValueError as exc:
            raise PydanticCustomError("pod_name", str(exc)) from None
        return str(value).strip()

    @property
    def shard_ids(self) -> tuple[int, ...] | None:
        """The shards this process holds; None for all of them."""
        if self.relay_pod_name is not None:
            return (shard_of_pod(self.relay_pod_name, self.relay_shard_count, None),)
        if self.relay_shard_ids is None:
            return None
        return tuple(int(i) for i in self.relay_shard_ids.split(","))

    @field_validator("discord_gateway_url", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # docker compose passes unset variables through as empty strings.
        return None if isinstance(value, str) and not value.strip() else value


class RelaySettingsError(RuntimeError):
    """Configuration is missing or invalid; the message names the variables, never values."""


def load_relay_settings() -> RelaySettings:
    try:
        return RelaySettings()
    except ValidationError as exc:
        raise RelaySettingsError(describe(exc)) from None
