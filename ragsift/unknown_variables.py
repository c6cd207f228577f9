"""Unknown ``RAGSIFT_*`` variables: named in a warning once at start-up, never refused.

pydantic-settings ignores a variable no setting reads (``extra="ignore"``), so a setting
misspelt by one letter ran on its default without a word. ``Settings.from_env`` (the
entry point's reading of the environment) runs :data:`UNKNOWN_VARIABLES`, once per
process however often it is called: each ``RAGSIFT_*`` variable that no setting reads,
and that is not one the project's own scripts read (:data:`NOT_SETTINGS`), is logged as
a warning with the setting it most resembles, and ``ragsift_settings_unknown_variables``
holds how many there were. A warning and not a refusal: a version rolled back to does
not know a setting a newer one added, and must still start.
"""

from __future__ import annotations

import difflib
import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache

from pydantic import AliasChoices
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from ragsift import settings
from ragsift.errors import shown_value

__all__ = [
    "NOT_SETTINGS",
    "UNKNOWN_VARIABLES",
    "SettingField",
    "UnknownVariable",
    "UnknownVariableCheck",
    "setting_fields",
    "setting_variables",
    "unknown_variables",
]

log = logging.getLogger(__name__)

PREFIX = "RAGSIFT_"

#: Variables the project's scripts, tests and benches read themselves (and ``ragsift eval
#: --labelled``, a default folder): a shell that ran ``scripts/services`` or
#: ``scripts/test`` may still export them to a ragsift it starts. docs/configuration.md
#: lists them; tests/unit/test_unknown_variables.py keeps this list equal to what
#: those files read by name.
NOT_SETTINGS = frozenset(
    {
        # scripts/services and scripts/deploy-tools: where the local Kafka and Redis run
        "RAGSIFT_CACHE_DIR",
        "RAGSIFT_JAVA",
        "RAGSIFT_KAFKA_CONTROLLER_PORT",
        "RAGSIFT_KAFKA_HEAP_OPTS",
        "RAGSIFT_KAFKA_HOST",
        "RAGSIFT_KAFKA_PORT",
        "RAGSIFT_KAFKA_START_TIMEOUT",
        "RAGSIFT_KAFKA_STOP_TIMEOUT",
        "RAGSIFT_MAVEN_REPO",
        "RAGSIFT_REDIS_PORT",
        "RAGSIFT_RUN_DIR",
        # scripts/test and the test suites
        "RAGSIFT_CONSOLE_SCREENSHOT",
        "RAGSIFT_FAULT_QUERIES",
        "RAGSIFT_REQUIRE_SERVICES",
        "RAGSIFT_SOAK_SECONDS",
        # benches, evaluation scripts and `ragsift eval --labelled squad2`
        "RAGSIFT_BENCH_PSTATS",
        "RAGSIFT_DEBIAN_FAQ",
        "RAGSIFT_PERL_FAQ",
        "RAGSIFT_PYTHON_FAQ",
        "RAGSIFT_SHIFT_SHARE",
        "RAGSIFT_SQUAD2_DIR",
        "RAGSIFT_ZSH_FAQ",
    }
)

#: How alike (difflib's ratio, on the part after ``RAGSIFT_``) a setting's name must be to
#: be suggested: one or two letters wrong, missing or swapped in a name of ten or more
#: pass; an unrelated name of the same concern (``KAFKA_FOO`` for ``KAFKA_APP_ID``) not.
SUGGESTION_CUTOFF = 0.75

#: A name shown as it is; any other (control characters, a huge one) is shown quoted, cut.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]{1,80}")


@dataclass(frozen=True)
class SettingField:
    """One setting: its model and field, and the variables that set it (upper case, its own
    name first, then its aliases)."""

    model: type[BaseSettings]
    field: str
    info: FieldInfo
    variables: tuple[str, ...]


def setting_fields() -> Iterator[SettingField]:
    """Every setting of :mod:`ragsift.settings`, model by model, in declaration order.

    A concern (``Settings.kafka``) is not one: ``from_env`` builds it from its own fields.
    The check here, the docs' generator and the docs' tests all read settings this way.
    """
    for model in vars(settings).values():
        if not (isinstance(model, type) and issubclass(model, BaseSettings)):
            continue
        prefix = str(model.model_config.get("env_prefix", ""))
        for field, info in model.model_fields.items():
            if isinstance(info.annotation, type) and issubclass(info.annotation, BaseSettings):
                continue
            alias = info.validation_alias
            choices = alias.choices if isinstance(alias, AliasChoices) else []
            others = [str(choice).upper() for choice in choices if isinstance(choice, str)]
            variables = tuple(dict.fromkeys([f"{prefix}{field}".upper(), *others]))
            yield SettingField(model, field, info, variables)


@cache
def setting_variables() -> frozenset[str]:
    """Every variable a setting reads (upper case): its own name and its aliases."""
    return frozenset(name for each in setting_fields() for name in each.variables)


@dataclass(frozen=True)
class UnknownVariable:
    """A ``RAGSIFT_*`` variable no setting reads, and the setting it most resembles."""

    name: str
    suggestion: str | None

    def message(self) -> str:
        """The warning: the name (never the value: it may be a secret) and the way out."""
        shown = self.name if _PLAIN_NAME.fullmatch(self.name) else shown_value(self.name)
        text = f"{shown} is set but no ragsift setting reads it, so it is ignored"
        if self.suggestion is not None:
            return f"{text}: did you mean {self.suggestion}?"
        return f"{text} (docs/configuration.md lists every setting)"


def _suggestion(name: str, known: Iterable[str]) -> str | None:
    tails = {variable.removeprefix(PREFIX): variable for variable in known}
    tail = name.upper().removeprefix(PREFIX)
    close = difflib.get_close_matches(tail, sorted(tails), n=1, cutoff=SUGGESTION_CUTOFF)
    return tails[close[0]] if close else None


def unknown_variables(environ: Mapping[str, str]) -> list[UnknownVariable]:
    """The ``RAGSIFT_*`` names in ``environ`` that no setting reads and no script either,
    sorted; compared in upper case, as pydantic-settings reads them."""
    known = setting_variables()
    return [
        UnknownVariable(name, _suggestion(name, known))
        for name in sorted(environ)
        if name.upper().startswith(PREFIX)
        and name.upper() not in known
        and name.upper() not in NOT_SETTINGS
    ]


class UnknownVariableCheck:
    """The start-up check, run once however often an entry point reads its settings."""

    def __init__(self) -> None:
        self._found: tuple[UnknownVariable, ...] | None = None
        self._lock = threading.Lock()

    @property
    def found(self) -> tuple[UnknownVariable, ...]:
        """What the check found (nothing before it ran)."""
        return self._found or ()

    def run(self, environ: Mapping[str, str]) -> tuple[UnknownVariable, ...]:
        """Warn of each unknown variable in ``environ``, the first time only."""
        with self._lock:
            if self._found is None:
                self._found = tuple(unknown_variables(environ))
                for variable in self._found:
                    log.warning(variable.message())
            return self._found


#: The process's check: ``Settings.from_env`` runs it, the metrics container reports it.
UNKNOWN_VARIABLES = UnknownVariableCheck()
