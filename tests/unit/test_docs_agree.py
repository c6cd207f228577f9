"""The README and docs/ name only variables the code reads, every setting the code reads,
every variable the package, scripts, benches and tests read by name, and only commands
and flags the CLI has.

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

from ragsift.cli import app
from ragsift.unknown_variables import setting_fields

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"RAGSIFT_[A-Z0-9_]*[A-Z0-9](_\*)?")
COMMAND = re.compile(r"^(?:[A-Z][A-Z0-9_]*=\S* +)*ragsift ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?")
CODE_BLOCK = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
CODE_SPAN = re.compile(r"`(ragsift [^`]+)`")
#: where a variable may be read without being a setting; this file is left out
READERS = ("ragsift/**/*.py", "scripts/*", "bench/**/*.py", "tests/**/*.py", "Makefile")
#: a read of a variable: Python's ``os.environ``/``getenv``; a shell's ``$VAR``,
#: ``${VAR:-...}`` or ``export VAR=`` (a script setting it for what it runs)
PYTHON_READ = re.compile(r"""(?:environ\.get|environ\[|getenv)\(?\s*["'](RAGSIFT_[A-Z0-9_]+)["']""")
SHELL_READ = re.compile(r"\$\{?(RAGSIFT_[A-Z0-9_]+)|^\s*export (RAGSIFT_[A-Z0-9_]+)=", re.M)


def setting_variables() -> list[set[str]]:
    """Each setting's variables: its own name and its aliases (any of them sets it)."""
    return [set(each.variables) for each in setting_fields()]


def setting_names() -> set[str]:
    return set().union(*setting_variables())


def read_directly() -> set[str]:
    names: set[str] = set()
    for pattern in READERS:
        for path in ROOT.glob(pattern):
            if path.is_file() and path.resolve() != Path(__file__).resolve():
                text = path.read_text(errors="replace")
                names.update(m.group(0) for m in NAME.finditer(text) if not m.group(1))
    return names


def read_by_name() -> dict[str, set[str]]:
    """Variables the package, scripts, benches, tests and CI read by name -> where."""
    found: dict[str, set[str]] = {}
    for pattern in (*READERS, ".ci/*"):
        for path in ROOT.glob(pattern):
            if not path.is_file():
                continue
            text = path.read_text(errors="replace")
            shell = path.suffix != ".py"
            names = (
                [a or b for a, b in SHELL_READ.findall(text)]
                if shell
                else PYTHON_READ.findall(text)
            )
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def documented() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in doc_pages():
        for match in NAME.finditer(path.read_text()):
            found.setdefault(match.group(0), set()).add(str(path.relative_to(ROOT)))
    return found


def lines_run() -> list[tuple[str, str]]:
    """Each ``ragsift ...`` line the docs show run (continuations joined), with its page."""
    found: list[tuple[str, str]] = []
    for path in doc_pages():
        text = path.read_text()
        lines = [
            line
            for block in CODE_BLOCK.findall(text)
            for line in re.sub(r"\\\n\s*", " ", block).splitlines()
        ]
        lines += CODE_SPAN.findall(text)
        page = str(path.relative_to(ROOT))
        found += [(line.strip().removeprefix("$ "), page) for line in lines]
    return [(line, page) for line, page in found if COMMAND.match(line)]


def options(command: object) -> set[str]:
    """The flags a click command takes."""
    flags = {"--help"}
    for param in getattr(command, "params", []):
        flags.update(getattr(param, "opts", []), getattr(param, "secondary_opts", []))
    return flags


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


def test_every_setting_is_named_in_the_docs() -> None:
    """The other way round: a setting no page names is one a user cannot find."""
    named = set(documented())
    prefixes = tuple(name[:-1] for name in named if name.endswith("_*"))
    undocumented = sorted(
        min(names)
        for names in setting_variables()
        if not names & named and not any(n.startswith(prefixes) for n in names)
    )
    assert undocumented == [], f"settings no page of the docs names: {undocumented}"


def test_every_variable_read_by_name_is_named_in_the_docs() -> None:
    """Not only settings: the package's own reads, and the scripts', benches' and tests'
    (scripts/services' ports, RAGSIFT_REQUIRE_SERVICES), are set by someone too."""
    read = read_by_name()
    assert {"RAGSIFT_SQUAD2_DIR", "RAGSIFT_RUN_DIR", "RAGSIFT_FAULT_QUERIES"} <= set(read)
    named = set(documented())
    undocumented = {name: sorted(where) for name, where in read.items() if name not in named}
    assert undocumented == {}, f"read by name, named on no page of the docs: {undocumented}"


def test_every_command_and_flag_the_docs_run_is_one_the_cli_has() -> None:
    commands: dict[str, object] = getattr(typer.main.get_command(app), "commands", {})
    assert {"keys", "worker", "calibrations"} <= set(commands)
    unknown: dict[str, set[str]] = {}
    checked = 0
    for line, page in lines_run():
        match = COMMAND.match(line)
        assert match is not None
        name, word = match[1], match[2]
        command = commands.get(name)
        subcommands: dict[str, object] = getattr(command, "commands", {})
        if command is not None and word in subcommands:
            command, name = subcommands[word], f"{name} {word}"
        elif command is None or (subcommands and word is not None):
            unknown.setdefault(f"ragsift {name} {word or ''}".strip(), set()).add(page)
            continue
        # the command's own words: up to a pipe, a redirection, a comment or the next command
        words = re.split(r"\s(?:\||&&|;|>|2>|#)", line[match.end() :])[0]
        for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", words):
            checked += 1
            if flag not in options(command):
                unknown.setdefault(f"ragsift {name} {flag}", set()).add(page)
    assert checked > 100  # the docs' commands were read at all
    assert unknown == {}, f"run in the docs, not in the CLI: {unknown}"
