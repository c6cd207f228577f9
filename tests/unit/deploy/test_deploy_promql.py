"""Every PromQL expression parses and names only metrics that exist.

Rules are parsed by ``promtool check rules`` (test_deploy_prometheus); the
dashboard's expressions are written into a temporary file of recording rules
and parsed the same way. Metric names are cross-checked with the registries ragsift's
processes serve (``ragsift.observability.metrics.Metrics``, with the audit worker's
metrics, and the API's ``ragsift_api_*`` and console metrics registered on it) so the
two cannot drift apart, and so are
the label names the rules select, group and join by, the labels their annotations
show, and the series the promtool unit tests feed them: promtool accepts
``sum by (tenants)``, and a unit test written on the same misspelt series passes,
while in production the alert never names a tenant or never fires.
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
    TARGET_LABELS,
    exported_metric_labels,
    exported_metric_names,
    load_yaml,
    promql_metric_names,
    run,
    substitute_grafana_variables,
)

RULES = REPO / "deploy" / "prometheus" / "rules" / "ragsift.rules.yml"
RULE_TESTS = sorted((REPO / "deploy" / "prometheus" / "tests").glob("*.test.yml"))
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


#: A metric handed to prometheus-client: ``Counter(\n    "ragsift_x_total", ...``.
_REGISTERED = re.compile(r"\b(?:Counter|Gauge|Histogram|Summary|Info|Enum)\(\s*\"(ragsift_\w+)\"")


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


def test_the_apis_metrics_are_known_and_a_misspelt_one_is_not() -> None:
    """The API process registers its ragsift_api_* metrics (and the console's) beside the
    container's: an alert on one is checked like any other, so a misspelt one fails."""
    known = _known_names()
    api = {
        "ragsift_api_requests_total",
        "ragsift_api_request_duration_seconds_bucket",
        "ragsift_api_store_evictions_total",
        "ragsift_api_store_bytes",
        "ragsift_api_shared_store_errors_total",
        "ragsift_console_dropped_messages_total",
        "ragsift_http_refused_total",
        "ragsift_api_dropped_events_total",
        "ragsift_api_waits_dropped_total",
    }
    assert api <= known
    misspelt = 'sum(rate(ragsift_api_request_total{status="503"}[5m])) > 0'
    assert promql_metric_names(misspelt) - known == {"ragsift_api_request_total"}
    labels = exported_metric_labels()
    assert labels["ragsift_api_requests_total"] == {"route", "status"} | TARGET_LABELS
    assert labels["ragsift_api_waits_dropped_total"] == {"reason"} | TARGET_LABELS
    assert label_problems("sum by (routes) (rate(ragsift_api_requests_total[5m]))", labels) == [
        "by (routes): ragsift_api_requests_total has no ['routes']"
    ]


def test_every_metric_the_package_registers_is_known() -> None:
    """A metric registered outside the container (as the API's are) is still one the
    checks know: every name the package hands prometheus-client is exported."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "ragsift").rglob("*.py"))
    registered = set(_REGISTERED.findall(source))
    assert "ragsift_api_requests_total" in registered  # the pattern finds them at all
    exported = exported_metric_names()
    # a counter is registered by its series' name, a histogram by its buckets' stem
    unknown = [n for n in registered if n not in exported and f"{n}_bucket" not in exported]
    assert sorted(unknown) == []


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


_SELECTOR = re.compile(r"([A-Za-z_:][\w:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:\\.|[^"\\])*)"')
_AGGREGATION = re.compile(
    r"\b(sum|min|max|avg|count|group|stddev|stdvar|topk|bottomk|quantile|count_values)\s*"
    r"(?:(by|without)\s*\(([^)]*)\)\s*)?\("
)
_JOIN = re.compile(r"\b(?:on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_ANNOTATION_LABEL = re.compile(r"\$labels\.(\w+)")


def _words(text: str) -> set[str]:
    return {word.strip() for word in text.split(",") if word.strip()}


def _closing(text: str, start: int) -> int:
    """Index just past the parenthesis that closes the one opened at ``start - 1``."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise AssertionError(f"unbalanced parentheses in {text!r}")


def _alerts() -> list[dict[str, Any]]:
    return [r for g in load_yaml(RULES)["groups"] for r in g["rules"] if "alert" in r]


def label_problems(expr: str, labels: dict[str, frozenset[str]]) -> list[str]:
    """Labels an expression uses that its metrics do not have.

    A matcher's label must be on its metric; a ``by`` list on every metric the
    aggregation reads (``without`` is not checked); an ``on``/``ignoring``/``group_*``
    list on some metric of the expression.
    """
    problems = []
    for metric, matchers in _SELECTOR.findall(expr):
        for label, _, _ in _MATCHER.findall(matchers):
            if label not in labels.get(metric, frozenset()):
                problems.append(f"{metric} has no label {label}")
    for match in _AGGREGATION.finditer(expr):
        if match.group(2) != "by":
            continue
        body = expr[match.end() : _closing(expr, match.end())]
        for metric in sorted(promql_metric_names(body)):
            missing = _words(match.group(3)) - labels.get(metric, frozenset())
            if missing:
                problems.append(f"by ({match.group(3)}): {metric} has no {sorted(missing)}")
    every = set().union(*(labels.get(m, frozenset()) for m in promql_metric_names(expr)))
    for join in _JOIN.findall(expr):
        if _words(join) - every:
            problems.append(f"joined on {sorted(_words(join) - every)}, which no metric has")
    return problems


def output_labels(expr: str, labels: dict[str, frozenset[str]]) -> set[str]:
    """The labels an alert's series carry: its first aggregation's ``by`` list (``and``,
    ``/``, comparisons keep the left side's), or without one, its metrics' labels."""
    match = _AGGREGATION.search(expr)
    if match is None:
        return set().union(*(labels.get(m, frozenset()) for m in promql_metric_names(expr)))
    if match.group(2) == "by":
        return _words(match.group(3))
    if match.group(2) == "without":
        body = expr[match.end() : _closing(expr, match.end())]
        kept = set().union(*(labels.get(m, frozenset()) for m in promql_metric_names(body)))
        return kept - _words(match.group(3))
    return set()


def test_alert_rules_use_only_labels_their_metrics_have() -> None:
    labels = exported_metric_labels()
    problems = {a["alert"]: label_problems(a["expr"], labels) for a in _alerts()}
    assert {k: v for k, v in problems.items() if v} == {}


def test_alert_annotations_show_only_labels_the_alert_carries() -> None:
    labels = exported_metric_labels()
    unknown = {}
    for alert in _alerts():
        shown = set(_ANNOTATION_LABEL.findall(" ".join(alert["annotations"].values())))
        missing = shown - output_labels(alert["expr"], labels)
        if missing:
            unknown[alert["alert"]] = sorted(missing)
    assert unknown == {}, f"annotations show labels the alert does not carry: {unknown}"


def test_label_checks_catch_a_misspelt_label() -> None:
    labels = exported_metric_labels()
    assert labels["ragsift_queries_total"] >= {"tenant", "outcome"} | TARGET_LABELS
    assert "le" in labels["ragsift_confidence_bucket"]
    expr = (
        'sum by (tenants) (rate(ragsift_queries_total{outcomes="ok"}[5m]))'
        " and on (tenent) sum by (tenant) (rate(ragsift_no_context_queries_total[5m]))"
    )
    assert label_problems(expr, labels) == [
        "ragsift_queries_total has no label outcomes",
        "by (tenants): ragsift_queries_total has no ['tenants']",
        "joined on ['tenent'], which no metric has",
    ]
    assert output_labels(expr, labels) == {"tenants"}
    assert output_labels("up == 0", labels) == set(TARGET_LABELS)
    assert output_labels("sum(rate(ragsift_queries_total[5m])) > 1", labels) == set()


def _matched_values() -> dict[tuple[str, str], set[str]]:
    """(metric, label) -> the values the rules match it on with ``=``."""
    found: dict[tuple[str, str], set[str]] = {}
    for alert in _alerts():
        for metric, matchers in _SELECTOR.findall(alert["expr"]):
            for label, op, value in _MATCHER.findall(matchers):
                if op == "=" and metric not in EXTERNAL_METRICS and label not in TARGET_LABELS:
                    found.setdefault((metric, label), set()).add(value)
    return found


def test_alert_rules_match_label_values_the_code_emits() -> None:
    """``outcome="infeasible"`` is written somewhere in the package, or the rule never fires."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "ragsift").rglob("*.py"))
    matched = _matched_values()
    assert ("ragsift_queries_total", "outcome") in matched
    unknown = {
        f"{metric}{{{label}}}": sorted(v for v in values if f'"{v}"' not in source)
        for (metric, label), values in matched.items()
        if any(f'"{v}"' not in source for v in values)
    }
    assert unknown == {}, f"rules match label values no code emits: {unknown}"


def _test_series() -> list[tuple[str, str]]:
    """(file, series) of every input series of the promtool unit tests."""
    return [
        (path.name, series["series"])
        for path in RULE_TESTS
        for case in load_yaml(path)["tests"]
        for series in case.get("input_series", [])
    ]


def test_promtool_unit_tests_feed_series_as_ragsift_exports_them() -> None:
    """A unit test on a misspelt series proves nothing about the real one."""
    labels = exported_metric_labels()
    series = _test_series()
    assert len(series) > 20
    wrong = {}
    for where, text in series:
        name, _, rest = text.partition("{")
        name = name.strip()
        given = {label for label, _, _ in _MATCHER.findall(rest)}
        if name not in labels:
            wrong[f"{where}: {text}"] = "no such metric"
        elif given - labels[name]:
            wrong[f"{where}: {text}"] = f"no label {sorted(given - labels[name])}"
    assert wrong == {}, wrong
