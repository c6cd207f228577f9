"""The defaults the README and docs/ state for settings are the code's defaults.

Two forms are read. A table whose second column is headed "default" and whose
first cell names ``RAGSIFT_*`` variables (``A`` / ``B`` rows state ``a / b``, or one
default for both). And
prose that gives a value in parentheses right after a variable's name:
``RAGSIFT_KAFKA_PARTITIONS`` (8), ``RAGSIFT_REDIS_URL`` (``redis://...``; ...),
``RAGSIFT_LLM_DEADLINE_S`` (20 s, ...). A default changed in settings.py and not
in the docs tells operators the wrong value.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ragsift.unknown_variables import setting_fields
from tests.unit.test_docs_agree import doc_pages

ROOT = Path(__file__).resolve().parents[2]
TABLE_HEAD = re.compile(r"^\|(.*)\|\n\|[\s:|-]+\|\n((?:\|.*\|\n?)+)", re.M)
#: ``RAGSIFT_X`` (value: a code span, a number with an optional unit, or a word that is one.
PROSE = re.compile(
    r"`(RAGSIFT_[A-Z0-9_]+)`\s+\((?:`(?P<span>[^`]*)`|(?P<number>-?\d[\d,]*(?:\.\d+)?)"
    r"(?: (?P<unit>KiB|MiB|GiB|ms|s|minutes)\b)?|(?P<word>true|false|on|off|unset)\b)"
)
UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "ms": 0.001, "s": 1, "minutes": 60}
#: Defaults the docs describe rather than state: the code's is None, resolved at start.
DESCRIBED = {"RAGSIFT_API_KEYS_FILE": "<data dir>/api-keys.json"}


def setting_defaults() -> dict[str, Any]:
    """Every variable a setting reads (aliases too) -> the setting's default."""
    found: dict[str, Any] = {}
    for each in setting_fields():
        default = each.info.get_default(call_default_factory=True)
        found.update(dict.fromkeys(each.variables, default))
    return found


def states(doc: str, code: Any, unit: str | None = None) -> bool:
    """Whether the docs' ``doc`` (backticks removed) states the default ``code``."""
    doc = doc.strip().strip("`").strip()
    if code is None:
        return doc.lower() in {"", "unset", "none"}
    if isinstance(code, bool):
        return doc.lower() in ({"true", "on"} if code else {"false", "off"})
    if isinstance(code, int | float):
        number = re.match(r"-?\d[\d,]*(?:\.\d+)?", doc)
        return bool(number) and float(number[0].replace(",", "")) * UNITS.get(
            unit or "", 1
        ) == pytest.approx(code)
    if isinstance(code, tuple):  # a comma-separated setting: its values, or none
        if not code:
            return doc.lower() in {"", "none"}
        return tuple(v.strip() for v in doc.split(",")) == code
    if isinstance(code, dict | list):
        try:
            return bool(json.loads(doc) == code)
        except ValueError:
            return False
    return doc == str(code)


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def stated_in_tables() -> list[tuple[str, str, str]]:
    """(where, variable, the default stated) of every row of a "default" table."""
    found = []
    for path in doc_pages():
        text = path.read_text(encoding="utf-8")
        for table in TABLE_HEAD.finditer(text):
            head = [cell.lower() for cell in _cells(table[1])]
            if len(head) < 2 or head[1] != "default":
                continue
            line = text[: table.start()].count("\n") + 3
            for offset, row in enumerate(table[2].splitlines()):
                cells = _cells(row)
                names = re.findall(r"`(RAGSIFT_[A-Z0-9_]+)`", cells[0].split("(")[0])
                if not names:
                    continue
                values = cells[1].split(" / ")
                if len(values) == 1:  # one default for every name of the row
                    values *= len(names)
                assert len(values) == len(names), f"{path.name}: {row}"
                where = f"{path.relative_to(ROOT)}:{line + offset}"
                found += [(where, name, value) for name, value in zip(names, values, strict=True)]
    return found


def stated_in_prose() -> list[tuple[str, str, str, str | None]]:
    """(where, variable, the value stated, its unit) after a name in parentheses."""
    found = []
    for path in doc_pages():
        text = path.read_text(encoding="utf-8")
        for match in PROSE.finditer(text):
            span = match["span"]
            if span is not None and re.match(r"(RAG_|RAGSIFT_|--|docs/)", span):
                continue  # an alias, an option or a page, not a value
            value = span if span is not None else match["number"] or match["word"]
            where = f"{path.relative_to(ROOT)}:{text[: match.start()].count(chr(10)) + 1}"
            found.append((where, match[1], value, match["unit"]))
    return found


def test_tables_state_the_code_defaults() -> None:
    defaults = setting_defaults()
    rows = stated_in_tables()
    assert len(rows) > 50  # the tables were read at all
    wrong = [
        f"{where}: {name} says {value!r}, the code {defaults.get(name, 'has no such setting')!r}"
        for where, name, value in rows
        if name not in defaults
        or (DESCRIBED.get(name) != value.strip("`") and not states(value, defaults[name]))
    ]
    assert wrong == []


def test_prose_states_the_code_defaults() -> None:
    defaults = setting_defaults()
    stated = [s for s in stated_in_prose() if s[1] in defaults]
    assert len(stated) > 50
    wrong = [
        f"{where}: {name} ({value}{' ' + unit if unit else ''}), the code {defaults[name]!r}"
        for where, name, value, unit in stated
        if not states(value, defaults[name], unit)
    ]
    assert wrong == []


def test_described_defaults_are_none_in_the_code() -> None:
    defaults = setting_defaults()
    assert all(defaults[name] is None for name in DESCRIBED)


@pytest.mark.parametrize(
    ("doc", "code", "unit", "same"),
    [
        ("67108864 (64 MiB)", 67_108_864, None, True),
        ("64", 65_536, "KiB", True),
        ("50", 0.05, "ms", True),
        ("`{}`", {}, None, True),
        ("unset", None, None, True),
        ("", None, None, True),
        ("`batch`", "batch", None, True),
        ("on", True, None, True),
        ("5", 5.0, None, True),
        ("6", 5.0, None, False),
        ("off", True, None, False),
        ("0", None, None, False),
        ("`batches`", "batch", None, False),
        ("{}", [], None, False),
    ],
)
def test_states_compares_as_the_docs_write(
    doc: str, code: Any, unit: str | None, same: bool
) -> None:
    assert states(doc, code, unit) is same
