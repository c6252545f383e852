"""The operator floor: running sessions for people, whichever door they answer through.

``App`` maps agent (and graph) names to the code that builds them; ``Inbox`` lists what waits
and records answers; ``Worker`` carries sessions on; the answer rules (who may answer, the
first answer wins, what an edit may be) live in one module here, and every door (the inbox
pages and API, the command line, AG-UI, A2A, the Temporal inbox) only translates its wire
format to a call of this floor and maps its typed refusals (``errors.refusal_code``) to its
own error shape. The public names are also importable from ``interlude``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._app import AgentSession, App, Opened
from ._worker import Worker, WorkerHealth

if TYPE_CHECKING:
    from ._applying import ApplyingStore
    from ._backend import InboxBackend, StoreBackend, WorkflowView
    from ._inbox import Inbox, SessionView
    from ._keys import answer_key, by_question_id, question_id_of
    from ._links import (
        LINK_PATH,
        LINK_SECRET_ENV,
        AnswerLink,
        AnswerLinks,
        LinkProblem,
        check_link,
        link_key,
        load_link_secret,
        narrowed,
        read_link,
    )
    from ._moves import Operator, check_queue
    from ._moving import Moved, Place, StorePlace, Taken, move, move_async
    from ._people import ENV as TOKENS_ENV
    from ._people import MIN_TOKEN, People, Person, check_tokens, load_tokens, people
    from ._resumable import Outcome, Resumable
    from ._rules import check_allowed, check_taken, who_may_answer

__all__ = [
    "AgentSession",
    "AnswerLink",
    "AnswerLinks",
    "App",
    "ApplyingStore",
    "Inbox",
    "InboxBackend",
    "LINK_PATH",
    "LINK_SECRET_ENV",
    "LinkProblem",
    "MIN_TOKEN",
    "Moved",
    "Opened",
    "Operator",
    "Outcome",
    "People",
    "Person",
    "Place",
    "Resumable",
    "SessionView",
    "StoreBackend",
    "StorePlace",
    "TOKENS_ENV",
    "Taken",
    "Worker",
    "WorkerHealth",
    "WorkflowView",
    "answer_key",
    "by_question_id",
    "check_allowed",
    "check_link",
    "check_queue",
    "check_taken",
    "check_tokens",
    "link_key",
    "load_link_secret",
    "load_tokens",
    "move",
    "move_async",
    "narrowed",
    "people",
    "question_id_of",
    "read_link",
    "who_may_answer",
]

_LAZY = {
    "AnswerLink": "._links",
    "AnswerLinks": "._links",
    "LINK_PATH": "._links",
    "LINK_SECRET_ENV": "._links",
    "LinkProblem": "._links",
    "check_link": "._links",
    "link_key": "._links",
    "load_link_secret": "._links",
    "narrowed": "._links",
    "read_link": "._links",
    "ApplyingStore": "._applying",
    "Operator": "._moves",
    "Moved": "._moving",
    "Place": "._moving",
    "StorePlace": "._moving",
    "Taken": "._moving",
    "move": "._moving",
    "move_async": "._moving",
    "answer_key": "._keys",
    "by_question_id": "._keys",
    "question_id_of": "._keys",
    "check_queue": "._moves",
    "Outcome": "._resumable",
    "Resumable": "._resumable",
    "InboxBackend": "._backend",
    "StoreBackend": "._backend",
    "WorkflowView": "._backend",
    "Inbox": "._inbox",
    "SessionView": "._inbox",
    "People": "._people",
    "Person": "._people",
    "MIN_TOKEN": "._people",
    "TOKENS_ENV": "._people",
    "check_tokens": "._people",
    "load_tokens": "._people",
    "people": "._people",
    "check_allowed": "._rules",
    "check_taken": "._rules",
    "who_may_answer": "._rules",
}
_RENAMED = {"TOKENS_ENV": "ENV"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'interlude.operate' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), _RENAMED.get(name, name))
    globals()[name] = value
    return value
