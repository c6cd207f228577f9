"""The README and docs/ name only variables the code reads and commands the CLI has.

A setting renamed or removed in the code but not in the docs sends a user to a
variable that does nothing, silently (pydantic-settings ignores unknown ones).
Names are the settings' own (``env_prefix`` + field, and their aliases), or a
variable read directly by the package, scripts, benches, tests or Makefile
(e.g. ``RAGSIFT_FAULT_QUERIES``). ``RAGSIFT_API_JWT_*`` in prose stands for
every name with that prefix.

Commands are read where the docs show them run: a code span that starts with
``ragsift `` and a code block's line that does (after ``VAR=value`` words).
"""

from __future__ import annotations

import re
from pathlib import Path

import typer
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from ragsift import settings
from ragsift.cli import app

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"RAGSIFT_[A-Z0-9_]*[A-Z0-9](_\*)?")
COMMAND = re.compile(r"^(?:[A-Z][A-Z0-9_]*=\S* +)*ragsift ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?")
CODE_BLOCK = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
CODE_SPAN = re.compile(r"`(ragsift [^`]+)`")
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


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def documented() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in doc_pages():
        for match in NAME.finditer(path.read_text()):
            found.setdefault(match.group(0), set()).add(str(path.relative_to(ROOT)))
    return found


def commands_run() -> dict[tuple[str, str | None], set[str]]:
    """Each ``(command, next word)`` the docs show run, with the pages that do."""
    found: dict[tuple[str, str | None], set[str]] = {}
    for path in doc_pages():
        text = path.read_text()
        lines = [line for block in CODE_BLOCK.findall(text) for line in block.splitlines()]
        lines += CODE_SPAN.findall(text)
        for line in lines:
            match = COMMAND.match(line.strip().removeprefix("$ "))
            if match:
                found.setdefault((match[1], match[2]), set()).add(str(path.relative_to(ROOT)))
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


def test_every_command_the_docs_run_is_one_the_cli_has() -> None:
    commands: dict[str, object] = getattr(typer.main.get_command(app), "commands", {})
    subcommands = {name: set(getattr(c, "commands", {})) for name, c in commands.items()}
    assert {"keys", "worker", "calibrations"} <= set(subcommands)
    unknown = {}
    for (command, word), where in commands_run().items():
        known = command in subcommands and (
            not subcommands[command] or word is None or word in subcommands[command]
        )
        if not known:
            unknown[f"ragsift {command} {word or ''}".strip()] = sorted(where)
    assert unknown == {}, f"run in the docs, not a command: {unknown}"
