"""The decision service's own settings: it needs no database, Redis or gateway token."""

from __future__ import annotations

from typing import Self

from pydantic import (
    NonNegativeInt,
    PositiveFloat,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config import DEFAULT_JEV_MODEL, Provider, SettingsError
from app.kit.env import describe


class JevSettings(BaseSettings):
    """JEV_PROVIDER (anthropic, or openai for an OpenAI-compatible endpoint), JEV_MODEL,
    JEV_API_KEY (the bearer key callers must send), JEV_TIMEOUT_S (the whole model call,
    retries included: keep it below the bot's JEV_TIMEOUT_S), JEV_MAX_RETRIES,
    JEV_ALLOW_NO_KEY (local development only: serve without a key).
    The SDKs read ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL and OPENAI_API_KEY / OPENAI_BASE_URL
    themselves; the OpenAI pair is also taken from ``.env``."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    jev_provider: Provider = Provider.ANTHROPIC
    jev_model: str = DEFAULT_JEV_MODEL
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    jev_api_key: SecretStr | None = None
    jev_timeout_s: PositiveFloat = 8.0
    jev_max_retries: NonNegativeInt = 2
    jev_allow_no_key: bool = False

    @field_validator("jev_api_key", "openai_api_key", "openai_base_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @model_validator(mode="after")
    def _key_required(self) -> Self:
        # An open decision service lets anyone spend the model budget and steer memory writes.
        if self.jev_api_key is None and not self.jev_allow_no_key:
            raise ValueError(
                "JEV_API_KEY is required (JEV_ALLOW_NO_KEY=true serves without one, "
                "for local development only)"
            )
        return self

    @model_validator(mode="after")
    def _openai_needs_a_model(self) -> Self:
        if self.jev_provider is Provider.OPENAI and "jev_model" not in self.model_fields_set:
            raise ValueError("JEV_PROVIDER=openai needs JEV_MODEL (a model the server serves)")
        return self


def load_jev_settings() -> JevSettings:
    try:
        return JevSettings()
    except ValidationError as exc:
        raise SettingsError(describe(exc)) from None
