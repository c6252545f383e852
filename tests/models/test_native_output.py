"""Structured output on each provider's wire format, driven by the real client libraries.

Every adapter asks natively: OpenAI ``response_format`` (json_schema, strict when the schema
allows), Ollama ``format``, Anthropic ``output_config.format``, Bedrock
``outputConfig.textFormat``. The loopback servers refuse those fields in the shapes the real
APIs refuse (e.g. an object not closed with ``additionalProperties: false``), so a run that
gets its answer shows the request was one the provider takes. ``native_output=False`` falls
back to the ``final_result`` tool, shown here on the OpenAI and Bedrock formats.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from interlude import Agent, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.models import RetryPolicy
from interlude.models.anthropic import AnthropicModel
from interlude.models.bedrock import BedrockModel
from interlude.models.ollama import OllamaModel
from interlude.models.openai import OpenAIModel

from . import anthropic_server as anth
from . import bedrock_server as bed
from . import ollama_server as oll
from . import openai_server as oai

FAST = RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.02, jitter=0.0)


class Weather(BaseModel):
    city: str
    celsius: int


class Loose(BaseModel):
    """A type OpenAI's strict mode cannot take: an optional field."""

    city: str
    note: str = ""


ANSWER = '{"city": "Oslo", "celsius": 21}'
CLOSED = {**Weather.model_json_schema(), "additionalProperties": False}


# --- OpenAI ---------------------------------------------------------------------------------------


@pytest.fixture
def openai_server() -> Iterator[oai.OpenAIServer]:
    srv = oai.OpenAIServer().start()
    yield srv
    srv.stop()


def openai_model(server: oai.OpenAIServer, **kwargs: Any) -> OpenAIModel:
    return OpenAIModel(
        "gpt-4o-mini", api_key="sk-test", base_url=server.base_url, retry=FAST, **kwargs
    )


def test_openai_strict_json_schema(openai_server: oai.OpenAIServer) -> None:
    openai_server.add(oai.text_reply('{"city": "Os', 'lo", "celsius": 21}'))
    result = Agent(openai_model(openai_server))("Weather?", output_type=Weather)

    assert result.output == Weather(city="Oslo", celsius=21)
    [body] = openai_server.requests
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_result", "schema": CLOSED, "strict": True},
    }
    assert "tools" not in body


def test_openai_schema_unfit_for_strict_mode_is_sent_not_strict(openai_server) -> None:
    openai_server.add(oai.text_reply('{"city": "Oslo"}'))
    result = Agent(openai_model(openai_server))("Weather?", output_type=Loose)
    assert result.output == Loose(city="Oslo")
    spec = openai_server.requests[0]["response_format"]["json_schema"]
    assert spec["strict"] is False and spec["schema"] == Loose.model_json_schema()


def test_openai_the_server_refuses_an_open_object_in_strict_mode(openai_server) -> None:
    """The check the loopback server applies is the one the adapter must pass."""
    body = {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": Weather.model_json_schema(), "strict": True},
        }
    }
    assert "additionalProperties" in (oai.response_format_problem(body) or "")


def test_openai_a_plain_type_is_wrapped_and_a_bad_answer_sent_back(openai_server) -> None:
    openai_server.add(oai.text_reply('{"result": "many"}'), oai.text_reply('{"result": 3}'))
    agent = Agent(openai_model(openai_server))
    result = agent("How many?", output_type=int)

    assert result.output == 3
    first, second = openai_server.requests
    schema = first["response_format"]["json_schema"]["schema"]
    assert schema["properties"] == {"result": {"type": "integer"}}
    assert second["messages"][-2] == {"role": "assistant", "content": '{"result": "many"}'}
    assert second["messages"][-1]["role"] == "user"
    assert "at result" not in second["messages"][-1]["content"]  # the path is the answer's own
    assert "integer" in second["messages"][-1]["content"]


def test_openai_tool_mode_final_result_call(openai_server) -> None:
    openai_server.add(oai.tool_reply(("call_1", "final_result", ANSWER)))
    model = openai_model(openai_server, native_output=False)
    result = Agent(model)("Weather?", output_type=Weather)

    assert result.output == Weather(city="Oslo", celsius=21)
    [body] = openai_server.requests
    assert "response_format" not in body
    [final] = body["tools"]
    assert final["function"]["name"] == "final_result"
    assert final["function"]["parameters"] == Weather.model_json_schema()


booked: list[str] = []


@tool
def book(city: str) -> str:
    """Book a trip.

    Args:
        city: Where to.
    """
    booked.append(city)
    return f"booked {city}"


def test_openai_pause_for_approval_then_resume_in_a_fresh_agent(openai_server) -> None:
    def build() -> Agent:
        agent = Agent(openai_model(openai_server), tools=[book])
        agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
        return agent

    booked.clear()
    openai_server.add(oai.tool_reply(("call_b", "book", '{"city": "Oslo"}')))
    first = build()
    paused = first("Book Oslo, then the weather", output_type=Weather)
    assert paused.stop_reason == "interrupt" and booked == []

    openai_server.add(oai.text_reply(ANSWER))
    second = build()
    second.import_state(json.loads(json.dumps(first.export_state())))
    result = second.resume({second.interrupts[0].id: True}, output_type=Weather)
    assert result.output == Weather(city="Oslo", celsius=21) and booked == ["Oslo"]
    assert [r["response_format"]["json_schema"]["schema"] for r in openai_server.requests] == [
        CLOSED,
        CLOSED,
    ]
    assert openai_server.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_b",
        "content": "booked Oslo",
    }


# --- Ollama ---------------------------------------------------------------------------------------


def test_ollama_format_is_the_schema() -> None:
    with oll.OllamaServer() as server:
        server.add(oll.text_reply('{"city": "Oslo",', ' "celsius": 21}'))
        model = OllamaModel("llama3.2", host=server.url, retry=FAST)
        result = Agent(model)("Weather?", output_type=Weather)
        [request] = server.requests
    assert result.output == Weather(city="Oslo", celsius=21)
    assert request.body["format"] == Weather.model_json_schema()


def test_ollama_format_in_params_wins() -> None:
    with oll.OllamaServer() as server:
        server.add(oll.text_reply(ANSWER))
        model = OllamaModel("llama3.2", host=server.url, retry=FAST, params={"format": "json"})
        result = Agent(model)("Weather?", output_type=Weather)
        [request] = server.requests
    assert result.output.celsius == 21 and request.body["format"] == "json"


# --- Anthropic ------------------------------------------------------------------------------------


def test_anthropic_output_config_format() -> None:
    with anth.AnthropicServer() as server:
        server.queue(anth.text_turn(ANSWER))
        model = AnthropicModel(
            "claude-test",
            client_args={"api_key": "sk-ant-test", "base_url": server.url},
            retry=FAST,
        )
        result = Agent(model)("Weather?", output_type=Weather)
        [body] = server.bodies
    assert result.output == Weather(city="Oslo", celsius=21)
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": CLOSED}}


def test_anthropic_server_refuses_an_open_object() -> None:
    body = {"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}
    assert "additionalProperties" in (anth.output_format_problem(body) or "")


# --- Bedrock --------------------------------------------------------------------------------------


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials; nothing read from the machine's AWS config or instance metadata."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


def bedrock_model(server: bed.BedrockServer, **kwargs: Any) -> BedrockModel:
    return BedrockModel(
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        region_name="us-east-1",
        endpoint_url=server.url,
        retry=FAST,
        **kwargs,
    )


def test_bedrock_output_config_text_format(aws_env: None) -> None:
    with bed.BedrockServer() as server:
        server.add(bed.text_reply('{"city": "Oslo", ', '"celsius": 21}'))
        result = Agent(bedrock_model(server))("Weather?", output_type=Weather)
        [request] = server.requests
    assert result.output == Weather(city="Oslo", celsius=21)
    fmt = request.body["outputConfig"]["textFormat"]
    assert fmt["type"] == "json_schema"
    definition = fmt["structure"]["jsonSchema"]
    assert definition["name"] == "final_result"
    assert json.loads(definition["schema"]) == CLOSED  # JSON text, as the API takes it


def test_bedrock_tool_mode_final_result_call(aws_env: None) -> None:
    with bed.BedrockServer() as server:
        server.add(
            bed.tool_reply(("tu_1", "final_result", ['{"city": "Oslo",', ' "celsius": 21}']))
        )
        result = Agent(bedrock_model(server, native_output=False))("Weather?", output_type=Weather)
        [request] = server.requests
    assert result.output == Weather(city="Oslo", celsius=21)
    assert "outputConfig" not in request.body
    [spec] = request.body["toolConfig"]["tools"]
    assert spec["toolSpec"]["name"] == "final_result"
    assert spec["toolSpec"]["inputSchema"]["json"] == Weather.model_json_schema()


def test_tool_uses_in_a_structured_run_still_work(aws_env: None) -> None:
    """A run may call tools before it answers: the answer is the reply after them."""
    booked.clear()
    with bed.BedrockServer() as server:
        server.add(
            bed.tool_reply(("tu_b", "book", ['{"city": "Oslo"}'])),
            bed.text_reply(ANSWER),
        )
        result = Agent(bedrock_model(server), tools=[book])("Book Oslo", output_type=Weather)
        assert len(server.requests) == 2
    assert result.output.city == "Oslo" and booked == ["Oslo"]
