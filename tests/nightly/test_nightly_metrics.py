"""A nightly run that ends exports its figures for operators."""

from __future__ import annotations

from prometheus_client import REGISTRY

from app.nightly.run import report_run


def test_an_ended_run_exports_its_status_changes_and_spend() -> None:
    before = REGISTRY.get_sample_value("nightly_runs_total", {"status": "failed"}) or 0.0
    report_run(
        "failed",
        {
            "added": [1, 2],
            "updated": [],
            "deleted": [3],
            "decayed": [],
            "errors": ["x"],
            "model_calls": 4,
            "decision_calls": 9,
        },
    )
    assert REGISTRY.get_sample_value("nightly_runs_total", {"status": "failed"}) == before + 1
    figures = {
        name: REGISTRY.get_sample_value("nightly_last_run", {"figure": name})
        for name in ("added", "deleted", "errors", "model_calls", "decision_calls")
    }
    assert figures == {
        "added": 2.0,
        "deleted": 1.0,
        "errors": 1.0,
        "model_calls": 4.0,
        "decision_calls": 9.0,
    }
