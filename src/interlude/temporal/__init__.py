"""Agents as Temporal workflows: the loop in workflow code, model calls and tool bodies as
activities, pauses as durable waits answered by an Update
(``pip install 'interlude-agents[temporal]'``).

::

    worker = interlude.temporal.worker(client, app, task_queue="agents")
    agents = interlude.temporal.AgentClient(client, task_queue="agents")

See docs/temporal.md.
"""

from __future__ import annotations

from temporalio import workflow

# Interlude imports parts of itself (and pydantic, jsonschema) lazily, on first use. Inside the
# workflow sandbox such a late import would load a second copy of a module; so everything the
# loop may import is imported here, once, passed through the sandbox.
with workflow.unsafe.imports_passed_through():
    import jsonschema  # noqa: F401
    import pydantic
    import pydantic.fields
    import pydantic.json_schema
    import pydantic.main
    import pydantic.type_adapter  # noqa: F401

    import interlude._agent
    import interlude._audit
    import interlude._exceptions
    import interlude._tools._context
    import interlude._typed
    import interlude.hooks
    import interlude.models._assemble
    import interlude.multiagent
    import interlude.multiagent._export
    import interlude.multiagent._stored  # graphs run in workflows too

    interlude._agent.load_all()

# Besides the public names, the face carries (outside __all__) the search attribute keys the
# CLI lists workflows by, so that nothing outside this package imports its private modules.
from ._activities import model_activity, tool_activity
from ._client import AgentClient, AnswerTimeoutError, recover, undo
from ._client import moved_to as moved_to  # (for the CLI: where a moved workflow's run went)
from ._hooks import HookActivity, as_activity, hook_activity
from ._inbox import QueryTimeoutError, TemporalInbox
from ._moving import TemporalPlace
from ._registry import ActivityOptions
from ._setup import register_search_attributes
from ._worker import replayer, worker
from ._workflow import AGENT as AGENT
from ._workflow import NAMES as NAMES
from ._workflow import PENDING as PENDING
from ._workflow import SEARCH_ATTRIBUTES, WORKFLOW, AgentWorkflow, Limits, PayloadLimitError

__all__ = [
    "SEARCH_ATTRIBUTES",
    "WORKFLOW",
    "ActivityOptions",
    "AgentClient",
    "AgentWorkflow",
    "AnswerTimeoutError",
    "HookActivity",
    "Limits",
    "PayloadLimitError",
    "QueryTimeoutError",
    "TemporalInbox",
    "TemporalPlace",
    "as_activity",
    "hook_activity",
    "model_activity",
    "recover",
    "register_search_attributes",
    "replayer",
    "tool_activity",
    "undo",
    "worker",
]
