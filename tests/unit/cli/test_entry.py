"""The console script's entry point: Ctrl-C while the CLI loads is one line, exit 130."""

from __future__ import annotations

import importlib.abc
import sys
from types import ModuleType

import pytest

from ragsift import entry


class _InterruptedImport(importlib.abc.MetaPathFinder):
    """Ctrl-C landing while ``ragsift.cli`` is imported (seconds of numpy, onnxruntime...)."""

    def find_spec(self, name: str, path: object, target: ModuleType | None = None) -> None:
        if name == "ragsift.cli":
            raise KeyboardInterrupt
        return None


def test_ctrl_c_while_the_cli_loads_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was a KeyboardInterrupt traceback of 15 to 46 lines: ragsift.cli imports
    # every command before its main() can catch anything.
    monkeypatch.delitem(sys.modules, "ragsift.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_InterruptedImport(), *sys.meta_path])
    with pytest.raises(SystemExit) as ended:
        entry.main()
    assert ended.value.code == 130
    assert capsys.readouterr().err == "\nAborted!\n"


def test_the_console_script_is_the_guarded_entry_point() -> None:
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "ragsift"]
    assert script.value == "ragsift.entry:main"
