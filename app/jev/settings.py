"""The decision service's own settings: it needs no database, Redis or gateway token."""

from __future__ import annotations

from pydantic import NonNegativeInt, PositiveFloat, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config import DEFAULT_JEV_MODEL


class JevSettings(BaseSettings):
    """JEV_MODEL, JEV_API_KEY (optional bearer key), JEV_TIMEOUT_S (the whole model call,
    retries included: keep it below the bot's JEV_TIMEOUT_S), JEV_MAX_RETRIES.
    The Anthropic SDK reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL itself."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    jev_model: str = DEFAULT_JEV_MODEL
    jev_api_key: SecretStr | None = None
    jev_timeout_s: PositiveFloat = 8.0
    jev_max_retries: NonNegativeInt = 2

    @field_validator("jev_api_key", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value
