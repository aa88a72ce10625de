"""The engine's metrics as the tests make them: a snapshot with chosen figures, and its
Prometheus export as the server's /metrics writes it."""

from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry, generate_latest

from app.server.metrics import EngineCollector
from inference.core.metrics import MetricsSnapshot


def metrics_snapshot(**fields) -> MetricsSnapshot:
    """Every figure 0 (no lanes) but those given."""
    values: dict = {f.name: 0 for f in dataclasses.fields(MetricsSnapshot)}
    values["lanes"] = ()
    values.update(fields)
    return MetricsSnapshot(**values)


def prometheus_text(snapshot) -> str:
    """What /metrics answers for an engine reporting `snapshot`."""
    registry = CollectorRegistry()
    registry.register(EngineCollector(lambda: snapshot))
    return generate_latest(registry).decode()
