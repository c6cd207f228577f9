"""Every PromQL expression parses and names only metrics that exist.

Rules are parsed by ``promtool check rules`` (test_deploy_prometheus); the
dashboard's expressions are written into a temporary file of recording rules
and parsed the same way. Metric names are cross-checked with the registry of
``ragsift.observability.metrics.Metrics`` so the two cannot drift apart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import (
    EXTERNAL_METRICS,
    REPO,
    exported_metric_names,
    load_yaml,
    promql_metric_names,
    run,
    substitute_grafana_variables,
)

RULES = REPO / "deploy" / "prometheus" / "rules" / "ragsift.rules.yml"
DASHBOARDS = sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json"))


def _rule_exprs() -> dict[str, str]:
    return {
        rule.get("alert") or rule["record"]: rule["expr"]
        for group in load_yaml(RULES)["groups"]
        for rule in group["rules"]
    }


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    panels = []
    for panel in dashboard.get("panels", []):
        panels.append(panel)
        panels.extend(panel.get("panels", []))  # collapsed rows hold their panels
    return panels


def _dashboard_exprs() -> dict[str, str]:
    exprs = {}
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        for panel in _panels(dashboard):
            for target in panel.get("targets", []):
                if target.get("expr"):
                    key = f"{path.stem}:{panel['id']}:{target['refId']}"
                    exprs[key] = substitute_grafana_variables(target["expr"])
    return exprs


def _template_metrics() -> set[str]:
    names = set()
    for path in DASHBOARDS:
        for var in json.loads(path.read_text(encoding="utf-8"))["templating"]["list"]:
            query = var.get("query")
            text = query.get("query", "") if isinstance(query, dict) else str(query or "")
            names.update(re.findall(r"label_values\(\s*([A-Za-z_:][\w:]*)", text))
    return names


def _known_names() -> set[str]:
    recorded = {
        rule["record"]
        for group in load_yaml(RULES)["groups"]
        for rule in group["rules"]
        if "record" in rule
    }
    return exported_metric_names() | set(EXTERNAL_METRICS) | recorded


def test_exported_names_include_the_a9_metrics() -> None:
    names = exported_metric_names()
    for name in (
        "ragsift_confidence_bucket",
        "ragsift_confidence_status",
        "ragsift_filtered_results_total",
        "ragsift_no_context_queries_total",
    ):
        assert name in names


def test_tokenizer_finds_metrics_not_functions_or_labels() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, stage) (rate(ragsift_stage_duration_seconds_bucket"
        '{stage!="x"}[5m]))) > 1 and on (tenant) up{job=~"a.b"} offset 5m'
    )
    assert promql_metric_names(expr) == {"ragsift_stage_duration_seconds_bucket", "up"}


@pytest.mark.parametrize(
    ("source", "exprs"), [("rules", _rule_exprs), ("dashboard", _dashboard_exprs)]
)
def test_expressions_name_only_known_metrics(source: str, exprs: Any) -> None:
    known = _known_names()
    unknown = {
        key: sorted(promql_metric_names(expr) - known)
        for key, expr in exprs().items()
        if promql_metric_names(expr) - known
    }
    assert not unknown, f"{source} expressions use metrics nobody exports: {unknown}"
    assert all(promql_metric_names(e) for e in exprs().values()), "an expression selects no metric"


def test_dashboard_template_variables_use_known_metrics() -> None:
    names = _template_metrics()
    assert names, "the tenant variable should come from label_values(<metric>, tenant)"
    assert names <= _known_names()


def test_external_metrics_are_still_used() -> None:
    used = set().union(
        *map(promql_metric_names, [*_rule_exprs().values(), *_dashboard_exprs().values()])
    )
    assert set(EXTERNAL_METRICS) <= used, "drop external metrics no expression uses"


def test_dashboard_expressions_parse(promtool: str, tmp_path: Path) -> None:
    exprs = _dashboard_exprs()
    assert exprs, "the dashboard has no PromQL targets"
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": "dashboard:" + re.sub(r"\W", "_", key), "expr": expr}
                    for key, expr in exprs.items()
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    out = run([promtool, "check", "rules", str(path)])
    assert f"SUCCESS: {len(exprs)} rules found" in out
