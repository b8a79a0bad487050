"""The dev stack's generated secrets, kept in one file under the data folder (mode 0600), so
a second start reuses them and the playground keeps working with the same tokens."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, fields
from pathlib import Path

SECRETS_FILE = "secrets.json"


@dataclass(frozen=True)
class DevSecrets:
    gateway_token: str
    admin_secret: str
    discord_bot_token: str
    jev_api_key: str

    def __repr__(self) -> str:  # never print a value
        return "DevSecrets(…)"


def _fresh() -> str:
    # 64 hex characters: well past any length rule, and no word a placeholder check knows.
    return secrets.token_hex(32)


def load_or_create(data_dir: Path) -> DevSecrets:
    """Read ``data_dir/secrets.json``; create it (or fill in missing entries) with fresh
    values. The file is written owner-only before anything is put in it."""
    path = data_dir / SECRETS_FILE
    stored: dict[str, object] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise SecretsUnreadable(f"{path} is not JSON; remove it to start afresh") from None
        stored = loaded if isinstance(loaded, dict) else {}
    values = {}
    for item in fields(DevSecrets):
        value = stored.get(item.name)
        values[item.name] = value if isinstance(value, str) and len(value) >= 32 else _fresh()
    result = DevSecrets(**values)
    if values != stored:
        _write_private(path, json.dumps(asdict(result), indent=2) + "\n")
    os.chmod(path, 0o600)
    return result


def _write_private(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


class SecretsUnreadable(RuntimeError):
    """The secrets file exists but cannot be read as JSON."""
