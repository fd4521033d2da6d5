"""The translation summary as it travels between tasks: where each group was applied, in a fifth of the bytes."""

from __future__ import annotations

import json

from kafka_dr.translation.summary import applied_offsets, for_xcom


def test_the_xcom_keeps_where_each_group_was_applied_and_drops_the_rest_of_each_translation() -> None:
    translated = [
        {"topic": "orders", "partition": p, "source_offset": 10 + p, "dest_topic": "orders.replica"}
        | {"dest_offset": 17 + p, "method": "provenance"}
        for p in range(6)
    ]
    summary = {"flow": "f", "group_count": 1, "applied": ["billing"], "groups": {"billing": translated}}
    sent = json.loads(json.dumps(for_xcom(summary)))  # as an XCom comes back: JSON
    assert "groups" not in sent and sent["applied"] == ["billing"] and sent["group_count"] == 1
    assert applied_offsets(sent, "billing") == {("orders.replica", p): 17 + p for p in range(6)}
    assert applied_offsets(sent, "audit") == {}
    assert len(json.dumps(sent)) < len(json.dumps(summary)) / 2
