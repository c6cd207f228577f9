"""Kubernetes manifests: kustomize builds, schema validation and the rules of the design.

Built-in kinds are validated with kubernetes-validate (strict: unknown fields
fail). KEDA and Prometheus-operator resources are validated by their CRDs'
schemas through deploy/schemas/validate-crds.mjs. Strimzi's KafkaTopic has no
schema available from a package registry; it is listed in NOT_VALIDATED and
checked structurally instead (see deploy/schemas/README.md).
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import kubernetes_validate
import pytest
from deploy_support import (
    ALL_INTERFACES,
    API_KEYS_FILE,
    API_METRICS_PORT,
    API_QUERY_PORT,
    REPO,
    cache_dir,
    missing,
    option_values,
    run,
)

CRD_GROUPS_VALIDATED = {"keda.sh", "monitoring.coreos.com"}
NOT_VALIDATED = {
    "kafka.strimzi.io/v1beta2/KafkaTopic": (
        "no registry package ships Strimzi's CRD schema; checked against the generator "
        "and the KEDA triggers instead"
    ),
}
CONSUMER_WORKERS = {
    # worker: the topic its consumer group reads
    "retrieval": "ragsift.queries.v1",
    "indexer": "ragsift.documents.v1",
    "report": "ragsift.retrievals.v1",
    "decision": "ragsift.retrievals.v1",
    # it reads feedback too; results arrive far more often, so their lag scales it
    "calibration": "ragsift.retrievals.v1",
    "audit": "ragsift.audit.v1",
}
SECRET_ENV = {"RAGSIFT_KAFKA_SASL_PASSWORD", "RAGSIFT_REDIS_PASSWORD", "RAGSIFT_QDRANT_API_KEY"}
# Only the report worker calls the LLM and renders prompts.
EXTRA_SECRET_ENV = {"ragsift-report": {"RAGSIFT_LLM_API_KEY", "RAGSIFT_REPORT_NONCE_KEY"}}

Resources = list[dict[str, Any]]


def _kind(resources: Resources, kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def _group(resource: dict[str, Any]) -> str:
    api = resource["apiVersion"]
    return api.split("/")[0] if "/" in api else ""


def _is_builtin(resource: dict[str, Any]) -> bool:
    group = _group(resource)
    return group == "" or "." not in group or group.endswith(".k8s.io")


def _crd_validators() -> str:
    node = shutil.which("node")
    modules = cache_dir() / "node" / "node_modules"
    if node is None or not (modules / "@kubernetes-models" / "keda").is_dir():
        missing(f"node and the CRD validators in {modules}")
    return str(modules)


def _validate_crds(resources: Resources) -> list[dict[str, Any]]:
    out = run(
        ["node", str(REPO / "deploy" / "schemas" / "validate-crds.mjs"), _crd_validators()],
        stdin=json.dumps(resources),
    )
    return json.loads(out)


def test_builtin_kinds_validate_against_kubernetes_schemas(overlay: Resources) -> None:
    version = kubernetes_validate.latest_version()
    builtin = [r for r in overlay if _is_builtin(r)]
    assert {"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ConfigMap"} <= {
        r["kind"] for r in builtin
    }
    errors = []
    for resource in builtin:
        try:
            kubernetes_validate.validate(resource, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{resource['kind']}/{resource['metadata']['name']}: {exc.message}")
    assert not errors, "\n".join(errors)


def test_strict_validation_rejects_an_unknown_field(overlay: Resources) -> None:
    deployment = json.loads(json.dumps(next(r for r in overlay if r["kind"] == "Deployment")))
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, kubernetes_validate.latest_version(), strict=True)


def test_custom_resources_validate_against_their_crds(overlay: Resources) -> None:
    custom = [r for r in overlay if not _is_builtin(r)]
    results = _validate_crds(custom)
    by_key = {f"{r['apiVersion']}/{r['kind']}": r for r in results}
    for result in results:
        key = f"{result['apiVersion']}/{result['kind']}"
        if result["status"] == "no-schema":
            assert key in NOT_VALIDATED, f"{key} has no schema and is not listed as not validated"
        else:
            assert result["status"] == "valid", f"{key} {result['name']}: {result.get('error')}"
    validated_groups = {k.split("/")[0] for k, r in by_key.items() if r["status"] == "valid"}
    assert validated_groups == CRD_GROUPS_VALIDATED


def test_crd_validator_rejects_a_bad_scaled_object(overlay: Resources) -> None:
    scaled = json.loads(json.dumps(next(r for r in overlay if r["kind"] == "ScaledObject")))
    scaled["spec"]["triggers"][0]["metadata"]["lagThreshold"] = 100  # must be a string
    del scaled["spec"]["scaleTargetRef"]["name"]
    [result] = _validate_crds([scaled])
    assert result["status"] == "invalid"


def test_every_deployment_has_probes_resources_and_a_pdb(overlay: Resources) -> None:
    deployments = _kind(overlay, "Deployment")
    pdbs = _kind(overlay, "PodDisruptionBudget")
    assert set(deployments) == {"ragsift-api"} | {f"ragsift-{w}" for w in CONSUMER_WORKERS}
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            assert container[probe]["httpGet"]["path"] in {"/healthz", "/readyz"}, (name, probe)
            # /healthz and /readyz are served on the metrics port only (the API's
            # query port answers them 404 since issue 12).
            assert container[probe]["httpGet"]["port"] == "metrics", (name, probe)
        assert container["resources"]["requests"]["cpu"], name
        assert container["resources"]["limits"]["memory"], name
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        secret_env = {
            e["name"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert secret_env == SECRET_ENV | EXTRA_SECRET_ENV.get(name, set()), name
        [config] = container["envFrom"]
        assert config["configMapRef"]["name"].startswith("ragsift-config-")
        assert pdbs[name]["spec"]["selector"] == deployment["spec"]["selector"], name


def test_no_variable_kubernetes_injects_for_a_service_is_read_as_a_setting(
    overlay: Resources,
) -> None:
    # Service links put <NAME>_PORT=tcp://<ip>:<port> (and more) in every pod of the
    # namespace: the Service ragsift-api made RAGSIFT_API_PORT, which every ragsift
    # command read as ApiSettings.port and refused ("Input should be a valid
    # integer"), so pods started after the Service existed crashed.
    from tests.unit.test_docs_agree import setting_names

    injected = set()
    for name, service in _kind(overlay, "Service").items():
        if service["spec"].get("clusterIP") == "None":
            continue  # a headless Service gets no variables
        prefix = name.upper().replace("-", "_")
        injected |= {f"{prefix}_SERVICE_HOST", f"{prefix}_SERVICE_PORT", f"{prefix}_PORT"}
        for port in service["spec"]["ports"]:
            proto = port.get("protocol", "TCP")
            injected.add(f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}")
            injected |= {f"{prefix}_PORT_{port['port']}_{proto}{s}" for s in ("", "_PORT")}
    clashes = injected & setting_names()
    assert clashes == {"RAGSIFT_API_PORT"}  # why the links must be off; a new one is news
    for name, deployment in _kind(overlay, "Deployment").items():
        assert deployment["spec"]["template"]["spec"]["enableServiceLinks"] is False, name


def test_config_map_reference_resolves(overlay: Resources) -> None:
    maps = _kind(overlay, "ConfigMap")
    for deployment in _kind(overlay, "Deployment").values():
        ref = deployment["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]
        assert ref["configMapRef"]["name"] in maps


def test_one_scaled_object_per_consumer_worker_within_partitions(overlay: Resources) -> None:
    scaled = _kind(overlay, "ScaledObject")
    deployments = _kind(overlay, "Deployment")
    partitions = {
        t["spec"]["topicName"]: t["spec"]["partitions"]
        for t in _kind(overlay, "KafkaTopic").values()
    }
    assert set(scaled) == {f"ragsift-{w}" for w in CONSUMER_WORKERS}
    for worker, topic in CONSUMER_WORKERS.items():
        spec = scaled[f"ragsift-{worker}"]["spec"]
        [trigger] = spec["triggers"]
        meta = trigger["metadata"]
        assert trigger["type"] == "kafka"
        assert meta["topic"] == topic
        assert meta["consumerGroup"] == f"ragsift-{worker}"
        assert int(meta["lagThreshold"]) > 0
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= partitions[topic], worker
        target = deployments[spec["scaleTargetRef"]["name"]]
        assert "replicas" not in target["spec"], "KEDA owns the replica count"
        env = {
            e["name"]: e.get("value")
            for e in target["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["RAGSIFT_KAFKA_APP_ID"] == meta["consumerGroup"], "app id is the consumer group"


def test_services_and_service_monitor_cover_api_and_workers(overlay: Resources) -> None:
    services = _kind(overlay, "Service")
    [monitor] = _kind(overlay, "ServiceMonitor").values()
    selector = monitor["spec"]["selector"]["matchLabels"]
    scraped = [s for s in services.values() if selector.items() <= s["metadata"]["labels"].items()]
    assert {s["metadata"]["name"] for s in scraped} == {"ragsift-api", "ragsift-workers"}
    # Only the port named `metrics`: the API's query port serves no /metrics.
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics"}
    for service in scraped:
        assert "metrics" in {p["name"] for p in service["spec"]["ports"]}, service["metadata"]
    assert all(e["path"] == "/metrics" for e in monitor["spec"]["endpoints"])
    api_ports = {p["name"]: p for p in services["ragsift-api"]["spec"]["ports"]}
    assert api_ports["metrics"]["port"] == API_METRICS_PORT
    assert api_ports["metrics"]["targetPort"] == "metrics"
    assert api_ports["http"]["port"] == API_QUERY_PORT


def _api_container(resources: Resources) -> dict[str, Any]:
    [container] = _kind(resources, "Deployment")["ragsift-api"]["spec"]["template"]["spec"][
        "containers"
    ]
    return container


def test_api_binds_every_interface_on_both_ports(overlay: Resources) -> None:
    container = _api_container(overlay)
    args = container["args"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    options = option_values(args)
    # The API binds 127.0.0.1 by default: neither the Service nor the kubelet could reach it.
    host = options.get("--host", env.get("RAGSIFT_API_HOST"))
    metrics_host = options.get("--metrics-host", env.get("RAGSIFT_API_METRICS_HOST"))
    assert (host, metrics_host) == (ALL_INTERFACES, ALL_INTERFACES), args
    assert "--insecure-no-auth" not in args
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": API_QUERY_PORT, "metrics": API_METRICS_PORT}
    assert int(options.get("--port", API_QUERY_PORT)) == ports["http"]
    assert int(options.get("--metrics-port", API_METRICS_PORT)) == ports["metrics"]


def test_api_keys_file_is_mounted_from_a_secret(overlay: Resources) -> None:
    pod = _kind(overlay, "Deployment")["ragsift-api"]["spec"]["template"]["spec"]
    container = _api_container(overlay)
    env = {e["name"]: e.get("value") for e in container["env"]}
    keys_file = env["RAGSIFT_API_KEYS_FILE"]
    assert keys_file == API_KEYS_FILE
    mounts = [m for m in container["volumeMounts"] if keys_file.startswith(m["mountPath"] + "/")]
    # The most specific mount serves the file; never the data dir (an emptyDir per pod).
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    assert mount["readOnly"] is True
    assert "subPath" not in mount, "a subPath mount would hide Secret updates (revocations)"
    volume = {v["name"]: v for v in pod["volumes"]}[mount["name"]]
    secret = volume["secret"]
    assert secret["secretName"] == "ragsift-api-keys"
    file_name = keys_file.removeprefix(mount["mountPath"] + "/")
    assert {"key": "api-keys.json", "path": file_name} in secret["items"]
    assert secret["defaultMode"] & 0o007 == 0, "keys file must not be world-readable"


def test_api_keys_secret_is_only_mounted_into_the_api(overlay: Resources) -> None:
    for name, deployment in _kind(overlay, "Deployment").items():
        if name == "ragsift-api":
            continue
        volumes = deployment["spec"]["template"]["spec"]["volumes"]
        assert all(v.get("secret", {}).get("secretName") != "ragsift-api-keys" for v in volumes), (
            name
        )


def test_network_policies_deny_by_default(overlay: Resources) -> None:
    policies = _kind(overlay, "NetworkPolicy")
    deny = policies["ragsift-default-deny"]["spec"]
    assert set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny
    assert "egress" not in deny
    assert any(
        p["spec"]["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == "api"
        for p in policies.values()
    )


def _policy_ports(policy: dict[str, Any]) -> set[int]:
    return {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}


def test_clients_reach_the_query_port_and_only_monitoring_reaches_metrics(
    overlay: Resources,
) -> None:
    policies = _kind(overlay, "NetworkPolicy")
    assert _policy_ports(policies["ragsift-api-ingress"]) == {API_QUERY_PORT}
    metrics = policies["ragsift-metrics-ingress"]
    assert _policy_ports(metrics) == {API_METRICS_PORT, 6066}
    for rule in metrics["spec"]["ingress"]:
        assert rule["from"] == [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
        ]
    # No other policy opens a metrics port to everyone.
    for name, policy in policies.items():
        if name != "ragsift-metrics-ingress" and "ingress" in policy["spec"]:
            assert not _policy_ports(policy) & {API_METRICS_PORT, 6066}, name


def test_overlays_differ_where_they_should(built_overlays: dict[str, Resources]) -> None:
    dev, prod = built_overlays["dev"], built_overlays["prod"]
    assert {r["metadata"].get("namespace") for r in dev} == {"ragsift-dev"}
    assert {r["metadata"].get("namespace") for r in prod} == {"ragsift"}
    assert {t["spec"]["replicas"] for t in _kind(dev, "KafkaTopic").values()} == {1}
    assert {
        t["spec"]["config"]["min.insync.replicas"] for t in _kind(dev, "KafkaTopic").values()
    } == {"1"}
    assert {t["spec"]["replicas"] for t in _kind(prod, "KafkaTopic").values()} == {3}
    [prod_config] = _kind(prod, "ConfigMap").values()
    assert prod_config["data"]["RAGSIFT_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert all(
        s["spec"]["triggers"][0]["authenticationRef"]["name"] == "ragsift-kafka"
        for s in _kind(prod, "ScaledObject").values()
    )
    assert "ragsift-kafka" in _kind(prod, "TriggerAuthentication")
