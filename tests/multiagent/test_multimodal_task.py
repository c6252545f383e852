"""A graph or a swarm takes a multimodal task (text and an image) as an agent does: the entry
nodes get the blocks as their prompt, later nodes the blocks and the earlier replies, and the
task survives a pause and a resume by a fresh orchestration from the store."""

from __future__ import annotations

from pathlib import Path

from interlude import Agent, Image, Text
from interlude.multiagent import BeforeNodeCallEvent, Graph, Swarm
from interlude.sessions import SQLiteStore
from interlude.testing import FunctionModel, ModelRequest

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))


def _seeing(name: str, seen: list[tuple[str, list[str]]]) -> Agent:
    def reply(request: ModelRequest) -> str:
        blocks = request.messages[-1].content
        seen.append((name, [type(b).__name__ for b in blocks]))
        images = [b for b in blocks if isinstance(b, Image)]
        return f"{name} saw {len(images)} image(s) of {len(images[0].data) if images else 0} bytes"

    return Agent(FunctionModel(reply), name=name)


def test_a_graph_takes_text_and_an_image(tmp_path: Path) -> None:
    seen: list[tuple[str, list[str]]] = []
    store = SQLiteStore(tmp_path / "s.db")

    def build() -> Graph:
        graph = Graph(
            {"look": _seeing("look", seen), "sum": _seeing("sum", seen)},
            edges=[("look", "sum")],
            entry="look",
            session=store,
            session_id="g",
        )
        return graph

    graph = build()

    def ask(event: BeforeNodeCallEvent) -> None:
        if event.node == "sum":
            assert event.prompt.startswith("what is in it?")  # hooks see the task's text
            event.interrupt("go", "summarise?", response_type=bool)

    graph.hooks.add_callback(BeforeNodeCallEvent, ask)
    paused = graph([Text("what is in it?"), Image("image/png", PNG)])
    assert paused.stop_reason == "interrupt"
    assert seen == [("look", ["Text", "Image"])]

    fresh = build()
    fresh.hooks.add_callback(BeforeNodeCallEvent, ask)
    done = fresh.resume({paused.interrupts[0].id: True})
    assert done.stop_reason == "end_turn"
    assert seen[1] == ("sum", ["Text", "Image", "Text"])  # the task, then the inputs
    assert "sum saw 1 image(s) of 40 bytes" in str(done.nodes["sum"].message)


def test_a_swarm_takes_text_and_an_image() -> None:
    seen: list[tuple[str, list[str]]] = []
    swarm = Swarm([_seeing("first", seen)])
    result = swarm([Text("describe"), Image("image/png", PNG)])
    assert result.stop_reason == "end_turn"
    assert seen == [("first", ["Text", "Image"])]
