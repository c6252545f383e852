"""An application: the operator's map from agent *names* to the code that builds them.

A session records only its agent's name; :class:`App` turns that name back into an agent by
calling a factory the application registered. Stored data never names code, so whoever can
write to a store cannot choose what runs in the process that resumes a session.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ._agent import Agent
from ._sync import run_sync
from .errors import ConfigurationError, SessionError, UnknownAgentError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .notify import Notifications, NotificationTarget
    from .sessions._protocol import SessionStore, StoredSession

__all__ = ["AgentSession", "App"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSession:
    """The session a factory builds its agent on: ``Agent(..., session=session.store,
    session_id=session.id)``."""

    id: str
    store: SessionStore


Factory = Callable[[AgentSession], Agent]
F = TypeVar("F", bound=Factory)


class App:
    """Agent factories by name.

    ::

        app = App()

        @app.agent("ops")
        def build(session: AgentSession) -> Agent:
            return Agent(model, tools=[...], session=session.store, session_id=session.id)

        agent = app.start("ops", "ticket-42", "sqlite:///sessions.db")  # a new session
        agent = app.open("ticket-42", "sqlite:///sessions.db")  # its recorded agent, rebuilt

    ``interlude answer --app module:app`` resumes sessions with the agents ``app`` registers.

    ``notify`` (targets such as ``interlude.notify.Webhook(url, secret=...)`` and
    ``interlude.notify.Email(...)``, URLs, or an ``interlude.notify.Notifications``) makes the
    app's workers tell people about its questions; ``inbox_url`` is where the inbox is served,
    for the links. They are kept as ``app.notifications`` (None: no notifications).
    """

    def __init__(
        self,
        *,
        notify: Notifications | Sequence[NotificationTarget | str] | None = None,
        inbox_url: str | None = None,
    ) -> None:
        self._factories: dict[str, Factory] = {}
        self.notifications: Notifications | None = None
        if notify is not None or inbox_url is not None:
            from .notify import Notifications

            self.notifications = Notifications.of(notify, inbox_url=inbox_url)

    def __repr__(self) -> str:
        return f"App(names={list(self._factories)!r})"

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    @property
    def names(self) -> tuple[str, ...]:
        """The registered agent names, in registration order."""
        return tuple(self._factories)

    def agent(self, name: str) -> Callable[[F], F]:
        """Register the decorated ``build(session: AgentSession) -> Agent`` as agent ``name``."""
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"an agent name is a non-empty string, got {name!r}")

        def register(factory: F) -> F:
            if not callable(factory):
                raise ConfigurationError(f"agent {name!r}: {factory!r} is not callable")
            if name in self._factories:
                raise ConfigurationError(
                    f"agent {name!r} is registered twice: by {_describe(self._factories[name])} "
                    f"and by {_describe(factory)}"
                )
            self._factories[name] = factory
            return factory

        return register

    # --- building agents --------------------------------------------------------------------

    def open(
        self, session_id: str, store: SessionStore | str, *, unnamed: str | None = None
    ) -> Agent:
        """The agent of a stored session, built by the factory of the name it records.

        ``unnamed`` is the agent name to use for a session that records none (saved by an older
        version, or by an Agent without ``name=``); the session records it from its next save.
        SessionError if there is no such session; UnknownAgentError if its agent name is not
        registered here.
        """
        store = _as_store(store)
        stored = run_sync(store.load(session_id))
        agent = self._open(session_id, store, stored, unnamed)
        run_sync(agent.load(stored))  # the session as read: not read again
        return agent

    async def open_async(
        self, session_id: str, store: SessionStore | str, *, unnamed: str | None = None
    ) -> Agent:
        """:meth:`open` from async code."""
        store = _as_store(store)
        stored = await store.load(session_id)
        agent = self._open(session_id, store, stored, unnamed)  # builds it: no I/O
        await agent.load(stored)  # the session as read: not read again
        return agent

    def start(self, name: str, session_id: str, store: SessionStore | str) -> Agent:
        """A new session ``session_id`` run by agent ``name``. SessionError if the session
        exists already (use :meth:`open`); UnknownAgentError if ``name`` is not registered."""
        store = _as_store(store)
        return self._start(name, session_id, store, run_sync(store.load(session_id)))

    async def start_async(self, name: str, session_id: str, store: SessionStore | str) -> Agent:
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
    ) -> Agent:
        if stored is None:
            raise SessionError(f"no session {session_id!r} in the store")
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
    ) -> Agent:
        if name not in self._factories:
            raise UnknownAgentError(
                f"no agent {name!r} in this app (its agents: {list(self._factories)!r})"
            )
        if stored is not None:
            raise SessionError(
                f"session {session_id!r} already exists (agent {stored.agent!r}); open it "
                "instead of starting it"
            )
        return self._build(name, session_id, store)

    def _build(self, name: str, session_id: str, store: SessionStore) -> Agent:
        factory = self._factories[name]
        agent = factory(AgentSession(id=session_id, store=store))
        where = f"the factory {_describe(factory)} of agent {name!r}"
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"{where} returned {agent!r}, not an Agent")
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
        return agent


def _as_store(store: SessionStore | str) -> SessionStore:
    if isinstance(store, str):
        from .sessions import open_store

        return open_store(store)
    return store


def _describe(factory: object) -> str:
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if module and qualname:
        return f"{module}:{qualname}"
    return repr(factory)


def _warn_if_scripted(model: object, name: str) -> None:
    """A warning for a ScriptedModel that starts its script over in every process, opened on a
    conversation under way: it would ask for its first tool call again."""
    if getattr(model, "resumable", None) is False:  # a ScriptedModel that starts over
        import warnings

        warnings.warn(
            f"agent {name!r} of this App runs on a ScriptedModel, which plays its turns from the "
            "first in every process: a paused session carried on in another process would ask "
            "for the first tool call again. Build it with ScriptedModel(..., resumable=True) "
            "(the turn that fits the conversation) or a FunctionModel",
            stacklevel=5,
        )
