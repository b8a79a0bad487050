"""The ARQ internals our worker and queue rely on are all named in app.kit.arqinternals, and
the installed ARQ still has each of them as it was when we read it."""

from __future__ import annotations

import ast
from pathlib import Path

from arq.worker import Worker

from app.kit.arqinternals import ARQ_INTERNALS, Internal, drifted
from app.kit.arqworker import ResilientWorker

ROOT = Path(__file__).resolve().parents[2]
RELYING = [ROOT / "app" / "kit" / "arqworker.py", ROOT / "app" / "kit" / "arqueue.py"]
NAMED = {internal.name for internal in ARQ_INTERNALS}


def test_the_installed_arq_has_every_internal_as_fingerprinted() -> None:
    changed = drifted()
    assert changed == {}, (
        "ARQ changed code our worker or queue relies on: re-read each, adapt "
        f"app/kit/arqworker.py or arqueue.py, then update app/kit/arqinternals.py: {changed}"
    )


def test_a_changed_or_missing_internal_is_reported() -> None:
    stale = (
        Internal("arq.worker.Worker.start_jobs", "", "0" * 16),
        Internal("arq.worker.Worker.claim_many", "", "0" * 16),
    )
    changed = drifted(stale)
    assert set(changed) == {"arq.worker.Worker.start_jobs", "arq.worker.Worker.claim_many"}
    assert changed["arq.worker.Worker.claim_many"] == "gone (AttributeError)"


def imported_from_arq(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "arq":
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names if alias.name.split(".")[0] == "arq"}
    return names


def test_everything_the_worker_and_queue_import_from_arq_is_named() -> None:
    unnamed = {
        name
        for path in RELYING
        for name in imported_from_arq(path)
        if not any(n == name or n.startswith(name + ".") for n in NAMED)
    }
    assert unnamed == set()


def test_every_arq_method_the_worker_overrides_is_named() -> None:
    overridden = {
        f"arq.worker.Worker.{name}"
        for name, value in vars(ResilientWorker).items()
        if callable(value) and hasattr(Worker, name)
    }
    assert overridden - NAMED == set()
    assert "arq.worker.Worker.start_jobs" in overridden  # the check sees overrides at all
