"""The real redis-server as the shared calibration store and the feedback loop's state."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from ragsift.confidence.artifact import CalibrationArtifact, load_calibration
from ragsift.confidence.refit import LabelledResult, refit_calibration
from ragsift.confidence.registry import CalibrationRegistry, CalibrationScope
from ragsift.retrieval.engines import packaged_calibration_path
from ragsift.retrieval.feedback_store import RedisFeedbackStore, ScoredRecord, StoredLabel
from ragsift.retrieval.redis_calibration import RedisCalibrationStore
from ragsift.settings import RedisSettings


@pytest.fixture
def settings(redis_settings: RedisSettings, unique: str) -> Iterator[RedisSettings]:
    scoped = redis_settings.model_copy(update={"key_prefix": f"it-cal-{unique}"})
    yield scoped
    client = redis.Redis.from_url(scoped.url)
    for key in client.scan_iter(f"{scoped.key_prefix}:*"):
        client.delete(key)
    client.close()


def cli_env(settings: RedisSettings) -> dict[str, str]:
    """The environment of a `ragsift` command on the workers' shared store."""
    return {
        "RAGSIFT_EMBEDDER_KIND": "hashing",
        "RAGSIFT_CALIBRATION_STORE": "redis",
        "RAGSIFT_REDIS_URL": settings.url,
        "RAGSIFT_REDIS_KEY_PREFIX": settings.key_prefix,
    }


def base() -> CalibrationArtifact:
    path = packaged_calibration_path("ragsift-hashing-v1-384")
    assert path is not None
    return load_calibration(path)


def tuned(base_artifact: CalibrationArtifact) -> CalibrationArtifact:
    labels = [
        LabelledResult(f"q{i}", {"top_score": 0.3 + 0.6 * i / 99}, True, i % 3 == 0)
        for i in range(100)
    ]
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return refit_calibration(base_artifact, labels, scope="acme/docs", fitted_at=at)


def test_put_get_delete_and_generation_round_trip(settings: RedisSettings) -> None:
    store = RedisCalibrationStore(settings)
    artifact = base()
    scope = CalibrationScope("docs", "acme")
    assert store.generation() == "0"
    assert store.get(scope) is None
    store.put(scope, artifact)
    store.put(CalibrationScope("docs"), artifact)
    assert store.get(scope) == artifact
    assert store.scopes() == [CalibrationScope("docs"), scope]
    after_puts = int(store.generation())
    assert after_puts > 0
    assert store.delete(scope)
    assert not store.delete(scope)
    # a delete of nothing still moves it on: cheap and harmless
    assert int(store.generation()) >= after_puts + 2
    assert store.get(scope) is None
    store.close()


def test_a_put_on_one_replica_reaches_another_replicas_registry(settings: RedisSettings) -> None:
    default = base()
    writer = CalibrationRegistry(default, RedisCalibrationStore(settings), refresh_s=0)
    reader = CalibrationRegistry(default, RedisCalibrationStore(settings), refresh_s=0)
    assert reader.resolve("acme", "docs").version == default.version
    new = tuned(default)
    writer.put(CalibrationScope("docs", "acme"), new)
    assert reader.resolve("acme", "docs").version == new.version
    assert reader.resolve("beta", "docs").version == default.version


def test_a_lost_or_rolled_back_generation_is_never_handed_out_again(
    settings: RedisSettings,
) -> None:
    """Counting from 0, a counter lost (restart without the AOF, flush) or rolled back
    (failover to a lagging replica) gave the next write a generation a registry had
    seen: it kept serving the artifact it had cached, not the newer one stored."""
    store = RedisCalibrationStore(settings)
    now = [0.0]
    default = base()
    scope = CalibrationScope("docs", "acme")
    store.put(scope, tuned(default))
    reader = CalibrationRegistry(
        default, RedisCalibrationStore(settings), refresh_s=5, clock=lambda: now[0]
    )
    assert reader.resolve("acme", "docs").version == tuned(default).version
    seen = store.generation()
    store.client.delete(store.artifacts_key, store.generation_key)  # Redis lost its keys
    newer = CalibrationArtifact.model_validate(
        default.model_dump() | {"intercept": default.intercept + 1.0, "version": ""}
    )
    store.put(scope, newer)
    assert store.generation() != seen
    now[0] += 60
    assert reader.resolve("acme", "docs").version == newer.version
    store.client.set(store.generation_key, "1")  # rolled back under what was handed out
    store.put(scope, default)
    assert int(store.generation()) > int(seen)
    store.client.set(store.generation_key, "not a number")  # damaged: starts at the clock
    store.delete(scope)
    assert int(store.generation()) > int(seen)


def test_a_corrupt_artifact_falls_back_and_is_counted(settings: RedisSettings) -> None:
    store = RedisCalibrationStore(settings)
    store.client.hset(store.artifacts_key, "docs\x1facme", b'{"kind": "nonsense"')
    store.client.incr(store.generation_key)
    registry = CalibrationRegistry(base(), store, refresh_s=0)
    assert registry.resolve("acme", "docs").version == base().version
    assert registry.rejected == 1


def test_an_unreachable_redis_is_an_oserror_the_registry_survives() -> None:
    dead = RedisSettings(url="redis://127.0.0.1:1/0", socket_timeout_s=0.2)
    store = RedisCalibrationStore(dead)
    with pytest.raises(OSError, match="redis calibration store"):
        store.generation()
    registry = CalibrationRegistry(base(), store, refresh_s=0)
    assert registry.resolve("acme", "docs").version == base().version


def test_feedback_state_round_trip_with_ttl(settings: RedisSettings) -> None:
    unreadable: list[tuple[str, int]] = []
    store = RedisFeedbackStore(settings, on_unreadable=lambda kind, n: unreadable.append((kind, n)))
    record = ScoredRecord(
        query_id="q1", tenant_id="acme", collection="docs", kept=True, signals={"top_score": 0.7}
    )
    store.remember([record], ttl_s=60)
    assert store.recall("q1", "acme") == record
    assert 0 < store.client.ttl(f"{store.prefix}:scored:acme:q1") <= 60
    # Another tenant's query with the same id is kept beside it, not in its place.
    other = record.model_copy(update={"tenant_id": "globex", "kept": False})
    store.remember([other], ttl_s=60)
    assert store.recall("q1", "acme") == record
    assert store.recall("q1", "globex") == other
    assert store.recall("q1", "initech") is None
    assert store.owners("q1") == ["acme", "globex"]
    assert 0 < store.client.ttl(f"{store.prefix}:owners:q1") <= 60
    # A record kept by query id alone (before 2026-11-30) is read for its tenant only.
    old = record.model_copy(update={"query_id": "q-old"})
    store.client.set(f"{store.prefix}:result:q-old", old.model_dump_json(), ex=60)
    assert store.recall("q-old", "acme") == old
    assert store.recall("q-old", "globex") is None
    assert store.owners("q-old") == ["acme"]
    scope = CalibrationScope("docs", "acme")
    label = StoredLabel(record=record, relevant=True, at=1.0)
    assert store.put_label(scope, label) == "stored"
    assert store.put_label(scope, label.model_copy(update={"at": 2.0})) == "unchanged"
    assert store.put_label(scope, label.model_copy(update={"relevant": False})) == "stored"
    assert [s.relevant for s in store.labels(scope)] == [False]
    reported = label.model_copy(update={"relevant": True, "sampled": False})
    assert store.put_label(scope, reported, keep_sampled=True) == "kept_sampled"
    assert [(s.relevant, s.sampled) for s in store.labels(scope)] == [(False, True)]
    assert store.put_label(scope, reported) == "stored"  # moved out of the sample
    assert [(s.relevant, s.sampled) for s in store.labels(scope)] == [(True, False)]
    assert store.last_refit(scope) is None
    store.mark_refit(scope, "abc", 5.0)
    assert store.last_refit(scope) == ("abc", 5.0)
    field = "\x1f".join((scope.collection, scope.tenant or ""))  # the store's scope key
    for damaged in (b"\xff", b"[" * 100_000 + b"]" * 100_000, b"[]", b'{"digest": "x"}'):
        store.client.hset(f"{store.prefix}:refits", field, damaged)
        assert store.last_refit(scope) is None  # the next labels re-fit; nothing stops
    assert unreadable == [("refit", 1)] * 4  # each one counted, not only logged
    store.close()


def test_mix_state_is_shared_by_replicas_and_bad_fields_are_skipped(
    settings: RedisSettings,
) -> None:
    from ragsift.confidence.mix_state import MAX_AGE_S, ScopeState
    from ragsift.retrieval.redis_calibration import RedisMixState

    one, two = RedisMixState(settings), RedisMixState(settings)  # two replicas
    assert one.load() == []
    a = ScopeState(tenant="acme", collection="docs", version="v", counts=(0.5,) * 20)
    b = a.model_copy(update={"tenant": "テナント"})
    one.save([a])
    two.save([b, a.model_copy(update={"counts": (2.0,) * 20})])  # the last write of a scope wins
    loaded = {s.tenant: s for s in RedisMixState(settings).load()}
    assert sorted(loaded) == ["acme", "テナント"]
    assert loaded["acme"].counts == (2.0,) * 20
    stale = a.model_copy(update={"tenant": "old", "saved_at": a.saved_at - MAX_AGE_S - 1})
    one.save([stale])
    one.client.hset(one.key, "junk", b"\xff not json")
    one.client.hset(
        one.key,
        "nan",
        '{"tenant": "x", "collection": "c", "version": "v",'
        ' "counts": [NaN, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}',
    )
    one.client.hset(one.key, "deep", "[" * 100_000 + "]" * 100_000)  # raised RecursionError
    assert sorted(s.tenant for s in one.load()) == ["acme", "テナント"]
    assert len(one.client.hkeys(one.key)) == 2  # the stale and malformed fields are gone
    one.client.close()
    two.client.close()


def test_the_calibrations_command_reads_and_edits_the_shared_store(
    settings: RedisSettings,
) -> None:
    """`ragsift calibrations` on the store the workers share: what each scope holds and
    whether queries use it, and a removal every replica sees."""
    import json

    from typer.testing import CliRunner

    from ragsift.cli import app

    store = RedisCalibrationStore(settings)
    new = tuned(base())
    store.put(CalibrationScope("docs", "acme"), new)
    store.client.hset(store.artifacts_key, "docs\x1fbeta", b'{"kind": "nonsense"')
    env = cli_env(settings)
    runner = CliRunner()
    listed = runner.invoke(app, ["calibrations", "list", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    rows = {row["tenant"]: row for row in json.loads(listed.stdout)["scopes"]}
    assert (rows["acme"]["version"], rows["acme"]["used"]) == (new.version, True)
    assert (rows["beta"]["used"], rows["beta"]["ignored_reason"]) == (False, "invalid")

    reader = CalibrationRegistry(base(), RedisCalibrationStore(settings), refresh_s=0)
    assert reader.resolve("acme", "docs").version == new.version
    removed = runner.invoke(
        app, ["calibrations", "remove", "--collection", "docs", "--tenant", "acme"], env=env
    )
    assert removed.exit_code == 0, removed.output
    assert reader.resolve("acme", "docs").version == base().version
    store.close()


def test_the_calibrations_command_names_an_unreachable_store() -> None:
    from typer.testing import CliRunner

    from ragsift.cli import app

    env = {
        "RAGSIFT_EMBEDDER_KIND": "hashing",
        "RAGSIFT_CALIBRATION_STORE": "redis",
        "RAGSIFT_REDIS_URL": "redis://127.0.0.1:1/0",
        "RAGSIFT_REDIS_SOCKET_TIMEOUT_S": "0.2",
    }
    result = CliRunner().invoke(app, ["calibrations", "list"], env=env)
    assert result.exit_code == 1, result.output
    assert "cannot read the calibration store" in result.output
    assert "Traceback" not in result.output


def test_reprobe_renews_stale_scopes_in_the_shared_store(
    settings: RedisSettings, tmp_path: Path
) -> None:
    """After an upgrade, `ragsift calibrations reprobe` with the workers' store probes
    each scope made on the old shipped calibration again, and every replica uses it."""
    import json

    from typer.testing import CliRunner

    from ragsift.cli import app
    from tests.factories import made_on_base, write_corpus
    from tests.unit.evaluation.test_selfcal_collection import documents

    corpus = write_corpus(tmp_path / "corpus", documents(30))
    data = tmp_path / "data"
    env = cli_env(settings)
    runner = CliRunner()
    ingest = ["ingest", str(corpus), "--tenant", "acme", "--collection", "docs"]
    done = runner.invoke(app, [*ingest, "--data-dir", str(data)], env=env)
    assert done.exit_code == 0, done.output
    store = RedisCalibrationStore(settings)
    scope = CalibrationScope("docs", "acme")
    probed = store.get(scope)
    assert probed is not None
    assert probed.provenance is not None
    store.put(scope, made_on_base(probed, "cal-000000000000"))
    replica = CalibrationRegistry(base(), RedisCalibrationStore(settings), refresh_s=0)
    assert replica.resolve("acme", "docs").version == base().version  # skipped: stale

    result = runner.invoke(
        app, ["calibrations", "reprobe", "--data-dir", str(data), "--json"], env=env
    )

    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["scopes"]
    assert (row["tenant"], row["outcome"]) == ("acme", "stored")
    assert replica.resolve("acme", "docs").version == row["version"]
    store.close()


def test_removing_a_tenants_calibration_forgets_its_labels_in_the_workers_store(
    settings: RedisSettings,
) -> None:
    """`ragsift calibrations remove --tenant T` on the shared store also forgets the
    scope's labels and re-fit record in the workers' feedback store: kept, the next label
    re-fit the removed calibration from them. Other scopes' labels stay."""
    from typer.testing import CliRunner

    from ragsift.cli import app

    acme, others = (
        CalibrationScope("docs", "acme"),
        [
            CalibrationScope("docs", "acme2"),
            CalibrationScope("docs2", "acme"),
        ],
    )
    labels = RedisFeedbackStore(settings)
    for scope in (acme, *others):
        for i in range(3):
            record = ScoredRecord(
                query_id=f"q{i}",
                tenant_id=scope.tenant or "t",
                collection=scope.collection,
                kept=True,
                signals={"top_score": 0.5},
            )
            labels.put_label(scope, StoredLabel(record=record, relevant=True, at=float(i)))
        labels.mark_refit(scope, "digest", 1.0)
    store = RedisCalibrationStore(settings)
    store.put(acme, tuned(base()))
    removed = CliRunner().invoke(
        app,
        ["calibrations", "remove", "--collection", "docs", "--tenant", "acme"],
        env=cli_env(settings),
    )
    assert removed.exit_code == 0, removed.output
    assert "forgot its 3 feedback labels" in " ".join(removed.output.split())
    assert store.get(acme) is None
    assert labels.labels(acme) == []
    assert labels.last_refit(acme) is None
    for scope in others:
        assert len(labels.labels(scope)) == 3
        assert labels.last_refit(scope) == ("digest", 1.0)
    assert labels.forget(acme) == 0
    store.close()
    labels.close()


def test_removing_a_tenant_with_no_calibration_still_forgets_its_labels(
    settings: RedisSettings, tmp_path: Path
) -> None:
    """A tenant with labels in the workers' store and no calibration: `remove` exited 2
    and forgot nothing. Now it forgets them, says so, and exits 0."""
    from typer.testing import CliRunner

    from ragsift.cli import app

    acme = CalibrationScope("docs", "acme")
    labels = RedisFeedbackStore(settings)
    for i in range(4):
        record = ScoredRecord(
            query_id=f"q{i}", tenant_id="acme", collection="docs", kept=True, signals={}
        )
        labels.put_label(acme, StoredLabel(record=record, relevant=True, at=float(i)))
    env = {**cli_env(settings), "RAGSIFT_DATA_DIR": str(tmp_path / "data")}
    args = ["calibrations", "remove", "--collection", "docs", "--tenant", "acme"]
    removed = CliRunner().invoke(app, args, env=env)
    assert removed.exit_code == 0, removed.output
    said = " ".join(removed.output.split())
    assert "no calibration is stored for acme/docs" in said
    assert "forgot its 4 feedback labels" in said
    assert labels.labels(acme) == []
    again = CliRunner().invoke(app, args, env=env)
    assert again.exit_code == 2, again.output
    labels.close()
