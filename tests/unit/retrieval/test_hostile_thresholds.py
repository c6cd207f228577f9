"""A per-tenant thresholds file of any content is read or refused with one clear error, cheaply.

A 400-byte YAML file of nested aliases (nine lines of ``&x [*w, *w, ...]``, 9^9 values)
took one to two minutes of CPU per read, and a poll of the file froze its worker; a file
nested past the parser's stack escaped the reload's error handling as a RecursionError.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsift.confidence import LevelThresholds
from ragsift.errors import ConfigurationError
from ragsift.observability.metrics import Metrics
from ragsift.retrieval.tenant_thresholds import (
    TenantThresholds,
    TenantThresholdStore,
    load_tenant_thresholds,
)

BASE = LevelThresholds(high=0.30, medium=0.20, low=0.10)


def _alias_bomb(levels: int = 9) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]")
    return "\n".join(lines) + f"\ntenants:\n  acme:\n    high: *l{levels - 1}\n"


HOSTILE = {
    "an alias bomb": ("t.yaml", _alias_bomb(), "aliases expand to more than 1,000,000"),
    "YAML nested past the stack": ("t.yaml", "tenants: " + "[" * 50_000, "nested too deep"),
    "JSON nested past the stack": ("t.json", '{"tenants": ' + "[" * 50_000, "nested too deep"),
}


@pytest.mark.parametrize(("name", "text", "why"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_file_is_refused_at_once(tmp_path: Path, name: str, text: str, why: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    # The error names the guard that stopped the read (a count of expanded values, a
    # depth), so the work is bounded by construction; what it held is measured, not
    # how long it took (machines are shared: no wall-time asserts).
    tracemalloc.start()
    try:
        with pytest.raises(ConfigurationError, match=why):
            load_tenant_thresholds(path, BASE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20  # an expanded bomb holds 9^9 references: gigabytes


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_reload_keeps_the_last_good_thresholds(tmp_path: Path, name: str) -> None:
    suffix, text, _ = HOSTILE[name]
    path, metrics, now = tmp_path / suffix, Metrics(), [0.0]
    path.write_text(json.dumps({"tenants": {"acme": {"high": 0.9}}}), encoding="utf-8")
    store = TenantThresholdStore(
        path, BASE, poll_interval_s=1.0, metrics=metrics, clock=lambda: now[0]
    )
    path.write_text(text, encoding="utf-8")
    stamp = path.stat().st_mtime_ns + 1_000_000_000
    os.utime(path, ns=(stamp, stamp))
    now[0] = 1.0
    assert not store.poll()
    errors = metrics.registry.get_sample_value(
        "ragsift_tenant_thresholds_reloads_total", {"result": "error"}
    )
    assert errors == 1
    assert store.policy("acme").levels.high == 0.9


def test_anchors_and_merge_keys_within_bounds_still_work(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "tenants:\n  acme: &shared {high: 0.9, answer_threshold: 0.6}\n"
        "  initech: *shared\n  globex:\n    <<: *shared\n    high: 0.8\n",
        encoding="utf-8",
    )
    tenants = load_tenant_thresholds(path, BASE)
    assert tenants["initech"] == tenants["acme"]
    assert (tenants["globex"].high, tenants["globex"].answer_threshold) == (0.8, 0.6)


def _loaded(path: Path) -> tuple[list[TenantThresholds], str | None]:
    try:
        return list(load_tenant_thresholds(path, BASE).values()), None
    except ConfigurationError as exc:
        return [], str(exc)


_YAML_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=15,
)
_FIELDS = st.sampled_from(["high", "medium", "low", "answer_threshold", "ttl_high_s", "x"])
_TENANTS = st.dictionaries(
    st.sampled_from(["acme", "a" * 65, "../x", "日本", ""]) | st.text(max_size=6),
    st.dictionaries(_FIELDS, _YAML_VALUE, max_size=3) | _YAML_VALUE,
    max_size=3,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    document=st.fixed_dictionaries({"tenants": _TENANTS}) | _YAML_VALUE,
    as_json=st.booleans(),
    cut=st.none() | st.integers(0, 200),
)
def test_any_document_is_read_or_one_configuration_error(
    tmp_path_factory: pytest.TempPathFactory, document: object, as_json: bool, cut: int | None
) -> None:
    """Any document (any shape, NaN, huge integers, odd tenant ids), whole or cut short."""
    folder = tmp_path_factory.mktemp("thresholds")
    path = folder / ("t.json" if as_json else "t.yaml")
    text = json.dumps(document) if as_json else yaml.safe_dump(document, allow_unicode=True)
    path.write_text(text if cut is None else text[:cut], encoding="utf-8")
    tenants, refused = _loaded(path)
    if refused is not None:
        assert refused.startswith(("tenant thresholds ", "tenant "))
    for values in tenants:
        values.levels(BASE)  # what each query of the tenant would read
