"""Spans of traced runs, collected by the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import interlude.otel


@dataclass
class Traces:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.named(name)
        return span

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture
def traces() -> Iterator[Traces]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Traces(provider, exporter)
    interlude.otel.uninstrument()  # a test that traced every agent stops doing so
    provider.shutdown()
