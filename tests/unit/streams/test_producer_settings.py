"""The workers' producer options come from KafkaSettings."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragsift.settings import KafkaSettings
from ragsift.streams.app import create_app


def test_defaults_batch_results_into_few_produce_requests() -> None:
    """Faust's 16 KiB / 0 ms sent ~5.5 KB results as hundreds of requests per batch."""
    conf = create_app(KafkaSettings(), app_id="unit-producer").conf
    assert conf.producer_compression_type is None
    assert conf.producer_linger == pytest.approx(0.005)
    assert conf.producer_max_batch_size == 512 * 1024
    # a full batch must fit the broker's default message.max.bytes (1 MiB + 12)
    assert conf.producer_max_batch_size < 1024 * 1024


def test_compression_linger_and_batch_size_reach_the_faust_producer() -> None:
    kafka = KafkaSettings(
        producer_compression="lz4", producer_linger_ms=5, producer_max_batch_bytes=262_144
    )
    conf = create_app(kafka, app_id="unit-producer").conf
    assert conf.producer_compression_type == "lz4"
    assert conf.producer_linger == pytest.approx(0.005)
    assert conf.producer_max_batch_size == 262_144


def test_the_variables_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSIFT_KAFKA_PRODUCER_COMPRESSION", "zstd")
    monkeypatch.setenv("RAGSIFT_KAFKA_PRODUCER_MAX_BATCH_BYTES", "1048576")
    kafka = KafkaSettings()
    assert kafka.producer_compression == "zstd"
    assert kafka.producer_max_batch_bytes == 1_048_576


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("producer_compression", "brotli"),
        ("producer_compression", "LZ4\x00"),
        ("producer_linger_ms", -1),
        ("producer_linger_ms", 10**12),
        ("producer_max_batch_bytes", 0),
        ("producer_max_batch_bytes", 2**40),
    ],
)
def test_bad_producer_values_are_refused_by_name(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        KafkaSettings(**{field: value})


def test_every_compression_codec_offered_is_installed() -> None:
    """lz4, zstd and snappy need cramjam in aiokafka 0.14: a setting must not fail at send."""
    from aiokafka import codec

    assert codec.has_lz4()
    assert codec.has_zstd()
    assert codec.has_snappy()
