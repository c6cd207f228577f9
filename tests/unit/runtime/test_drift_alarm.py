"""Drift alarm end to end on the embedded runtime: out-of-domain traffic trips the gauge, the
flag, one evidence event, and the Prometheus alert expression (promtool on the gauge's value)."""

from __future__ import annotations

from pathlib import Path

import yaml

from ragsift.embedded import EmbeddedRuntime
from ragsift.ingest.sample import sample_documents
from ragsift.schemas import EvidenceEvent, EvidenceType, QueryEvent, RetrievalResult
from ragsift.settings import DriftSettings, EmbedderSettings, Settings
from tests.unit.deploy.deploy_support import REPO, run, tool

IN_DOMAIN = (
    "How many days do I have to return the Orbit thermostat for a refund?",
    "What are the API rate limits per key?",
    "How long is temperature data kept?",
    "How long is the warranty on the Orbit thermostat?",
    "Can I cancel my Orbit Insights subscription?",
)
SUBJECTS = ("ethanol", "volcanoes", "the Roman empire", "jazz", "glaciers", "chess openings")
OUT_OF_DOMAIN = tuple(
    f"{ask} {subject}?"
    for ask in ("What is the history of", "Who first studied", "Why do people like")
    for subject in SUBJECTS
)
MIN_SAMPLES = 40


async def ask(
    runtime: EmbeddedRuntime, tenant: str, texts: list[str], tag: str
) -> list[RetrievalResult]:
    events = [
        QueryEvent(query_id=f"{tag}-{i}", tenant_id=tenant, query=text)
        for i, text in enumerate(texts)
    ]
    return [r for r in await runtime.ask(events) if isinstance(r, RetrievalResult)]


def cycle(texts: tuple[str, ...], n: int) -> list[str]:
    return [texts[i % len(texts)] for i in range(n)]


async def test_out_of_domain_traffic_trips_the_flag_the_evidence_and_the_alert(
    tmp_path: Path,
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        embedder=EmbedderSettings(kind="hashing"),
        drift=DriftSettings(min_samples=MIN_SAMPLES, half_life=60),
    )
    runtime = EmbeddedRuntime(settings)
    try:
        for tenant in ("acme", "beta"):
            await runtime.ingest(tenant, sample_documents())
        # Both tenants start in domain (the reference), then acme's traffic changes.
        for tenant in ("acme", "beta"):
            first = await ask(runtime, tenant, cycle(IN_DOMAIN, 2 * MIN_SAMPLES), f"{tenant}-in")
            assert not any(r.calibration_shift for r in first)
        beta = await ask(runtime, "beta", cycle(IN_DOMAIN, 2 * MIN_SAMPLES), "beta-more")
        acme = await ask(runtime, "acme", cycle(OUT_OF_DOMAIN, 3 * MIN_SAMPLES), "acme-ood")
        audit = [e for e in runtime.bus.published["audit"] if isinstance(e, EvidenceEvent)]
    finally:
        await runtime.close()
    assert not any(r.calibration_shift for r in beta)
    assert acme[-1].calibration_shift
    shifts = [e for e in audit if e.type == EvidenceType.CALIBRATION_SHIFT]
    assert len(shifts) == 1  # once per trip, not once per flagged query
    assert shifts[0].data.tenant_id == "acme"
    flagged = [r.query_id for r in acme if r.calibration_shift]
    assert shifts[0].data.query_id == flagged[0]
    registry = runtime.metrics.registry
    acme_psi = registry.get_sample_value(
        "ragsift_calibration_drift_psi", {"tenant": "acme", "collection": "default"}
    )
    beta_psi = registry.get_sample_value(
        "ragsift_calibration_drift_psi", {"tenant": "beta", "collection": "default"}
    )
    assert acme_psi is not None
    assert acme_psi > settings.drift.psi_threshold
    assert beta_psi is not None
    assert beta_psi < settings.drift.psi_threshold
    assert alert_fires_on(tmp_path, {"acme": acme_psi, "beta": beta_psi}) == {"acme"}


def alert_fires_on(tmp_path: Path, psi_by_tenant: dict[str, float]) -> set[str]:
    """Tenants whose measured PSI, held for 20 minutes, fires RagsiftCalibrationDrift.

    promtool runs the shipped rule on the gauge values this runtime exported, and
    fails (failing the test) unless exactly the tenants above 0.25 fire.
    """
    fired = {tenant for tenant, value in psi_by_tenant.items() if value > 0.25}
    expected = [
        {
            "exp_labels": {
                "severity": "warning",
                "team": "ragsift",
                "tenant": tenant,
                "collection": "default",
            },
            "exp_annotations": {
                "summary": f"Calibration drift for tenant {tenant} in default",
                "description": (
                    f"Top-hit scores of {tenant}/default moved from the calibration's reference:"
                    f" PSI {psi_by_tenant[tenant]:.2f} (threshold 0.25) for 10 minutes; its"
                    " confidences may no longer mean what they say."
                ),
                "runbook": "docs/deployment.md#ragsiftcalibrationdrift",
            },
        }
        for tenant in sorted(fired)
    ]
    series = [
        {
            "series": f'ragsift_calibration_drift_psi{{tenant="{tenant}",collection="default"}}',
            "values": f"{value:.6f}x30",
        }
        for tenant, value in psi_by_tenant.items()
    ]
    test = {
        "rule_files": [str(REPO / "deploy" / "prometheus" / "rules" / "ragsift.rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": "20m",
                        "alertname": "RagsiftCalibrationDrift",
                        "exp_alerts": expected,
                    }
                ],
            }
        ],
    }
    path = tmp_path / "drift.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False), encoding="utf-8")
    assert "SUCCESS" in run([tool("promtool"), "test", "rules", str(path)])
    return fired
