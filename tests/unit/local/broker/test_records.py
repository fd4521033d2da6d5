"""The embedded broker's produce validation: one whole batch with a good CRC, else a clear refusal."""

from __future__ import annotations

import pytest
from support.partition_log import batch

from kafka_dr_dev.local.broker.records import InvalidRecordError, validate_single_batch


def test_produce_validation_refuses_bad_batches() -> None:
    good = batch(2)
    with pytest.raises(InvalidRecordError, match="CRC"):
        validate_single_batch(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(InvalidRecordError, match="exactly one"):
        validate_single_batch(good + good)
    with pytest.raises(InvalidRecordError, match="too short"):
        validate_single_batch(good[:20])
