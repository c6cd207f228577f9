"""Both VectorIndex adapters: same hits for the same data, idempotence, refusals."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
from retrieval_corpus import (
    COLLECTION,
    CORPUS,
    DIM,
    QUERIES,
    IndexFactory,
    corpus_records,
    make_record,
)

from ragsift.retrieval.bm25 import Bm25Encoder
from ragsift.retrieval.edge import EdgeIndex
from ragsift.retrieval.edge_requests import uuid_text
from ragsift.retrieval.embedders import HashingEmbedder
from ragsift.retrieval.errors import (
    CollectionNotFoundError,
    DimensionMismatchError,
    EmbedderMismatchError,
    MissingTenantError,
)
from ragsift.retrieval.index import (
    RESERVED_FIELDS,
    TERMS_FIELD,
    RawPoint,
    SearchHit,
    SearchMode,
    SearchRequest,
    VectorIndex,
    point_id,
    rrf_fuse,
)
from ragsift.retrieval.search_plan import _canonical

pytestmark = pytest.mark.unit

EMBEDDER = HashingEmbedder(DIM)
MODES: tuple[SearchMode, ...] = ("dense", "keyword", "hybrid")


def request(tenant: str, query: str, mode: SearchMode, **kwargs: object) -> SearchRequest:
    return SearchRequest(
        tenant_id=tenant,
        query=query,
        dense_vector=EMBEDDER.embed_sync(query),
        mode=mode,
        **kwargs,  # type: ignore[arg-type]
    )


async def build(factory: IndexFactory, **kwargs: object) -> VectorIndex:
    index = factory(**kwargs)
    await index.ensure_collection(COLLECTION, DIM, EMBEDDER.embedder_id)
    await index.upsert(COLLECTION, corpus_records())
    return index


def summary(hits: list[SearchHit]) -> list[tuple[str, int]]:
    return [(h.chunk_id, h.rank) for h in hits]


def assert_same_ranking(mine: list[SearchHit], theirs: list[SearchHit]) -> None:
    """Same scores in the same order, and the same chunk at every rank above the last score.

    When several chunks tie at the last score and the limit cuts that group,
    the engine picks which of them to return in its own iteration order (Edge
    and local mode differ): only that boundary group may hold other chunks.
    """
    assert len(mine) == len(theirs)
    boundary = round(mine[-1].score, 5) if mine else None
    for a, b in zip(mine, theirs, strict=True):
        assert a.score == pytest.approx(b.score, rel=1e-5, abs=1e-6)
        if round(a.score, 5) != boundary:
            assert (a.chunk_id, a.rank) == (b.chunk_id, b.rank)


@pytest.mark.parametrize("mode", MODES)
async def test_adapters_return_the_same_hits_in_the_same_order(
    mode: SearchMode, edge_factory: IndexFactory, server_factory: IndexFactory
) -> None:
    edge, server = await build(edge_factory), await build(server_factory)
    try:
        for tenant in CORPUS:
            for query in QUERIES:
                if mode == "keyword" and not query.strip():
                    continue
                req = request(tenant, query, mode, limit=5)
                got_edge = await edge.search(COLLECTION, req)
                got_server = await server.search(COLLECTION, req)
                assert_same_ranking(got_edge, got_server)
                for a, b in zip(got_edge, got_server, strict=True):
                    if a.chunk_id != b.chunk_id:
                        continue  # a boundary tie (see assert_same_ranking)
                    # Edge scores in float32, local mode in float64: equal to ~1e-6.
                    for field in ("dense_score", "sparse_score", "fused_score"):
                        mine, theirs = getattr(a, field), getattr(b, field)
                        assert (mine is None) == (theirs is None), field
                        if mine is not None:
                            assert mine == pytest.approx(theirs, rel=1e-5, abs=1e-6), field
                    assert (a.dense_rank, a.sparse_rank) == (b.dense_rank, b.sparse_rank)
    finally:
        await edge.close()
        await server.close()


async def test_hybrid_hits_carry_each_channels_raw_scores(index: VectorIndex) -> None:
    req = request("acme", "how do I reset my password", "hybrid", limit=5)
    hits = await index.search(COLLECTION, req)
    dense = {
        h.chunk_id: h
        for h in await index.search(COLLECTION, request("acme", req.query, "dense", limit=50))
    }
    sparse = {
        h.chunk_id: h
        for h in await index.search(COLLECTION, request("acme", req.query, "keyword", limit=50))
    }
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert hits[0].chunk_id == "acme-0"
    for hit in hits:
        assert hit.fused_score == hit.score
        if hit.chunk_id in dense:
            assert hit.dense_score == pytest.approx(dense[hit.chunk_id].score)
            assert hit.dense_rank == dense[hit.chunk_id].rank
        if hit.chunk_id in sparse:
            assert hit.sparse_score == pytest.approx(sparse[hit.chunk_id].score)
        expected = sum(1.0 / (2 + r - 1) for r in (hit.dense_rank, hit.sparse_rank) if r)
        assert hit.fused_score == pytest.approx(expected)
    assert any(h.sparse_score is None for h in hits)  # dense-only hits keep sparse_score None


async def test_hits_carry_the_bm25_term_ids_their_text_was_indexed_with(
    index: VectorIndex,
) -> None:
    # Term coverage reads them instead of tokenizing every new chunk at query time.
    for mode in ("hybrid", "dense", "keyword"):
        hits = await index.search(COLLECTION, request("acme", "refund policy", mode, limit=8))
        assert hits
        for hit in hits:
            assert hit.indexed_terms() == Bm25Encoder().terms(hit.text)


@pytest.mark.parametrize("which", ["edge", "server"])
async def test_client_fusion_matches_qdrants_own_rrf(
    which: str, edge_factory: IndexFactory, server_factory: IndexFactory
) -> None:
    """Fusing here gives Qdrant's RRF scores; only the order among ties may differ.

    Qdrant (Edge and local mode alike) orders tied points by internal iteration
    order, in each channel and in the fused list; we break ties by id so both
    adapters agree. The fused score sequence must match exactly, and when no
    channel has tied scores the ranking must match too.
    """
    factory = edge_factory if which == "edge" else server_factory
    ours, theirs = await build(factory), await build(factory, hybrid_fusion="qdrant")
    tie_free = 0
    try:
        for query in QUERIES:
            req = request("acme", query, "hybrid", limit=6, prefetch_limit=8)
            mine = await ours.search(COLLECTION, req)
            qdrant = await theirs.search(COLLECTION, req)
            assert [round(h.score, 6) for h in mine] == [round(h.score, 6) for h in qdrant]
            assert all(h.dense_score is not None or h.sparse_score is not None for h in qdrant)
            channels = [
                await ours.search(COLLECTION, request("acme", query, m, limit=8))
                for m in ("dense", "keyword")
                if m == "dense" or query != "the"
            ]
            scores = [[round(h.score, 6) for h in c] for c in channels]
            if all(len(set(s)) == len(s) for s in scores):
                tie_free += 1
                assert_same_ranking(mine, qdrant)
        assert tie_free >= 1
    finally:
        await ours.close()
        await theirs.close()


async def test_search_batch_equals_single_searches(index: VectorIndex) -> None:
    reqs = [request(t, q, m) for t in CORPUS for q in QUERIES[:3] for m in MODES]
    batched = await index.search_batch(COLLECTION, reqs)
    singles = [await index.search(COLLECTION, r) for r in reqs]
    assert [summary(b) for b in batched] == [summary(s) for s in singles]


async def test_reupsert_is_idempotent_and_delete_removes_a_document(index: VectorIndex) -> None:
    before = await index.collection_info(COLLECTION)
    await index.upsert(COLLECTION, corpus_records())
    again = await index.collection_info(COLLECTION)
    assert again.points_count == before.points_count == sum(len(t) for t in CORPUS.values())
    assert again.tenants == {"acme": 10, "globex": 6}
    changed = make_record("acme", 0, "Completely new text about penguins.")
    await index.upsert(COLLECTION, [changed])
    hits = await index.search(COLLECTION, request("acme", "penguins", "keyword"))
    assert [h.chunk_id for h in hits] == ["acme-0"]
    assert (await index.collection_info(COLLECTION)).points_count == before.points_count
    assert await index.delete(COLLECTION, "acme", "acme-doc-0") == 2  # acme-0 and acme-1
    info = await index.collection_info(COLLECTION)
    assert info.points_count == before.points_count - 2
    assert info.tenants == {"acme": 8, "globex": 6}


async def test_delete_says_how_many_chunks_of_the_tenants_document_it_removed(
    index: VectorIndex,
) -> None:
    # The indexer bumps the tenant's index version (empties its cache) only where a
    # delete removed something: nothing of another tenant's, nothing twice.
    assert await index.delete(COLLECTION, "globex", "acme-doc-1") == 0  # acme's id
    assert await index.delete(COLLECTION, "acme", "acme-doc-1") == 2
    assert await index.delete(COLLECTION, "acme", "acme-doc-1") == 0  # redelivered
    for hostile in ("acme-doc-2\u202e\x00", "文書", "acme-doc-" + "9" * 100_000):
        assert await index.delete(COLLECTION, "acme", hostile) == 0
    assert (await index.collection_info(COLLECTION)).tenants == {"acme": 8, "globex": 6}


async def test_documents_lists_one_tenants_documents_and_their_chunks(
    index: VectorIndex,
) -> None:
    # acme's 10 chunks are 5 documents of 2; globex's 6, 3 (make_record: doc i // 2).
    assert await index.documents(COLLECTION, "acme") == {f"acme-doc-{d}": 2 for d in range(5)}
    assert await index.documents(COLLECTION, "globex") == {f"globex-doc-{d}": 2 for d in range(3)}
    assert await index.documents(COLLECTION, "initech") == {}
    await index.delete(COLLECTION, "acme", "acme-doc-0")
    assert "acme-doc-0" not in await index.documents(COLLECTION, "acme")
    with pytest.raises(MissingTenantError):
        await index.documents(COLLECTION, "")


async def test_chunk_payloads_reads_one_tenants_stored_chunks(index: VectorIndex) -> None:
    found = await index.chunk_payloads(COLLECTION, "acme", ["acme-0", "acme-3", "nope"])
    assert sorted(found) == ["acme-0", "acme-3"]  # a chunk not stored is absent
    assert found["acme-3"]["doc_id"] == "acme-doc-1"
    assert found["acme-0"]["text"] == CORPUS["acme"][0]
    # Another tenant's chunk ids name its own chunks, never acme's.
    assert await index.chunk_payloads(COLLECTION, "globex", ["acme-0"]) == {}
    with pytest.raises(MissingTenantError):
        await index.chunk_payloads(COLLECTION, "", ["acme-0"])


async def test_payload_filter_narrows_within_the_tenant(index: VectorIndex) -> None:
    req = request(
        "acme", "password reset refund", "hybrid", limit=10, filter={"source_type": "government"}
    )
    hits = await index.search(COLLECTION, req)
    assert hits
    assert all(h.source_type == "government" and h.tenant_id == "acme" for h in hits)
    assert hits[0].payload["lang"] == "en"
    with pytest.raises(ValueError, match="tenant_id"):
        request("acme", "x", "hybrid", filter={"tenant_id": "globex"})


async def test_embedder_mismatch_is_refused(index: VectorIndex) -> None:
    with pytest.raises(EmbedderMismatchError) as caught:
        await index.ensure_collection(COLLECTION, DIM, "openai-text-embedding-3-small-384")
    assert caught.value.expected == EMBEDDER.embedder_id
    assert caught.value.actual == "openai-text-embedding-3-small-384"
    with pytest.raises(DimensionMismatchError):
        await index.ensure_collection(COLLECTION, 768, EMBEDDER.embedder_id)
    with pytest.raises(EmbedderMismatchError):
        await index.search(
            COLLECTION, request("acme", "password", "dense", embedder_id="other-384")
        )
    with pytest.raises(DimensionMismatchError):
        await index.search(
            COLLECTION, SearchRequest(tenant_id="acme", dense_vector=np.ones(10), mode="dense")
        )
    ok = await index.search(
        COLLECTION, request("acme", "password", "dense", embedder_id=EMBEDDER.embedder_id)
    )
    assert ok


async def test_a_shard_built_with_another_embedder_names_both_ids_and_the_fix(
    index: VectorIndex,
) -> None:
    # The default embedder moved from hashing to onnx: a shard built before that
    # must say what built it, what asks, and how to reconcile the two.
    onnx_id = "onnx-all-MiniLM-L6-v2-int8-384"
    with pytest.raises(EmbedderMismatchError) as caught:
        await index.ensure_collection(COLLECTION, DIM, onnx_id)
    message = str(caught.value)
    assert EMBEDDER.embedder_id in message
    assert onnx_id in message
    assert "re-ingest" in message
    assert "RAGSIFT_EMBEDDER_KIND=hashing" in message
    with pytest.raises(EmbedderMismatchError, match="RAGSIFT_EMBEDDER_KIND=hashing"):
        await index.search(COLLECTION, request("acme", "password", "dense", embedder_id=onnx_id))


def test_an_unknown_embedder_id_still_gets_a_fix() -> None:
    error = EmbedderMismatchError(
        expected="custom-768", actual="onnx-all-MiniLM-L6-v2-int8-384", stored=True
    )
    assert "re-ingest" in str(error)
    assert "RAGSIFT_EMBEDDER_KIND, _MODEL" in str(error)


@pytest.mark.parametrize(
    ("stored", "fix"),
    [
        ("onnx-all-MiniLM-L6-v2-int8-384", "RAGSIFT_EMBEDDER_COMPUTE=fp32"),
        ("onnx-all-MiniLM-L6-v2-int8dyn-384", "RAGSIFT_EMBEDDER_COMPUTE=int8"),
    ],
)
def test_the_onnx_models_two_computes_name_the_compute_that_built_the_shard(
    stored: str, fix: str
) -> None:
    # Both ids are kind=onnx: naming the kind alone would tell the user to set what is set.
    other = {"fp32": "onnx-all-MiniLM-L6-v2-int8dyn-384", "int8": "onnx-all-MiniLM-L6-v2-int8-384"}
    error = EmbedderMismatchError(expected=stored, actual=other[fix[-4:]], stored=True)
    assert fix in str(error)
    assert "RAGSIFT_EMBEDDER_KIND=onnx" in str(error)


def test_a_query_vector_mismatch_does_not_suggest_rebuilding_the_shard() -> None:
    error = EmbedderMismatchError(expected="ragsift-hashing-v1-384", actual="other-384")
    assert "re-ingest" not in str(error)


async def test_tenant_is_mandatory(index: VectorIndex) -> None:
    for bad in ("", "  ", None):
        with pytest.raises(MissingTenantError):
            SearchRequest(tenant_id=bad, query="x", mode="keyword")  # type: ignore[arg-type]
    with pytest.raises(MissingTenantError):
        await index.delete(COLLECTION, "", "doc")
    with pytest.raises(MissingTenantError):
        make_record("", 0, "text")


async def test_unknown_collection_and_bad_names(index: VectorIndex) -> None:
    with pytest.raises(CollectionNotFoundError):
        await index.search("missing", request("acme", "x", "dense"))
    with pytest.raises(ValueError, match="collection name"):
        await index.ensure_collection("../escape", DIM, EMBEDDER.embedder_id)


async def test_edge_index_reopens_from_disk_with_its_embedder(tmp_path: Path) -> None:
    first = EdgeIndex(tmp_path)
    await first.ensure_collection(COLLECTION, DIM, EMBEDDER.embedder_id)
    await first.upsert(COLLECTION, corpus_records())
    first.optimize()
    await first.close()
    reopened = EdgeIndex(tmp_path)
    info = await reopened.collection_info(COLLECTION)
    assert (info.embedder_id, info.dim, info.points_count) == (EMBEDDER.embedder_id, DIM, 16)
    with pytest.raises(EmbedderMismatchError):
        await reopened.ensure_collection(COLLECTION, DIM, "another-embedder")
    hits = await reopened.search(COLLECTION, request("acme", "reset password", "hybrid", limit=3))
    assert hits[0].chunk_id == "acme-0"
    await reopened.close()


async def test_edge_search_pool_size_is_written_to_the_shard_and_kept(tmp_path: Path) -> None:
    """RAGSIFT_QDRANT_EDGE_SEARCH_THREADS reaches Qdrant Edge's config on create and on
    load; unset, the shard keeps what it has; the searches answer as before."""

    def pool() -> object:
        config = json.loads((tmp_path / COLLECTION / "edge_config.json").read_text("utf-8"))
        return config.get("max_search_threads")

    first = EdgeIndex(tmp_path, search_threads=1)
    await first.ensure_collection(COLLECTION, DIM, EMBEDDER.embedder_id)
    await first.upsert(COLLECTION, corpus_records())
    want = await first.search(COLLECTION, request("acme", "reset password", "hybrid", limit=3))
    await first.close()
    assert pool() == 1
    for threads, kept in ((3, 3), (None, 3)):
        reopened = EdgeIndex(tmp_path, search_threads=threads)
        got = await reopened.search(
            COLLECTION, request("acme", "reset password", "hybrid", limit=3)
        )
        await reopened.close()
        assert pool() == kept
        assert [(h.chunk_id, h.score) for h in got] == [(h.chunk_id, h.score) for h in want]
    with pytest.raises(ValueError, match="search_threads"):
        EdgeIndex(tmp_path, search_threads=0)


def test_point_ids_are_deterministic_uuids() -> None:
    first = make_record("acme", 0, "text")
    assert point_id(first) == point_id(make_record("acme", 0, "other text"))
    assert point_id(first) != point_id(make_record("acme", 1, "text"))
    assert len(point_id(first)) == 36


def test_point_ids_differ_per_tenant_and_collection_for_one_chunk_id() -> None:
    # Issue 12: chunk ids are only unique within a tenant ("<doc_id>:<n>").
    same = {"chunk_id": "handbook.md:0", "doc_id": "handbook.md"}
    ids = {
        point_id(make_record("alpha", 0, "a", **same)),
        point_id(make_record("bravo", 0, "b", **same)),
        point_id(make_record("alpha", 0, "a", collection="other", **same)),
    }
    assert len(ids) == 3


def test_rrf_fuse_follows_qdrants_formula() -> None:
    dense = [RawPoint("a", 0.9), RawPoint("b", 0.8)]
    sparse = [RawPoint("b", 5.0), RawPoint("c", 1.0)]
    fused = dict(rrf_fuse([dense, sparse], k=2))
    assert fused == pytest.approx({"a": 1 / 2, "b": 1 / 3 + 1 / 2, "c": 1 / 3})


def test_edge_integer_keys_break_ties_like_the_servers_strings() -> None:
    # Edge ranks by a UUID's integer, the server adapter by its string: same order.
    ids = [point_id(make_record("acme", i, "text")) for i in range(50)]
    tied = [RawPoint(uuid.UUID(pid).int, 1.0) for pid in ids]
    as_strings = [RawPoint(pid, 1.0) for pid in ids]
    by_int = [uuid.UUID(int=int(pid)) for pid, _ in rrf_fuse([tied, tied[::-1]], k=2)]
    by_str = [uuid.UUID(str(pid)) for pid, _ in rrf_fuse([as_strings, as_strings[::-1]], k=2)]
    assert by_int == by_str


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.9, 0.7, 0.5], ["c", "a", "b"]),  # strictly best first: kept as the engine gave it
        ([0.5, 0.9, 0.7], ["a", "b", "c"]),  # not best first: sorted
        ([0.7, 0.7, 0.5], ["a", "c", "b"]),  # a tie: broken by id, whatever the engine's order
        ([0.5, float("nan"), 0.9], None),  # NaN compares with nothing: the sort decides
    ],
)
def test_channel_answers_are_ranked_by_score_then_id(
    scores: list[float], expected: list[str] | None
) -> None:
    ids = ["c", "a", "b"]
    answer = [RawPoint(pid, score) for pid, score in zip(ids, scores, strict=True)]
    ranked = [p.id for p in _canonical(answer)]
    assert ranked == (expected or [p.id for p in sorted(answer, key=lambda p: (-p.score, p.id))])
    if expected is not None:  # every order of the same answer ranks the same
        assert [p.id for p in _canonical(answer[::-1])] == expected


def test_edge_fetches_payloads_by_uuid_text_of_the_integer_key() -> None:
    pid = uuid.uuid4()
    assert uuid.UUID(uuid_text(pid.int)) == pid
    assert uuid_text(1) == "0" * 31 + "1"  # zero-padded: small ids are still 128-bit UUIDs


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ([3, 1, 2], frozenset({1, 2, 3})),
        ([], frozenset()),
        (None, None),  # a point written before the ids were stored
        ("1 2 3", None),
        (["1", "2"], None),
        ({"1": 2}, None),
        ([[1, 2], [3]], None),  # nested
        ([1, [2], {"3": 4}], None),  # unhashable past the first id
        ([True, False], None),  # bools are not term ids
        ([2**80, 7], frozenset({2**80, 7})),  # no BM25 id, so it matches no query term
    ],
)
def test_indexed_terms_are_read_only_from_a_list_of_ids(stored: object, expected: object) -> None:
    payload = {} if stored is None else {TERMS_FIELD: stored}
    hit = SearchHit("c", "d", "t", "text", "s", "web", 1.0, 1, payload=payload)
    assert hit.indexed_terms() == expected


@pytest.mark.parametrize("key", sorted(RESERVED_FIELDS))
def test_metadata_cannot_shadow_a_field_the_index_writes(key: str) -> None:
    # A user's "bm25_terms" would otherwise be read as the chunk's term ids.
    with pytest.raises(ValueError, match="reserved payload keys"):
        make_record("t1", 0, "text", metadata={key: [1, 2]})
