"""``POST /ag-ui/{agent}``: one AG-UI run of an App's agent on the session its thread names.

A run does one of three things, by what ``RunAgentInput`` carries:

- ``resume[]``: answer the thread's pending questions (checked as ``resume`` checks answers,
  by the token's approver) and stream the rest of the run;
- a new user message last in ``messages`` (a thread that is not paused): run it as a prompt
  (a thread not seen before starts a session for the agent);
- neither: report where the thread stands (its open questions again; a run whose process
  stopped is recovered first).

Every refusal is a ``RUN_ERROR`` (``code``: the Interlude error's class name) after
``RUN_STARTED``, with nothing changed. The request needs ``Authorization: Bearer <token>``
with one of the inbox's tokens (401 otherwise); an unknown agent is 404, a body that is not
a ``RunAgentInput`` 422.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import AgentPausedError, InterludeError, ResumeInputError
from ._events import Translator, finish
from ._wire import answers_from

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent, RunAgentInput
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute, Route

    from .._app import App, Opened
    from .._interrupt import Interrupt
    from ..server._auth import Approver, Auth
    from ..sessions._protocol import SessionStore

__all__ = ["Endpoint", "create_endpoint"]

PATH = "/ag-ui/{agent}"


def create_endpoint(
    app: App,
    store: SessionStore | str,
    *,
    tokens: Mapping[str, Any] | None = None,
    secret: bytes | None = None,
) -> Starlette:
    """A Starlette application serving ``POST /ag-ui/{agent}`` for ``app``'s agents, with
    sessions in ``store`` (a store or a store URL). ``tokens`` are the inbox's (token to
    approver name, or to ``{"name": ..., "groups": [...]}``; default: ``$INTERLUDE_TOKENS``);
    the approver of the presented token answers the questions a run resumes. Mount it in your
    own application, or let ``interlude serve --app`` serve it beside the inbox."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    from ..server._auth import Auth, load_tokens
    from ..server._limits import BodyLimit
    from ..sessions import open_store

    opened = open_store(store) if isinstance(store, str) else store
    auth = Auth(load_tokens() if tokens is None else tokens, secret)
    endpoint = Endpoint(app, opened, auth)
    return Starlette(routes=endpoint.routes(), middleware=[Middleware(BodyLimit)])


class Endpoint:
    """The AG-UI endpoint of ``app``'s agents on ``store``, authenticated by ``auth``."""

    def __init__(self, app: App, store: SessionStore, auth: Auth) -> None:
        self.app = app
        self.store = store
        self.auth = auth

    def routes(self) -> list[Route]:
        """The endpoint's route: ``POST /ag-ui/{agent}``."""
        from starlette.routing import Route

        return [Route(PATH, self.handle, methods=["POST"])]

    async def handle(self, request: Request) -> Response:
        """One AG-UI run: 401/404/422 before the stream; the run's events after."""
        from ag_ui.core import RunAgentInput
        from pydantic import ValidationError
        from starlette.responses import JSONResponse, StreamingResponse

        approver = self.auth.bearer(request.headers.get("authorization"))
        if approver is None:
            return JSONResponse(
                {"error": "missing or wrong token: send Authorization: Bearer <token>"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="interlude"'},
            )
        name = request.path_params["agent"]
        if name not in self.app:
            return JSONResponse(
                {"error": f"no agent {name!r} here (agents: {list(self.app.names)!r})"},
                status_code=404,
            )
        try:
            run_input = RunAgentInput.model_validate_json(await request.body())
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            return JSONResponse({"error": f"not a RunAgentInput: {problems}"}, status_code=422)
        events = self._run(name, run_input, approver)
        return StreamingResponse(
            _encoded(events),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _run(
        self, name: str, run_input: RunAgentInput, approver: Approver
    ) -> AsyncIterator[BaseEvent]:
        from ag_ui.core import RunErrorEvent, RunStartedEvent

        thread_id, run_id = run_input.thread_id, run_input.run_id
        yield RunStartedEvent(thread_id=thread_id, run_id=run_id)
        translator = Translator(run_id)
        agent: Opened | None = None
        try:
            agent = await self._open(name, thread_id)
            async for event in self._drive(agent, run_input, approver, translator):
                yield event
        except (InterludeError, ValueError) as exc:
            for event in translator.close():
                yield event
            yield RunErrorEvent(message=str(exc), code=type(exc).__name__)
        finally:
            close = getattr(agent, "aclose", None)
            if close is not None:
                await close()

    async def _open(self, name: str, thread_id: str) -> Opened:
        """The thread's session, opened; a new one for agent ``name`` if there is none."""
        from ..errors import SessionError

        stored = await self.store.load(thread_id)
        if stored is None:
            return await self.app.start_async(name, thread_id, self.store)
        if stored.agent is not None and stored.agent != name:
            raise SessionError(
                f"thread {thread_id!r} is a session of agent {stored.agent!r}, not {name!r}"
            )
        return await self.app.open_async(thread_id, self.store, unnamed=name)

    async def _drive(
        self,
        agent: Opened,
        run_input: RunAgentInput,
        approver: Approver,
        translator: Translator,
    ) -> AsyncIterator[BaseEvent]:
        from .._agent import Agent
        from .._inbox_rules import check_allowed

        thread_id, run_id = run_input.thread_id, run_input.run_id
        pending: list[Interrupt] = list(agent.interrupts) if agent.is_paused else []
        prompt = _new_prompt(run_input)
        if run_input.resume:
            if not agent.is_paused:
                answered = _answered(agent)
                answers_from(run_input.resume, [], answered)  # names an already answered one
                raise ResumeInputError(
                    f"thread {thread_id!r} waits on no question; nothing changed"
                )
            answers, shown = answers_from(run_input.resume, pending, _answered(agent))
            check_allowed(
                {q.id: q for q in pending}, answers, approver.groups, _now(agent), approver.name
            )
            if isinstance(agent, Agent):
                stream = agent.resume_stream_async(answers, by=approver.name, shown=shown)
                async for event in self._streamed(agent, stream, translator, thread_id, run_id):
                    yield event
                return
            result = await agent.resume_async(answers, by=approver.name, shown=shown)
            for event in finish(thread_id, run_id, result.interrupts, str(result), {}):
                yield event
            return
        if pending or agent.needs_recovery:
            if prompt is not None and pending:
                raise AgentPausedError(
                    f"thread {thread_id!r} waits on {len(pending)} question(s): answer them "
                    "with resume[] (a run without resume or a new message lists them)"
                )
            if agent.needs_recovery:
                done = await agent.recover_async()
                pending = list(done.interrupts) if done.stop_reason == "interrupt" else []
                text = None if done.stop_reason == "interrupt" else str(done)
            else:
                text = None
            for event in finish(thread_id, run_id, pending, text, _state(agent)):
                yield event
            return
        if prompt is None:
            raise ResumeInputError(
                f"nothing to run on thread {thread_id!r}: the last message is not a new user "
                "message and there is no resume[]"
            )
        if isinstance(agent, Agent):
            stream = agent.stream_async(prompt)
            async for event in self._streamed(agent, stream, translator, thread_id, run_id):
                yield event
            return
        result = await agent.invoke_async(prompt)
        for event in finish(thread_id, run_id, result.interrupts, str(result), {}):
            yield event

    async def _streamed(
        self,
        agent: Any,
        stream: AsyncIterator[Any],
        translator: Translator,
        thread_id: str,
        run_id: str,
    ) -> AsyncIterator[BaseEvent]:
        from .._stream import RunFinished

        async for event in stream:
            if isinstance(event, RunFinished):
                for out in translator.close():
                    yield out
                result = event.result
                paused = result.stop_reason == "interrupt"
                text = None if paused or result.message is None else str(result)
                pending = result.interrupts if paused else []
                for out in finish(thread_id, run_id, pending, text, _state(agent)):
                    yield out
                return
            for out in translator.events(event):
                yield out


async def _encoded(events: AsyncIterator[BaseEvent]) -> AsyncIterator[str]:
    """The events as server-sent events (``data: <json>``, AG-UI's camelCase names)."""
    from ag_ui.encoder import EventEncoder

    encoder = EventEncoder()
    async for event in events:
        yield encoder.encode(event)


def _new_prompt(run_input: RunAgentInput) -> str | None:
    """The text of the last message when it is the user's (the new prompt), else None."""
    if not run_input.messages:
        return None
    last = run_input.messages[-1]
    if getattr(last, "role", None) != "user":
        return None
    content = last.content
    if isinstance(content, str):
        return content or None
    if not isinstance(content, list):
        return None
    parts = [getattr(part, "text", None) for part in content]
    text = "".join(p for p in parts if isinstance(p, str))
    return text or None


def _answered(agent: Opened) -> dict[str, str]:
    """Who answered each question the thread's audit trail records (expiries left out)."""
    out: dict[str, str] = {}
    for entry in agent.audit:
        if isinstance(entry, Mapping):
            iid, by = entry.get("interrupt_id"), entry.get("by")
        else:
            iid, by = entry.interrupt_id, entry.by
        if isinstance(iid, str) and isinstance(by, str) and by != "expiry":
            out[iid] = by
    return out


def _state(agent: Opened) -> dict[str, Any]:
    from .._agent import Agent

    return dict(agent.state) if isinstance(agent, Agent) else {}


def _now(agent: Opened) -> float:
    import time

    clock = getattr(agent, "clock", None)
    return float(clock()) if callable(clock) else time.time()


def routes_for(app: App | None, store: object, auth: Auth) -> list[BaseRoute]:
    """The endpoint's routes for the inbox application (``create_app``): none without an App
    or a session store, or without the ``[ag-ui]`` extra installed."""
    if app is None or not hasattr(store, "load"):
        return []
    try:
        import ag_ui.core  # noqa: F401
    except ImportError:
        return []
    return list(Endpoint(app, store, auth).routes())  # type: ignore[arg-type]
