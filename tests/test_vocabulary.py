"""The words the code branches on are spelled once (app/vocabulary.py): no other module of
app/ writes a ledger actor, action, rollback skip reason or nightly step as a string literal,
so a rename is one edit that mypy follows everywhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from app.vocabulary import Action, Actor, NightlyStep, SkipReason, StepName

APP = Path(__file__).resolve().parents[1] / "app"
ACTORS = {a.value for a in Actor}
ACTIONS = {a.value for a in Action}
REASONS = {r.value for r in SkipReason}
STEPS = {s.value for s in StepName}
BATCHED = re.compile(rf"^({StepName.EXTRACT.value}|{StepName.DECAY.value}):")
BATCHED_STEP = re.compile(BATCHED.pattern + r"\d+$")


def _constant(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _named(node: ast.AST, names: set[str]) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in names) or (
        isinstance(node, ast.Name) and node.id in names
    )


def _steps(node: ast.AST) -> list[str | None]:
    """Nightly steps written out: a batched step's text (``"extract:3"``, or an f-string
    starting so), a step compared or matched (``match step.name``) as a string, or a step
    result's ``next=``."""
    if isinstance(node, ast.Constant) and BATCHED_STEP.match(str(node.value)):
        return [str(node.value)]
    if isinstance(node, ast.JoinedStr) and node.values:
        head = _constant(node.values[0])
        return [head] if head is not None and BATCHED.match(head) else []
    if isinstance(node, ast.Match) and _named(node.subject, {"step", "next", "name"}):
        values = [c.pattern.value for c in node.cases if isinstance(c.pattern, ast.MatchValue)]
        return [t for value in values if (t := _constant(value)) in STEPS]
    if isinstance(node, ast.keyword) and node.arg in ("next", "step"):
        return [t] if (t := _constant(node.value)) in STEPS else []
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(_named(side, {"step", "next", "name"}) for side in sides):
            return [t for side in sides if (t := _constant(side)) in STEPS]
    return []


def spelled_out(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, literal) of every actor, action, skip reason or nightly step written as a
    string."""
    words = ACTORS | ACTIONS
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        literals: list[str | None] = []
        if isinstance(node, ast.Constant):
            literals = [_constant(node)] if _constant(node) in REASONS else []
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_named(side, {"actor", "action"}) for side in sides):
                literals = [t for side in sides if (t := _constant(side)) in words]
        elif isinstance(node, ast.keyword) and node.arg in ("actor", "action"):
            literals = [t] if (t := _constant(node.value)) in words else []
        elif isinstance(node, ast.Call) and _named(node.func, {"Why"}) and node.args:
            literals = [_constant(node.args[0])]
        literals += _steps(node)
        found += [(getattr(node, "lineno", 0), text) for text in literals if text is not None]
    return found


def test_no_module_but_the_vocabulary_spells_an_actor_action_skip_reason_or_step() -> None:
    offenders = {
        str(path.relative_to(APP)): hits
        for path in APP.rglob("*.py")
        if path.name != "vocabulary.py"
        and (hits := spelled_out(ast.parse(path.read_text(), str(path))))
    }
    assert offenders == {}


def test_the_check_itself_sees_a_spelled_out_actor() -> None:
    sample = 'Why("nightly", "x")\nif row.action == "delete": pass\nf(actor="reply")\n'
    assert [text for _, text in spelled_out(ast.parse(sample))] == ["nightly", "delete", "reply"]


def test_the_check_itself_sees_a_spelled_out_nightly_step() -> None:
    sample = (
        'StepResult(next="diary")\nif step == "style": pass\nx = f"decay:{n + 1}"\n'
        'match step.name:\n    case "plan":\n        pass\ny = "extract:0"\n'
    )
    found = sorted(text for _, text in spelled_out(ast.parse(sample)))
    assert found == ["decay:", "diary", "extract:0", "plan", "style"]


def test_a_nightly_step_reads_back_as_it_is_written() -> None:
    for step in (NightlyStep(StepName.PLAN), NightlyStep(StepName.EXTRACT, 3)):
        assert NightlyStep.parse(str(step)) == step
    assert str(NightlyStep(StepName.DECAY, 2).next_batch()) == "decay:3"
