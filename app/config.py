"""Settings: every environment variable the service reads, in one class (the README's
Configuration table)."""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache
from typing import Annotated, Self

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.kit.env import describe, weak_secret
from app.kit.hosts import parse_host
from app.kit.redis_target import SENTINEL_PORT, RedisTarget, parse_address

DEFAULT_CHAT_MODEL = "claude-sonnet-5-5"
DEFAULT_JEV_MODEL = "claude-haiku-5-5"
DEFAULT_REACTION_EMOJIS = ("👍", "❤️", "😂", "😮", "🙏", "🎉", "👀")
DEFAULT_ATTACHMENT_HOSTS = ("cdn.discordapp.com", "media.discordapp.net")


class Provider(StrEnum):
    """The API a model speaks (CHAT_PROVIDER, JEV_PROVIDER)."""

    ANTHROPIC = "anthropic"  # the Messages API
    OPENAI = "openai"  # any OpenAI-compatible Chat Completions endpoint


class SandboxBackend(StrEnum):
    DOCKER = "docker"
    LOCAL = "local"
    NONE = "none"


class RecallScope(StrEnum):
    SPEAKER = "speaker"
    PARTICIPANTS = "participants"


class MemoryRecall(StrEnum):
    """Which memories the reply prompt and the write path's read take (ten per person)."""

    RECENT = "recent"  # seed 000: the ten most recently updated
    RELEVANT = "relevant"  # the ten most relevant to the message, and older conversation


class InputType(StrEnum):
    """How the embeddings model is told a query from a stored text (EMBEDDINGS_INPUT_TYPE)."""

    NONE = "none"  # the same request for both
    FIELD = "field"  # each request carries "input_type": "query" or "document"
    PREFIX = "prefix"  # each text starts with EMBEDDINGS_QUERY_PREFIX / _DOCUMENT_PREFIX


class LearnFrom(StrEnum):
    """Whom the nightly run and channel consolidation may learn about."""

    EVERYONE = "everyone"  # seed 000: everyone who spoke
    ADDRESSED = "addressed"  # only people who addressed the bot lately


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


IdList = Annotated[list[int], NoDecode]
StrList = Annotated[list[str], NoDecode]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    database_url: str
    # DATABASE_URL reaches Postgres through a transaction-pooling proxy (PgBouncer with
    # pool_mode=transaction): no prepared-statement cache, no session state.
    database_transaction_pooling: bool = False
    redis_url: str = "redis://localhost:6379/0"
    # Redis Sentinel: when set, the master comes from these sentinels (REDIS_URL then gives
    # only the password, user, database number and TLS).
    redis_sentinels: StrList = Field(default_factory=list)
    redis_sentinel_master: str = "mymaster"
    redis_sentinel_password: SecretStr | None = None
    gateway_token: SecretStr
    # Also accepted by /webhook while GATEWAY_TOKEN is rotated (docs/operations.md).
    gateway_token_previous: SecretStr | None = None
    admin_secret: SecretStr | None = None

    discord_bot_token: SecretStr | None = None
    discord_api_base: str = "https://discord.com/api/v10"
    discord_bot_user_id: int | None = None
    discord_gateway_url: str | None = None
    webhook_url: str = "http://localhost:8000/webhook"
    # The only hosts attachments are fetched from (https; http only for a loopback host).
    discord_attachment_hosts: StrList = Field(
        default_factory=lambda: list(DEFAULT_ATTACHMENT_HOSTS)
    )
    # Whether the bot converses in DMs; `!memory …` and `!forgetme` work there either way.
    dms_enabled: bool = True

    chat_provider: Provider = Provider.ANTHROPIC
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    # For the openai provider; the SDK reads them itself too (a local server may need no key).
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    chat_model: str = DEFAULT_CHAT_MODEL
    chat_timeout_s: PositiveFloat = 60.0
    # The work nobody waits on (memory text, consolidation, episodes, diary, style); unset:
    # CHAT_MODEL.
    memory_model: str | None = None
    # The models staff may choose per channel (`!bot channel model`); empty: no choice.
    chat_models: StrList = Field(default_factory=list)

    jev_url: str | None = None
    jev_api_key: SecretStr | None = None
    jev_provider: Provider = Provider.ANTHROPIC
    jev_model: str = DEFAULT_JEV_MODEL
    jev_timeout_s: PositiveFloat = 10.0

    # An OpenAI-compatible embeddings API (recall and the duplicate check by meaning); unset:
    # everything goes by words alone.
    embeddings_base_url: str | None = None
    embeddings_model: str | None = None
    embeddings_api_key: SecretStr | None = None
    embeddings_dimensions: PositiveInt | None = None
    embeddings_input_type: InputType = InputType.NONE
    embeddings_query_prefix: str = ""
    embeddings_document_prefix: str = ""
    # The turn's one query embedding waits at most this long (then: words alone); stored
    # texts are embedded in the background, each request with this timeout and retries.
    embeddings_query_timeout_s: PositiveFloat = 2.0
    embeddings_timeout_s: PositiveFloat = 30.0

    jina_api_key: SecretStr | None = None
    jina_search_url: str = "https://s.jina.ai"
    jina_reader_url: str = "https://r.jina.ai"

    sandbox_backend: SandboxBackend = SandboxBackend.NONE
    # The local backend runs model-chosen commands on the worker host, where
    # /proc/$PPID/environ shows every secret: it needs this explicit opt-in.
    sandbox_local_unsafe: bool = Field(default=False, validate_default=True)
    sandbox_image: str = "debian:bookworm-slim"
    # "none" (no network at all) or the name of a Docker network the operator chose for egress.
    sandbox_network: str = "none"
    sandbox_max_containers: PositiveInt = 4
    sandbox_root: str = "/tmp/companion-sandbox"
    docker_url: str = "unix:///var/run/docker.sock"
    # Task-agent runs per person in any rolling hour, counted across every worker.
    tasks_per_user_per_hour: PositiveInt = 10
    # Addressed turns and chat commands per person in any rolling minute (Redis, shared).
    turns_per_user_per_minute: PositiveInt = 10
    commands_per_user_per_minute: PositiveInt = 10
    # Slash-command autocomplete answers per person in any rolling minute: each is a read of
    # their memories, made as they type (past it they get no choices until the minute ends).
    autocomplete_per_user_per_minute: PositiveInt = 60
    # Model tokens (input + output, every purpose) per JST day; unset: no cap.
    daily_tokens_per_user: PositiveInt | None = None
    daily_tokens_per_guild: PositiveInt | None = None

    @field_validator("sandbox_local_unsafe")
    @classmethod
    def _local_needs_unsafe_flag(cls, value: bool, info: ValidationInfo) -> bool:
        if info.data.get("sandbox_backend") is SandboxBackend.LOCAL and not value:
            raise ValueError(
                "must be true to use SANDBOX_BACKEND=local, which runs commands unsandboxed "
                "on the worker host; use SANDBOX_BACKEND=docker in production"
            )
        return value

    @field_validator("sandbox_network")
    @classmethod
    def _docker_network_name(cls, value: str) -> str:
        # "host" and "container:<id>" would share a namespace holding our own services.
        plain = value.replace("_", "").replace(".", "").replace("-", "")
        if value == "host" or not (value[:1].isalnum() and plain.isascii() and plain.isalnum()):
            raise ValueError("must be none or the name of a Docker network (not host)")
        return value

    persona_path: str = "persona.md"

    # Staff act only inside the guild where a command is given (a role counts only as held
    # there); operators do deployment-wide acts (app/commands/authority.py).
    staff_role_ids: IdList = Field(default_factory=list)
    staff_user_ids: IdList = Field(default_factory=list)
    operator_user_ids: IdList = Field(default_factory=list)

    memory_enabled: bool = True
    memory_recall_scope: RecallScope = RecallScope.SPEAKER
    memory_recall: MemoryRecall = MemoryRecall.RECENT
    # With `relevant`: at most this many older messages of the channel (beyond the last 20).
    memory_recall_messages: NonNegativeInt = 10
    memory_learn_from: LearnFrom = LearnFrom.EVERYONE
    memory_learn_addressed_days: PositiveInt = 30
    memory_retention_days: PositiveInt | None = None
    ledger_content_days: PositiveInt | None = None
    ledger_read_rollup_days: PositiveInt | None = None
    memory_consolidate_every: PositiveInt = 20
    memory_episodes_per_channel: PositiveInt = 10
    # Speakers the nightly extraction works on at once (in one job, one chunk each).
    nightly_concurrency: PositiveInt = 4
    # Rows an erasure removes per committed batch (each batch one short transaction).
    erasure_batch_size: int = Field(default=100, ge=10, le=5000)

    reaction_emojis: StrList = Field(default_factory=lambda: list(DEFAULT_REACTION_EMOJIS))

    worker_metrics_port: int = 9100
    # Jobs one worker process runs at once (docs/operations.md, "Sizing").
    worker_max_jobs: PositiveInt = 20
    # SIGTERM: how long a worker lets its running jobs finish before it releases them to the
    # other workers; keep it under the pod's terminationGracePeriodSeconds.
    worker_drain_grace_s: NonNegativeFloat = 20.0
    # SIGTERM: how long the API keeps serving with /readyz failing before it closes, so load
    # balancers stop sending first.
    api_drain_s: NonNegativeFloat = 0.0
    # The API's metrics also on a port of their own (0: only GET /metrics on the API's port),
    # so a network policy can let Prometheus reach them without the webhook and admin API.
    api_metrics_port: int = Field(default=0, ge=0, le=65535)

    @field_validator(
        "staff_role_ids",
        "staff_user_ids",
        "operator_user_ids",
        "reaction_emojis",
        "discord_attachment_hosts",
        "redis_sentinels",
        "chat_models",
        mode="before",
    )
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("discord_attachment_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for entry in value:
            parse_host(entry)  # a ValueError names the entry (a host name, never a secret)
        return [entry.strip().lower() for entry in value]

    @field_validator("reaction_emojis")
    @classmethod
    def _palette_has_thumbs_up(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("REACTION_EMOJIS must name at least one emoji")
        return value if "👍" in value else [*value, "👍"]

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinel_addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            parse_address(address, default_port=SENTINEL_PORT)  # raises with the reason
        return value

    @field_validator("database_url")
    @classmethod
    def _asyncpg_url(cls, value: str) -> str:
        if not value.startswith("postgresql+asyncpg://"):
            raise ValueError("DATABASE_URL must start with postgresql+asyncpg://")
        return value

    @field_validator(
        "memory_retention_days",
        "ledger_content_days",
        "ledger_read_rollup_days",
        "daily_tokens_per_user",
        "daily_tokens_per_guild",
        "discord_bot_user_id",
        "discord_gateway_url",
        "discord_bot_token",
        "admin_secret",
        "gateway_token_previous",
        "jev_url",
        "jev_api_key",
        "jina_api_key",
        "embeddings_base_url",
        "embeddings_model",
        "embeddings_api_key",
        "embeddings_dimensions",
        "anthropic_api_key",
        "anthropic_base_url",
        "openai_api_key",
        "openai_base_url",
        "memory_model",
        "redis_sentinel_password",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("gateway_token", "gateway_token_previous", "admin_secret")
    @classmethod
    def _strong_secret(cls, value: SecretStr | None) -> SecretStr | None:
        # Every process that reads these settings refuses a guessable shared secret; the
        # message (through describe) names the variable, never the value.
        problem = None if value is None else weak_secret(value.get_secret_value())
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _decision_service_needs_a_key(self) -> Self:
        if self.jev_url is not None and self.jev_api_key is None:
            raise ValueError("JEV_URL is set without JEV_API_KEY; set the decision service's key")
        return self

    @model_validator(mode="after")
    def _openai_needs_model_names(self) -> Self:
        # The defaults are Claude ids: an OpenAI-compatible server would refuse them.
        if self.chat_provider is Provider.OPENAI and "chat_model" not in self.model_fields_set:
            raise ValueError("CHAT_PROVIDER=openai needs CHAT_MODEL (a model the server serves)")
        if self.jev_provider is Provider.OPENAI and "jev_model" not in self.model_fields_set:
            raise ValueError("JEV_PROVIDER=openai needs JEV_MODEL (a model the server serves)")
        return self

    @model_validator(mode="after")
    def _embeddings_need_a_model_and_dimensions(self) -> Self:
        if self.embeddings_base_url is None:
            return self
        missing = [
            name
            for name, value in (
                ("EMBEDDINGS_MODEL", self.embeddings_model),
                ("EMBEDDINGS_DIMENSIONS", self.embeddings_dimensions),
            )
            if value is None
        ]
        if missing:
            raise ValueError(f"EMBEDDINGS_BASE_URL is set without {' and '.join(missing)}")
        return self

    @property
    def embeddings_configured(self) -> bool:
        """An embeddings endpoint: recall, search and the duplicate check also go by meaning."""
        return self.embeddings_base_url is not None

    @property
    def redis_target(self) -> RedisTarget:
        """Where the job queue is: REDIS_URL, or the master the sentinels name."""
        password = self.redis_sentinel_password
        return RedisTarget(
            url=self.redis_url,
            sentinels=tuple(
                parse_address(a, default_port=SENTINEL_PORT) for a in self.redis_sentinels
            ),
            sentinel_master=self.redis_sentinel_master,
            sentinel_password=password.get_secret_value() if password is not None else None,
        )

    @property
    def decision_model_configured(self) -> bool:
        """A decision service URL, or an in-process decider's model: an Anthropic key, or an
        OpenAI-compatible endpoint (a local one may need no key)."""
        if self.jev_url is not None:
            return True
        if self.jev_provider is Provider.OPENAI:
            return self.openai_base_url is not None or self.openai_api_key is not None
        return self.anthropic_api_key is not None

    @property
    def background_model(self) -> str:
        """The model for the work nobody waits on: MEMORY_MODEL, or CHAT_MODEL."""
        return self.memory_model or self.chat_model

    @property
    def memory_active(self) -> bool:
        """MEM-10: memory runs only when enabled and a decision model is configured."""
        return self.memory_enabled and self.decision_model_configured

    @property
    def recall_relevant(self) -> bool:
        """Relevance recall (memories ranked, older conversation), with memory on."""
        return self.memory_active and self.memory_recall is MemoryRecall.RELEVANT


class SettingsError(RuntimeError):
    """Configuration is missing or invalid; the message names the variables."""


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(describe(exc)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
