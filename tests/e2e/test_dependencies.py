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

ROOT = Path(__file__).resolve().parents[2]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(extra: str | None = None) -> dict[str, Requirement]:
    """The project's dependencies (plus one optional extra's, when named)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [*project["dependencies"], *project["optional-dependencies"].get(extra or "", [])]
    requirements = (Requirement(line) for line in lines)
    return {canonical(r.name): r for r in requirements}


# Code that only runs with an optional extra installed: `python -m app dev` (the `local`
# extra). Everything else must run on the base dependencies the image installs.
EXTRA_ONLY = {"local": ROOT / "app" / "dev"}
# The fake Discord's check of requests against Discord's API description runs in the tests
# (the `dev` extra) and in the playground (the `local` extra), never in the image.
DESCRIBED = ROOT / "app" / "discord" / "described.py"


def imported_modules(*, under: Path | None = None, skip: Path | None = None) -> set[str]:
    modules = set()
    root = under or ROOT / "app"
    for path in [root] if root.is_file() else root.rglob("*.py"):
        if skip is not None and path.is_relative_to(skip):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - {"app", "__future__"}


def undeclared(modules: set[str], names: dict[str, Requirement]) -> dict[str, object]:
    owners = packages_distributions()
    return {
        module: owners.get(module)
        for module in modules
        if not any(canonical(dist) in names for dist in owners.get(module, []))
    }


def test_every_distribution_app_imports_is_declared() -> None:
    base = imported_modules(skip=EXTRA_ONLY["local"]) - imported_only_by(DESCRIBED)
    assert undeclared(base, declared()) == {}


def imported_only_by(path: Path) -> set[str]:
    """What ``path`` imports that nothing else under app/ does."""
    return imported_modules(under=path) - imported_modules(skip=path)


def test_the_description_check_needs_only_the_dev_and_local_extras() -> None:
    for extra in ("dev", "local"):
        assert undeclared(imported_modules(under=DESCRIBED), declared(extra)) == {}


def test_the_dev_stack_imports_only_the_base_and_its_extra() -> None:
    dev = imported_modules(under=EXTRA_ONLY["local"])
    assert undeclared(dev, declared("local")) == {}


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
