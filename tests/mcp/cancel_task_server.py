"""examples/mcp_task_server.py with ``tasks/cancel`` (the example has none): a cancelled task's
tool stops and the task is ``cancelled``; each cancel is a line ``tasks/cancel <its status
until then>`` of the file named by ``MCP_TEST_LOG`` (a task already ended refuses, logged as
``tasks/cancel refused (<status>)``). ``python tests/mcp/cancel_task_server.py PORT`` serves
streamable HTTP on 127.0.0.1, with the example's tools and settings."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CancelTaskRequestParams

_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_task_server.py"
_spec = importlib.util.spec_from_file_location("mcp_task_server_example", _EXAMPLE)
assert _spec is not None and _spec.loader is not None
example: Any = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = example  # its pydantic models resolve their annotations there
_spec.loader.exec_module(example)

_ENDED = ("completed", "failed", "cancelled")


class CancellingTasks(example.Tasks):  # type: ignore[misc]  # loaded from a file
    """The example's tasks extension, and ``tasks/cancel``."""

    def methods(self) -> Sequence[MethodBinding]:
        cancel = MethodBinding("tasks/cancel", CancelTaskRequestParams, self.cancel)
        return (*super().methods(), cancel)

    async def cancel(
        self, ctx: ServerRequestContext[Any, Any], params: CancelTaskRequestParams
    ) -> HandlerResult:
        task = example._find(params.task_id)
        if task.status in _ENDED:
            example.log(f"tasks/cancel refused ({task.status})")
            raise MCPError(INVALID_PARAMS, f"task {task.id} has ended ({task.status})")
        example.log(f"tasks/cancel {task.status}")
        if task.runner is not None:
            task.runner.cancel()
        task.set("cancelled", "cancelled by the client")
        wire: dict[str, Any] = task.wire()
        return wire


server = MCPServer("tasks", log_level="CRITICAL", extensions=[CancellingTasks()])
for _fn in (example.book, example.survey, example.crunch, example.stall):
    server.add_tool(_fn)

if __name__ == "__main__":
    import anyio

    anyio.run(lambda: server.run_streamable_http_async(port=int(sys.argv[1])))
