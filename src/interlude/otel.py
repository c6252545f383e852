"""OpenTelemetry traces of agent runs (``pip install 'interlude-agents[otel]'``).

::

    import interlude.otel

    interlude.otel.instrument()  # every agent, through the global TracerProvider
    interlude.otel.instrument(agent, tracer_provider=provider)  # one agent, this provider

Each run is an ``invoke_agent`` span; each model call a ``chat`` span and each tool body an
``execute_tool`` span under it, named and described by the OpenTelemetry GenAI semantic
conventions. Questions raised and answered are events of the run's span. A run that pauses
ends its span with ``interlude.stop_reason = "interrupt"`` (not an error) and keeps the span's
W3C trace context in the pause, so the run that resumes it, in this process or any other,
links its span to the paused one. No message text, tool input or output, or answer is
recorded. Until this module is imported, nothing of OpenTelemetry is. See
docs/observability.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "interlude.otel needs the OpenTelemetry API: pip install 'interlude-agents[otel]'"
    ) from exc

from ._agent import Asked, Raised, Returned, install
from .models._traced import TRACED_CALL

if TYPE_CHECKING:
    from collections.abc import Callable

    from opentelemetry.trace import Span, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

    from ._agent import Agent, RunInfo, ToolOutcome, ToolRequest
    from ._interrupt import Interrupt
    from ._messages import Usage
    from ._result import AgentResult
    from ._stream import ModelResponse
    from .models import Model

__all__ = ["STOP_REASON", "TRACER_NAME", "instrument", "uninstrument"]

TRACER_NAME = "interlude"
"""The instrumentation scope of Interlude's spans."""

STOP_REASON = "interlude.stop_reason"
"""How a span's work ended when not plainly: on a run's span its stop reason (``"interrupt"``
for a pause, ``"cancelled"``, ...), on a model call's or tool's span ``"cancelled"``, or
``"interrupt"`` for a tool that asked a question."""

# Attribute names of the OpenTelemetry GenAI semantic conventions.
_OPERATION = "gen_ai.operation.name"
_AGENT_NAME = "gen_ai.agent.name"
_CONVERSATION = "gen_ai.conversation.id"
_PROVIDER = "gen_ai.provider.name"
_MODEL = "gen_ai.request.model"
_FINISH = "gen_ai.response.finish_reasons"
_INPUT_TOKENS = "gen_ai.usage.input_tokens"
_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
_TOOL_NAME = "gen_ai.tool.name"
_TOOL_CALL_ID = "gen_ai.tool.call.id"
_TOOL_TYPE = "gen_ai.tool.type"
_ERROR_TYPE = "error.type"

_PROVIDERS = {
    "interlude.models.openai": "openai",
    "interlude.models.anthropic": "anthropic",
    "interlude.models.bedrock": "aws.bedrock",
    "interlude.models.ollama": "ollama",
}
_PROPAGATOR = TraceContextTextMapPropagator()
_log = logging.getLogger(__name__)


def instrument(
    agent: Agent | None = None, *, tracer_provider: TracerProvider | None = None
) -> None:
    """Trace agent runs: every agent's (with no ``agent``; agents made later too), or only
    ``agent``'s. Spans go to ``tracer_provider``, by default the global one (so a provider
    configured later, e.g. by the OpenTelemetry SDK or an auto-instrumentation agent, is
    used once it is set). Calling it again replaces the earlier setting."""
    observer = _Tracing(trace.get_tracer(TRACER_NAME, _version(), tracer_provider))
    if agent is None:
        install(observer)
    else:
        agent.observer = observer


def uninstrument(agent: Agent | None = None) -> None:
    """Stop tracing: every agent's runs (no ``agent``), or ``agent``'s own setting (it then
    follows the process-wide one)."""
    if agent is None:
        install(None)
    else:
        agent.observer = None


class _Tracing:
    """The observer of runs (``Agent(observer=...)``) that makes OpenTelemetry spans."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.failed = False
        """Whether tracing has failed already (only the first failure is a warning)."""

    async def observe_run(
        self, info: RunInfo, drive: Callable[[str | None], Coroutine[Any, Any, AgentResult]]
    ) -> AgentResult:
        span: Span = trace.INVALID_SPAN
        token: object = None
        own: str | None = None
        with self._safely("starting a run's span"):
            span = self._start_run(info)
            own = _traceparent(span)
            token = otel_context.attach(trace.set_span_in_context(span))
        try:
            result = await drive(own)  # the pause or the journal carries its trace context
        except asyncio.CancelledError:
            with self._safely("ending a run's span"):
                span.set_attribute(STOP_REASON, "cancelled")
            raise
        except BaseException as exc:
            with self._safely("ending a run's span"):
                _failed(span, exc)
            raise
        else:
            with self._safely("ending a run's span"):
                span.set_attribute(STOP_REASON, result.stop_reason)
                for interrupt in result.interrupts if result.stop_reason == "interrupt" else ():
                    span.add_event("interlude.interrupt.raised", _raised(interrupt))
            return result
        finally:
            with self._safely("ending a run's span"):
                try:
                    _usage(span, info.usage_now(), info.usage)
                finally:
                    self._end(span, token)

    def _start_run(self, info: RunInfo) -> Span:
        """The run's span, started, linked to the run it carries on (if traced)."""
        kind = info.kind
        attributes: dict[str, AttributeValue] = {
            _OPERATION: "invoke_agent",
            "interlude.run.kind": kind,
        }
        if info.agent_name is not None:
            attributes[_AGENT_NAME] = info.agent_name
        if info.session_id is not None:
            attributes[_CONVERSATION] = info.session_id
        attributes.update(_model_attributes(info.model))
        links = []
        earlier = _span_context(info.traceparent)
        if earlier is not None:
            follows = "paused_run" if kind == "resume" else "stopped_run"
            links.append(trace.Link(earlier, {"interlude.link": follows}))
        name = "invoke_agent" if info.agent_name is None else f"invoke_agent {info.agent_name}"
        span = self.tracer.start_span(name, attributes=attributes, links=links)
        for entry in info.answered:
            answered: dict[str, AttributeValue] = {
                "interlude.interrupt.id": entry.interrupt_id,
                "interlude.interrupt.name": entry.name,
                "interlude.interrupt.answered_by": entry.by,
            }
            if entry.expired:
                answered["interlude.interrupt.expired"] = True
            span.add_event("interlude.interrupt.answered", answered)
        return span

    def _end(self, span: Span, token: object) -> None:
        """End ``span`` and put back the context that was current before it (``token``)."""
        try:
            if token is not None:
                otel_context.detach(token)  # type: ignore[arg-type]
        finally:
            span.end()

    @contextlib.contextmanager
    def _safely(self, what: str) -> Iterator[None]:
        """Tracing that fails (a span processor or a tracer provider that raises) is logged,
        once per instrumentation and then at debug level, and never fails the run."""
        try:
            yield
        except Exception:
            level = logging.DEBUG if self.failed else logging.WARNING
            self.failed = True
            _log.log(level, "tracing failed while %s; the run goes on", what, exc_info=True)

    async def observe_model(
        self, model: Model, call: Coroutine[Any, Any, ModelResponse]
    ) -> ModelResponse:
        span: Span = trace.INVALID_SPAN
        token: object = None
        try:
            with self._safely("starting a model call's span"):
                attributes: dict[str, AttributeValue] = {_OPERATION: "chat"}
                attributes.update(_model_attributes(model))
                model_id = attributes.get(_MODEL)
                name = "chat" if model_id is None else f"chat {model_id}"
                span = self.tracer.start_span(
                    name, kind=trace.SpanKind.CLIENT, attributes=attributes
                )
                token = otel_context.attach(trace.set_span_in_context(span))
        except BaseException:  # KeyboardInterrupt and the like: the call never runs
            call.close()
            raise
        traced = TRACED_CALL.set(True)  # a provider SDK's own span for it would count twice
        try:
            response = await call
        except asyncio.CancelledError:
            with self._safely("ending a model call's span"):
                span.set_attribute(STOP_REASON, "cancelled")
            raise
        except BaseException as exc:
            with self._safely("ending a model call's span"):
                _failed(span, exc)
            raise
        else:
            with self._safely("ending a model call's span"):
                span.set_attribute(_FINISH, [response.stop_reason])
                _usage(span, response.usage)
            return response
        finally:
            TRACED_CALL.reset(traced)
            with self._safely("ending a model call's span"):
                self._end(span, token)

    async def observe_tool(
        self, request: ToolRequest, body: Coroutine[Any, Any, ToolOutcome]
    ) -> ToolOutcome:
        span: Span = trace.INVALID_SPAN
        token: object = None
        tool = request.tool
        try:
            with self._safely("starting a tool's span"):
                attributes: dict[str, AttributeValue] = {
                    _OPERATION: "execute_tool",
                    _TOOL_NAME: tool.name,
                    _TOOL_CALL_ID: request.answer_id,
                    _TOOL_TYPE: "function",
                }
                if request.answer_id != request.tool_use.id:  # the run's id is unique
                    attributes["interlude.tool_use.id"] = request.tool_use.id
                span = self.tracer.start_span(f"execute_tool {tool.name}", attributes=attributes)
                token = otel_context.attach(trace.set_span_in_context(span))
        except BaseException:  # KeyboardInterrupt and the like: the body never runs
            body.close()
            raise
        try:
            outcome = await body
        except asyncio.CancelledError:
            with self._safely("ending a tool's span"):
                span.set_attribute(STOP_REASON, "cancelled")
            raise
        except BaseException as exc:
            with self._safely("ending a tool's span"):
                _failed(span, exc)
            raise
        else:
            with self._safely("ending a tool's span"):
                _ended(span, outcome)
            return outcome
        finally:
            with self._safely("ending a tool's span"):
                self._end(span, token)


def _ended(span: Span, outcome: ToolOutcome) -> None:
    """Mark a tool's span with what its body came to: a question is not a failure."""
    if isinstance(outcome, Asked):
        span.set_attribute(STOP_REASON, "interrupt")
        span.set_attribute("interlude.interrupt.id", outcome.interrupts[0].id)
    elif isinstance(outcome, Returned):
        if outcome.result.status == "error":
            span.set_status(trace.Status(trace.StatusCode.ERROR, "the tool returned an error"))
            span.set_attribute(_ERROR_TYPE, "tool_error")
    elif isinstance(outcome, Raised):
        _failed(span, outcome.exception)
    else:  # Lost: it may or may not have run
        span.set_status(trace.Status(trace.StatusCode.ERROR, outcome.reason))
        span.set_attribute(_ERROR_TYPE, "lost")


def _model_attributes(model: object) -> dict[str, AttributeValue]:
    """``gen_ai.request.model``, ``gen_ai.provider.name`` and ``server.address`` /
    ``server.port``, where the model says them."""
    out: dict[str, AttributeValue] = {}
    model_id = getattr(model, "model_id", None)
    if isinstance(model_id, str) and model_id:
        out[_MODEL] = model_id
    provider = getattr(model, "provider_name", None)  # a model that says who serves it
    if not isinstance(provider, str) or not provider:
        provider = _PROVIDERS.get(type(model).__module__)
    if provider is not None:
        out[_PROVIDER] = provider
    base_url = getattr(model, "base_url", None)  # the server it calls, where the model says
    if isinstance(base_url, str) and base_url:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(base_url)
            port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
        except ValueError:
            return out
        if parts.hostname:
            out["server.address"] = parts.hostname
            if port is not None:
                out["server.port"] = port
    return out


def _usage(span: Span, usage: Usage, before: Usage | None = None) -> None:
    """The tokens used (since ``before``, for a run that carries on an invocation)."""
    inputs, outputs = usage.input_tokens, usage.output_tokens
    if before is not None:
        inputs, outputs = inputs - before.input_tokens, outputs - before.output_tokens
    span.set_attribute(_INPUT_TOKENS, inputs)
    span.set_attribute(_OUTPUT_TOKENS, outputs)


def _failed(span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    span.set_attribute(_ERROR_TYPE, _error_type(exc))


def _error_type(exc: BaseException) -> str:
    """The exception's class name, qualified by its module (builtins go bare)."""
    kind = type(exc)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _raised(interrupt: Interrupt) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {
        "interlude.interrupt.id": interrupt.id,
        "interlude.interrupt.name": interrupt.name,
        "interlude.interrupt.source": interrupt.source,
    }
    if interrupt.tool_use is not None:
        out[_TOOL_NAME] = interrupt.tool_use.name
        out[_TOOL_CALL_ID] = interrupt.tool_use.id
    return out


def _traceparent(span: Span) -> str | None:
    """The span's W3C ``traceparent``, or None for a span that is not real (no SDK)."""
    if not span.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def _span_context(traceparent: str | None) -> trace.SpanContext | None:
    """The span context a ``traceparent`` names, or None if it names none."""
    if traceparent is None:
        return None
    extracted = _PROPAGATOR.extract({"traceparent": traceparent})
    found = trace.get_current_span(extracted).get_span_context()
    return found if found.is_valid else None


def _version() -> str:
    from ._version import __version__

    return __version__
