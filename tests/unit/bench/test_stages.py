"""The stage table adds up a profile the way docs/benchmarks.md says it does."""

from __future__ import annotations

import marshal
import os
import threading
from pathlib import Path

import pytest
from stages import EDGE_KIND, OTHER_KIND, _other_threads_s, _thread_cpu_s, stage_table

SITE = "/venv/lib/python3.11/site-packages"


def _profile(tmp_path: Path, rows: dict[tuple[str, str], tuple[float, float]]) -> Path:
    """A cProfile dump: (file, function) → (own seconds, cumulative seconds)."""
    stats = {(path, 1, func): (1, 1, own, cum, {}) for (path, func), (own, cum) in rows.items()}
    path = tmp_path / "worker.prof"
    path.write_bytes(marshal.dumps(stats))
    return path


def test_stages_idle_and_the_framework_remainder(tmp_path: Path) -> None:
    profile = _profile(
        tmp_path,
        {
            ("~", "<method 'poll' of 'select.epoll' objects>"): (5.0, 5.0),  # idle
            (f"{SITE}/faust/agents/agent.py", "_slurp"): (1.0, 10.0),
            ("/r/ragsift/streams/routing.py", "process"): (0.5, 8.0),
            ("/r/ragsift/streams/codec.py", "decode"): (1.0, 1.0),
            ("/r/ragsift/workers/retrieval.py", "handle_batch"): (0.5, 5.0),
            ("/r/ragsift/retrieval/pipeline.py", "_search_collection"): (3.0, 3.0),
            ("~", "<method 'send' of '_socket.socket' objects>"): (2.0, 2.0),
        },
    )
    table = stage_table(profile, {})
    busy = 1.0 + 0.5 + 1.0 + 0.5 + 3.0 + 2.0  # every own time but the idle poll
    assert table["busy_s"] == pytest.approx(busy)
    stages = table["stages"]
    assert stages["search (Qdrant Edge + fusion)"]["seconds"] == pytest.approx(3.0)
    assert stages["decode"]["fraction"] == pytest.approx(1.0 / busy, abs=1e-3)
    # the handler's time not in a named pipeline stage
    assert stages["pipeline, other (admission, batching, metrics)"]["seconds"] == pytest.approx(2.0)
    # busy time outside the router: Faust, the Kafka client, the loop
    framework = stages["runtime + Kafka client (consume, flush, commit, event loop)"]
    assert framework["seconds"] == pytest.approx(busy - 8.0)
    packages = table["own_time_by_package"]
    assert packages["socket writes (produce requests)"] == pytest.approx(2.0 / busy, abs=1e-3)
    assert packages["faust + mode (the framework)"] == pytest.approx(1.0 / busy, abs=1e-3)


def test_other_threads_count_as_busy_time_by_kind(tmp_path: Path) -> None:
    profile = _profile(tmp_path, {("/r/ragsift/streams/codec.py", "decode"): (1.0, 1.0)})
    table = stage_table(profile, {EDGE_KIND: 1.0, OTHER_KIND: 2.0})
    assert table["busy_s"] == pytest.approx(4.0)
    assert table["stages"][EDGE_KIND]["fraction"] == 0.25
    assert table["stages"][OTHER_KIND]["fraction"] == 0.5


def test_this_process_threads_are_read_by_name() -> None:
    """/proc's comm may hold spaces and parentheses; the split must survive them."""
    pid = os.getpid()
    done = threading.Event()
    worker = threading.Thread(target=done.wait)
    worker.start()
    try:
        named = _thread_cpu_s(pid)
    finally:
        done.set()
        worker.join()
    assert pid in named
    assert len(named) >= 2
    assert all(isinstance(name, str) and cpu >= 0 for name, cpu in named.values())
    before = {tid: (name, 0.0) for tid, (name, _) in named.items()}
    kinds = _other_threads_s(pid, before, named)
    assert kinds[EDGE_KIND] == 0.0  # no Qdrant Edge pool in this process
    assert kinds[OTHER_KIND] == pytest.approx(
        sum(cpu for tid, (_, cpu) in named.items() if tid != pid)
    )


def _stage_functions() -> list[tuple[str, str, str]]:
    from pipeline import PIPELINE_STAGES
    from stages import HANDLER, ROUTER, STAGES

    named = [
        (stage, *where)
        for table in (STAGES, PIPELINE_STAGES)
        for stage, wheres in table.items()
        for where in wheres
    ]
    return [*named, ("router", *ROUTER), ("handler", *HANDLER)]


@pytest.mark.parametrize(("stage", "suffix", "name"), _stage_functions())
def test_every_stage_names_a_function_that_exists(stage: str, suffix: str, name: str) -> None:
    """A stage whose function moved reads 0 and its time lands in "other" (it happened:
    the cache's look-up and store after they moved to pipeline_cache.py)."""
    repo = Path(__file__).resolve().parents[3]
    source = (repo / suffix).read_text(encoding="utf-8")
    assert f"def {name}(" in source, f"{stage}: no {name}() in {suffix}"
