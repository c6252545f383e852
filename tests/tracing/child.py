"""Run in a fresh process by the tracing tests (``python -m tests.tracing.child``, from the
repository root): resume the "ops" agent (agent_def.py) with tracing on, from an exported state
or from its SQLite session, and print its spans as JSON.

Reads JSON from stdin: {"answers", and "state" or "db"}.
"""

import json
import sys


def main() -> None:
    job = json.load(sys.stdin)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import interlude.otel
    from interlude.testing import ScriptedModel

    from . import agent_def

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interlude.otel.instrument(tracer_provider=provider)
    agent = agent_def.build(ScriptedModel(["The api is deployed."]), db=job.get("db"))
    if job.get("state") is not None:
        agent.import_state(job["state"])
    result = agent.resume(job["answers"])
    spans = [agent_def.span_dict(s) for s in exporter.get_finished_spans()]
    json.dump({"text": str(result), "deployed": agent_def.deployed, "spans": spans}, sys.stdout)


if __name__ == "__main__":
    main()
