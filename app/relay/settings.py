"""The relay's own settings: it is a separate process and needs no database."""

from __future__ import annotations

from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.kit.env import describe


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
    log_level: str = "INFO"

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
