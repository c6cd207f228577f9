"""Every ``RAGSIFT_*`` variable the README and docs/ name is one the code reads.

A setting renamed or removed in the code but not in the docs sends a user to a
variable that does nothing, silently (pydantic-settings ignores unknown ones).
Names are the settings' own (``env_prefix`` + field, and their aliases), or a
variable read directly by the package, scripts, benches, tests or Makefile
(e.g. ``RAGSIFT_FAULT_QUERIES``). ``RAGSIFT_API_JWT_*`` in prose stands for
every name with that prefix.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from ragsift import settings

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"RAGSIFT_[A-Z0-9_]*[A-Z0-9](_\*)?")
#: where a variable may be read without being a setting; this file is left out
READERS = ("ragsift/**/*.py", "scripts/*", "bench/**/*.py", "tests/**/*.py", "Makefile")


def setting_names() -> set[str]:
    names: set[str] = set()
    for model in vars(settings).values():
        if not (isinstance(model, type) and issubclass(model, BaseSettings)):
            continue
        prefix = str(model.model_config.get("env_prefix", ""))
        for field, info in model.model_fields.items():
            names.add(f"{prefix}{field}".upper())
            alias = info.validation_alias
            choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
            names.update(str(c).upper() for c in choices if isinstance(c, str))
    return names


def read_directly() -> set[str]:
    names: set[str] = set()
    for pattern in READERS:
        for path in ROOT.glob(pattern):
            if path.is_file() and path.resolve() != Path(__file__).resolve():
                text = path.read_text(errors="replace")
                names.update(m.group(0) for m in NAME.finditer(text) if not m.group(1))
    return names


def documented() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]:
        for match in NAME.finditer(path.read_text()):
            found.setdefault(match.group(0), set()).add(str(path.relative_to(ROOT)))
    return found


def test_settings_are_found_at_all() -> None:
    names = setting_names()
    assert {"RAGSIFT_KAFKA_BOOTSTRAP_SERVERS", "RAGSIFT_DATA_DIR", "RAG_MIN_RESULTS"} <= names


def test_every_variable_the_docs_name_is_read_by_the_code() -> None:
    known = setting_names() | read_directly()
    unknown = {}
    for name, where in documented().items():
        if name.endswith("_*"):
            if not any(k.startswith(name[:-1]) for k in known):
                unknown[name] = sorted(where)
        elif name not in known:
            unknown[name] = sorted(where)
    assert unknown == {}, f"named in the docs, read by nothing: {unknown}"
