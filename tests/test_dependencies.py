"""pyproject.toml declares every distribution app/ imports, and requirements.lock (what the
image installs) pins each of them at a version pyproject allows."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = (Requirement(line) for line in project["dependencies"])
    return {canonical(r.name): r for r in requirements}


def imported_modules() -> set[str]:
    modules = set()
    for path in (ROOT / "app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - {"app", "__future__"}


def test_every_distribution_app_imports_is_declared() -> None:
    owners = packages_distributions()
    names = declared()
    undeclared = {
        module: owners.get(module)
        for module in imported_modules()
        if not any(canonical(dist) in names for dist in owners.get(module, []))
    }
    assert undeclared == {}


def test_the_lock_pins_every_declared_distribution_within_its_bounds() -> None:
    pinned = dict(
        (canonical(name), version)
        for name, version in re.findall(
            r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.lock").read_text(), re.MULTILINE
        )
    )
    outside = {
        name: (str(requirement.specifier), pinned.get(name))
        for name, requirement in declared().items()
        if name not in pinned or not requirement.specifier.contains(pinned[name])
    }
    assert outside == {}
