"""Whether Interlude's own tracing has a span for the model call being made.

``interlude.otel`` sets :data:`TRACED_CALL` while its ``chat`` span for a model call is open.
A provider SDK that makes its own span for the same request (the ``anthropic`` SDK does, from
2.14, whenever OpenTelemetry is set up) is then asked not to: two nested ``chat`` spans that
both carry token counts are counted twice by tracing backends. Without Interlude's tracing
the SDK's spans stay as they are.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["TRACED_CALL"]

TRACED_CALL: ContextVar[bool] = ContextVar("interlude_traced_model_call", default=False)
