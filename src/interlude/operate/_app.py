"""An application: the operator's map from agent *names* to the code that builds them.

A session records only its agent's name; :class:`App` turns that name back into an agent by
calling a factory the application registered. Stored data never names code, so whoever can
write to a store cannot choose what runs in the process that resumes a session.

Graphs and swarms (``interlude.multiagent``) are registered the same way, with
``@app.graph(name)``: their session records the name too, and :meth:`App.open` rebuilds them.
Agent and graph names share one namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from .._agent import Agent
from .._sync import run_sync
from ..errors import ConfigurationError, SessionError, UnknownAgentError
from ._sessions import is_graph

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..multiagent import Graph, Swarm
    from ..notify import Notifications, NotificationTarget
    from ..policy import Policy
    from ..sessions import SessionStore, StoredSession

__all__ = ["AgentSession", "App", "Opened"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSession:
    """The session a factory builds its agent on: ``Agent(..., session=session.store,
    session_id=session.id)``."""

    id: str
    store: SessionStore


Factory = Callable[[AgentSession], Agent]
F = TypeVar("F", bound=Factory)
GraphFactory = Callable[[AgentSession], "Graph | Swarm"]
G = TypeVar("G", bound=GraphFactory)
Opened: TypeAlias = "Agent | Graph | Swarm"
"""What :meth:`App.open` and :meth:`App.start` return: the agent, graph or swarm the name is
registered as."""


class App:
    """Agent factories by name.

    ::

        app = App()

        @app.agent("ops")
        def build(session: AgentSession) -> Agent:
            return Agent(model, tools=[...], session=session.store, session_id=session.id)

        agent = app.start("ops", "ticket-42", "sqlite:///sessions.db")  # a new session
        agent = app.open("ticket-42", "sqlite:///sessions.db")  # its recorded agent, rebuilt

        @app.graph("trip")
        def build_trip(session: AgentSession) -> Graph:
            return Graph({...}, [...], entry=..., session=session.store, session_id=session.id)

        graph = app.start("trip", "trip-7", "sqlite:///sessions.db")  # a Graph, on its session

    ``interlude answer --app module:app`` resumes sessions with the agents ``app`` registers.

    ``notify`` (targets such as ``interlude.notify.Webhook(url, secret=...)`` and
    ``interlude.notify.Email(...)``, URLs, or an ``interlude.notify.Notifications``) makes the
    app's workers tell people about its questions; ``inbox_url`` is where the inbox is served,
    for the links. They are kept as ``app.notifications`` (None: no notifications).

    ``policy`` (and ``shadow``, see ``interlude.policy``) cover every agent the app builds,
    graph and swarm nodes included, where the agent has no policy of its own.
    """

    def __init__(
        self,
        *,
        notify: Notifications | Sequence[NotificationTarget | str] | None = None,
        inbox_url: str | None = None,
        policy: Policy | None = None,
        shadow: Policy | None = None,
    ) -> None:
        for what, given in (("policy", policy), ("shadow", shadow)):
            if given is not None and not callable(getattr(given, "decide", None)):
                raise ConfigurationError(f"{what} must be an interlude.policy.Policy: {given!r}")
        self.policy = policy
        self.shadow = shadow
        self._factories: dict[str, Factory] = {}
        self._graphs: dict[str, GraphFactory] = {}
        self.notifications: Notifications | None = None
        if notify is not None or inbox_url is not None:
            from ..notify import Notifications

            self.notifications = Notifications.of(notify, inbox_url=inbox_url)

    def __repr__(self) -> str:
        return f"App(names={list(self.names)!r})"

    def __contains__(self, name: object) -> bool:
        return name in self._factories or name in self._graphs

    @property
    def names(self) -> tuple[str, ...]:
        """The registered agent names, then the graph and swarm names, in registration order."""
        return (*self._factories, *self._graphs)

    @property
    def graph_names(self) -> tuple[str, ...]:
        """The registered graph and swarm names, in registration order."""
        return tuple(self._graphs)

    def agent(self, name: str) -> Callable[[F], F]:
        """Register the decorated ``build(session: AgentSession) -> Agent`` as agent ``name``."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"an agent name is a non-empty string, got {name!r}")

        def register(factory: F) -> F:
            if not callable(factory):
                raise ConfigurationError(f"agent {name!r}: {factory!r} is not callable")
            self._check_free(name, factory)
            self._factories[name] = factory
            return factory

        return register

    def graph(self, name: str) -> Callable[[G], G]:
        """Register the decorated ``build(session: AgentSession) -> Graph | Swarm`` as graph
        (or swarm) ``name``; build it with ``session=session.store, session_id=session.id``.
        The name is recorded with its session, as an agent's is; agents and graphs share the
        namespace."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"a graph name is a non-empty string, got {name!r}")

        def register(factory: G) -> G:
            if not callable(factory):
                raise ConfigurationError(f"graph {name!r}: {factory!r} is not callable")
            self._check_free(name, factory)
            self._graphs[name] = factory
            return factory

        return register

    def govern(self, built: Opened) -> Opened:
        """``built`` (an agent, graph or swarm a factory made) under the app's policies,
        where it has none of its own."""
        policy, shadow = self.policy, self.shadow
        if policy is None and shadow is None:
            return built
        if isinstance(built, Agent):
            if policy is not None and built.policy is None:
                built.policy = policy
            if shadow is not None and built.shadow is None:
                built.shadow = shadow
        else:
            built.govern(policy, shadow)
        return built

    def _check_free(self, name: str, factory: object) -> None:
        taken = self._factories.get(name) or self._graphs.get(name)
        if taken is not None:
            raise ConfigurationError(
                f"{name!r} is registered twice: by {_describe(taken)} and by {_describe(factory)}"
            )

    # --- building agents --------------------------------------------------------------------

    def open(
        self, session_id: str, store: SessionStore | str, *, unnamed: str | None = None
    ) -> Opened:
        """The agent of a stored session, built by the factory of the name it records (a
        graph's or swarm's session: the graph or swarm, loaded).

        ``unnamed`` is the agent name to use for a session that records none (saved by an older
        version, or by an Agent without ``name=``); the session records it from its next save.
        SessionError if there is no such session; UnknownAgentError if its agent name is not
        registered here.
        """
        store = _as_store(store)
        stored = run_sync(store.load(session_id))
        agent = self._open(session_id, store, stored, unnamed)
        if isinstance(agent, Agent):
            run_sync(agent.load(stored))  # the session as read: not read again
        else:
            run_sync(agent.load())
        return agent

    async def open_async(
        self, session_id: str, store: SessionStore | str, *, unnamed: str | None = None
    ) -> Opened:
        """:meth:`open` from async code."""
        store = _as_store(store)
        stored = await store.load(session_id)
        agent = self._open(session_id, store, stored, unnamed)  # builds it: no I/O
        if isinstance(agent, Agent):
            await agent.load(stored)  # the session as read: not read again
        else:
            await agent.load()
        return agent

    def start(self, name: str, session_id: str, store: SessionStore | str) -> Opened:
        """A new session ``session_id`` run by agent ``name``. SessionError if the session
        exists already (use :meth:`open`); UnknownAgentError if ``name`` is not registered."""
        store = _as_store(store)
        return self._start(name, session_id, store, run_sync(store.load(session_id)))

    async def start_async(self, name: str, session_id: str, store: SessionStore | str) -> Opened:
        """:meth:`start` from async code."""
        store = _as_store(store)
        stored = await store.load(session_id)
        return self._start(name, session_id, store, stored)  # builds it: no I/O

    def _open(
        self,
        session_id: str,
        store: SessionStore,
        stored: StoredSession | None,
        unnamed: str | None,
    ) -> Opened:
        if stored is None:
            raise SessionError(f"no session {session_id!r} in the store")
        graph = is_graph(stored)
        name = stored.agent
        if name is None:
            if unnamed is None:
                raise UnknownAgentError(
                    f"session {session_id!r} records no agent name (it was saved by an older "
                    "version, or by an Agent without name=); open it with unnamed=NAME, one of "
                    f"this app's agents {list(self._factories)!r}"
                )
            name = unnamed
        elif unnamed is not None and unnamed != name:
            raise UnknownAgentError(
                f"session {session_id!r} records agent {name!r}, not {unnamed!r}"
            )
        if graph:
            if name not in self._graphs:
                raise UnknownAgentError(
                    f"session {session_id!r} is a graph's (or swarm's) and records {name!r}, "
                    f"which this app does not register as one (its graphs: "
                    f"{list(self._graphs)!r}; register it with @app.graph({name!r}))"
                )
            return self._build_graph(name, session_id, store)
        if name not in self._factories:
            raise UnknownAgentError(
                f"session {session_id!r} records agent {name!r}, which this app does not "
                f"register (its agents: {list(self._factories)!r})"
            )
        agent = self._build(name, session_id, store)
        if any(m.get("role") == "assistant" for m in stored.messages if isinstance(m, dict)):
            _warn_if_scripted(agent.model, name)  # it carries on a conversation under way
        return agent

    def _start(
        self, name: str, session_id: str, store: SessionStore, stored: StoredSession | None
    ) -> Opened:
        if name not in self:
            raise UnknownAgentError(
                f"no agent {name!r} in this app (its agents: {list(self.names)!r})"
            )
        if stored is not None:
            raise SessionError(
                f"session {session_id!r} already exists (agent {stored.agent!r}); open it "
                "instead of starting it"
            )
        if name in self._graphs:
            return self._build_graph(name, session_id, store)
        return self._build(name, session_id, store)

    def _build_graph(self, name: str, session_id: str, store: SessionStore) -> Graph | Swarm:
        from ..multiagent import Graph, Swarm, bound_to

        factory = self._graphs[name]
        built = factory(AgentSession(id=session_id, store=store))
        where = f"the factory {_describe(factory)} of graph {name!r}"
        if not isinstance(built, Graph | Swarm):
            raise ConfigurationError(f"{where} returned {built!r}, not a Graph or a Swarm")
        self.govern(built)
        if not bound_to(built, store, session_id):
            raise ConfigurationError(
                f"{where} returned a {built.kind} on session {built.session_id!r}, not on the "
                f"session it was given ({session_id!r}): build it with session=session.store, "
                "session_id=session.id"
            )
        if built.name is None:
            built.name = name
        elif built.name != name:
            raise ConfigurationError(
                f"{where} returned a {built.kind} named {built.name!r}; leave name= out, or "
                f"give {name!r}"
            )
        return built

    def _build(self, name: str, session_id: str, store: SessionStore) -> Agent:
        factory = self._factories[name]
        agent = factory(AgentSession(id=session_id, store=store))
        where = f"the factory {_describe(factory)} of agent {name!r}"
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"{where} returned {agent!r}, not an Agent")
        self.govern(agent)
        if agent.session_id != session_id or agent.session_store is not store:
            raise ConfigurationError(
                f"{where} returned an agent on session {agent.session_id!r}, not on the session "
                f"it was given ({session_id!r}): build it with session=session.store, "
                "session_id=session.id"
            )
        if agent.name is None:
            agent.name = name
        elif agent.name != name:
            raise ConfigurationError(
                f"{where} returned an agent named {agent.name!r}; leave name= out, or give {name!r}"
            )
        if getattr(agent.model, "resumable", False) is None:  # a ScriptedModel, not told
            agent.model.resumable = True  # type: ignore[attr-defined]  # carries on anywhere
        return agent


def _as_store(store: SessionStore | str) -> SessionStore:
    if isinstance(store, str):
        from ..sessions import open_store

        return open_store(store)
    return store


def _describe(factory: object) -> str:
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if module and qualname:
        return f"{module}:{qualname}"
    return repr(factory)


def _warn_if_scripted(model: object, name: str) -> None:
    """A warning for a ScriptedModel built with ``resumable=False`` (it starts its script over
    in every process), opened on a conversation under way: it would ask for its first tool
    call again."""
    if getattr(model, "resumable", None) is False:  # a ScriptedModel that starts over
        import warnings

        warnings.warn(
            f"agent {name!r} of this App runs on a ScriptedModel, which plays its turns from the "
            "first in every process: a paused session carried on in another process would ask "
            "for the first tool call again. Build it with ScriptedModel(..., resumable=True) "
            "(the turn that fits the conversation) or a FunctionModel",
            stacklevel=5,
        )
