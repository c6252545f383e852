"""An MCP server for the tests: ``python server.py`` (stdio) or ``python server.py http PORT``.

Each tool run appends a line to the file named by ``MCP_TEST_LOG`` (if set), so the tests can
count how often the server did something and see what an elicitation received.
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    Image,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("notes", log_level="CRITICAL")
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, title="Read a note"))
def read_note(name: str) -> str:
    """Read a note by name."""
    log(f"read {name}")
    return f"note {name}: buy milk"


@server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
def delete_note(name: str) -> str:
    """Delete a note."""
    log(f"delete {name}")
    return f"deleted {name}"


@server.tool(annotations=ToolAnnotations(destructive_hint=False, read_only_hint=False))
def append_note(name: str, text: str) -> str:
    """Append text to a note."""
    log(f"append {name} {text}")
    return f"appended to {name}"


class Sum(BaseModel):
    total: int
    terms: list[int]


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two numbers (structured result)."""
    return Sum(total=a + b, terms=[a, b])


@server.tool()
def pixel() -> Image:
    """A 1x1 PNG image."""
    return Image(data=PIXEL, format="png")


@server.tool()
def fail(why: str) -> str:
    """Always fails."""
    raise ToolError(f"failed because {why}")


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


class Booking(BaseModel):
    seats: int = Field(description="How many seats")
    name: str


def ask_seats(show: str) -> Elicit[Booking]:
    return Elicit(f"How many seats for {show}?", Booking)


@server.tool()
def book(show: str, answer: Annotated[ElicitationResult[Booking], Resolve(ask_seats)]) -> str:
    """Book seats for a show, asking the user how many."""
    log(f"book {show} {answer.action} {getattr(answer, 'data', None)!r}")
    if not isinstance(answer, AcceptedElicitation):
        return f"not booked ({answer.action})"
    return f"booked {answer.data.seats} seats for {answer.data.name}"


@server.tool()
async def book_legacy(show: str, ctx: Context) -> str:
    """Book seats the handshake-era way: an elicitation request in the middle of the call."""
    log(f"legacy start {show}")
    answer = await ctx.elicit(f"How many seats for {show}?", Booking)
    log(f"legacy {show} {answer.action}")
    if not isinstance(answer, AcceptedElicitation):
        return f"not booked ({answer.action})"
    return f"booked {answer.data.seats} seats for {answer.data.name}"


@server.tool()
async def sign_in(ctx: Context) -> str:
    """Sends the user to a web page (a URL-mode question, handshake-era protocol)."""
    answer = await ctx.elicit_url("Sign in to the box office", "https://example.com/login", "e1")
    log(f"sign_in {answer.action}")
    return f"sign-in {answer.action}"


@server.tool()
async def slow(seconds: float) -> str:
    """Takes its time."""
    import anyio

    log(f"slow {seconds}")
    await anyio.sleep(seconds)
    return "finally"


class Seat(BaseModel):
    row: str


def ask_row() -> Elicit[Seat]:
    return Elicit("Which row?", Seat)


class Meal(BaseModel):
    vegetarian: bool


def ask_meal() -> Elicit[Meal]:
    return Elicit("Vegetarian meal?", Meal)


@server.tool()
def dinner_show(
    seat: Annotated[ElicitationResult[Seat], Resolve(ask_row)],
    meal: Annotated[ElicitationResult[Meal], Resolve(ask_meal)],
) -> str:
    """Two questions in one call."""
    log(f"dinner {seat.action} {meal.action}")
    row = seat.data.row if isinstance(seat, AcceptedElicitation) else "-"
    veg = meal.data.vegetarian if isinstance(meal, AcceptedElicitation) else "-"
    return f"row {row}, vegetarian {veg}"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        import anyio

        anyio.run(lambda: server.run_streamable_http_async(port=int(sys.argv[2])))
    else:
        server.run()
