"""The A2A door made whole, driven by the a2a-sdk's own client: ``message/stream`` (a pause is
the stream's ``input-required`` end, its answer a streamed message on the same task),
``tasks/resubscribe``, push notifications to a loopback webhook that checks their token, and
``tasks/cancel`` (a paused task's pause discarded, a running task stopped, an ended one refused).
Refusals on the streaming path are those of ``message/send``; nothing they refuse changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from a2a.client import Client
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Part,
    SendMessageConfiguration,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)

from interlude.a2a import create_a2a_app
from interlude.sessions import open_store
from tests.support import until
from tests.support.serving import serving

from .apps import effects
from .streams import (
    BO_TOKEN,
    CANCELED,
    GATE,
    PEOPLE,
    WORKING,
    Webhook,
    close_all,
    error_data,
    events_of,
    kind,
    loopback_only,
    message,
    state_of,
    status_data,
    streaming_app,
    streaming_client,
    webhook,
)
from .test_a2a_server import stored
from .wire import BASE, COMPLETED, INPUT_REQUIRED, data, questions, result, sdk_client, send


def serve(db: str, **options: object) -> object:
    return create_a2a_app(streaming_app(), db, tokens=PEOPLE, **options)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
async def gate() -> AsyncIterator[None]:
    GATE.entered.clear()
    GATE.released.clear()
    yield
    GATE.released.set()  # a run left waiting finishes
    await close_all()


def asked(event: object) -> list[dict[str, object]]:
    """The questions an ``input-required`` status update carries."""
    return list(status_data(event)["questions"])  # type: ignore[arg-type]


# --- streaming ------------------------------------------------------------------------------


async def test_the_card_offers_streaming_and_push_notifications(db: str) -> None:
    asgi = serve(db)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(asgi), base_url=BASE) as http:  # type: ignore[arg-type]
        card = (await http.get("/a2a/ops/.well-known/agent-card.json")).json()
    assert card["capabilities"] == {"streaming": True, "pushNotifications": True}


async def test_a_streamed_pause_is_answered_by_a_streamed_message(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    client = await streaming_client(serve(db), "ops")
    closing.append(client)
    paused = await events_of(client.send_message(message(Part(text="Free some disk space"))))
    assert [kind(e) for e in paused] == ["task", "status_update"]
    assert state_of(paused[0]) == WORKING and state_of(paused[-1]) == INPUT_REQUIRED
    task_id = paused[0].task.id
    [question] = asked(paused[-1])
    assert question["reason"] == "delete /var/log/old.log?" and effects() == []
    assert paused[-1].status_update.status.HasField("timestamp")

    answer = message(data({"answers": {question["id"]: True}}), task_id=task_id)
    done = await events_of(client.send_message(answer))
    assert kind(done[0]) == "task" and state_of(done[0]) == WORKING
    steps = [status_data(e).get("tool_call") for e in done if kind(e) == "status_update"]
    assert [s["status"] for s in steps if s] == ["started", "success"]  # the tool ran, once
    assert [kind(e) for e in done[-2:]] == ["artifact_update", "status_update"]
    assert done[-2].artifact_update.artifact.parts[0].text == "Deleted."
    assert state_of(done[-1]) == COMPLETED
    assert effects() == ["delete /var/log/old.log"]
    [entry] = await open_store(db).audit_trail(task_id)
    assert (entry["by"], entry["answer"]) == ("ana", True)


async def test_refusals_on_the_streaming_path_are_those_of_send(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    """A non-approver, an unknown question and an answer given already: each refused before
    the stream starts, with the error ``message/send`` gives, and nothing changed."""
    asgi = serve(db)
    ana = await streaming_client(asgi, "guarded")
    bo = await streaming_client(asgi, "guarded", BO_TOKEN)
    bo_blocking = await sdk_client(asgi, "guarded", BO_TOKEN)
    closing.extend([ana, bo, bo_blocking])
    paused = await events_of(ana.send_message(message(Part(text="Wipe the data"))))
    task_id = paused[0].task.id
    [question] = asked(paused[-1])
    assert question["approvers"] == ["ops"]
    before = await stored(db, task_id)

    async def both(
        sender: Client, blocking: Client, answers: dict[str, object]
    ) -> list[dict[str, object]]:
        seen = []
        for one in (sender, blocking):
            with pytest.raises(InvalidParamsError) as refused:
                await events_of(one.send_message(message(data(answers), task_id=task_id)))
            seen.append(error_data(refused.value))
        return seen

    streamed, sent = await both(bo, bo_blocking, {"answers": {question["id"]: True}})
    assert streamed == sent and streamed["code"] == "not_allowed"
    assert streamed["error"] == "NotAllowedToAnswerError"
    ana_blocking = await sdk_client(asgi, "guarded")
    closing.append(ana_blocking)
    streamed, sent = await both(ana, ana_blocking, {"answers": {"v1:no-such-question": True}})
    assert streamed == sent and streamed["code"] == "unknown_interrupt"
    assert await stored(db, task_id) == before and effects() == []

    answer = message(data({"answers": {question["id"]: True}}), task_id=task_id)
    done = await events_of(ana.send_message(answer))
    assert state_of(done[-1]) == COMPLETED and effects() == ["delete /srv/data"]
    after = await stored(db, task_id)
    streamed, sent = await both(ana, ana_blocking, {"answers": {question["id"]: True}})
    assert streamed == sent and streamed["code"] == "already_answered"
    assert await stored(db, task_id) == after and effects() == ["delete /srv/data"]


async def test_resubscribe_follows_a_running_task(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    """While a run waits in its tool, a second client of the same server follows it from
    where it stands, and a client of another server on the same store (whose process does
    not run it) follows it through the store; both see it complete, the tool ran once."""
    with serving(serve(db)) as base, serving(serve(db)) as other:
        starter = await streaming_client(base, "slow")
        follower = await streaming_client(base, "slow")
        elsewhere = await streaming_client(other, "slow")
        closing.extend([starter, follower, elsewhere])
        started = asyncio.ensure_future(
            events_of(starter.send_message(message(Part(text="Rebuild"), context_id="job-1")))
        )
        await until(lambda: _async(GATE.entered.is_set()), "the run to be in its tool")
        here = aiter(follower.subscribe(SubscribeToTaskRequest(id="job-1")))
        there = aiter(elsewhere.subscribe(SubscribeToTaskRequest(id="job-1")))
        firsts = [await anext(here), await anext(there)]  # both follow it now
        GATE.released.set()
        runs, rest_here, rest_there = await asyncio.gather(
            started, events_of(here), events_of(there)
        )
    followed, read = [firsts[0], *rest_here], [firsts[1], *rest_there]

    for events in (runs, followed, read):
        assert kind(events[0]) == "task" and state_of(events[0]) == WORKING
        assert kind(events[-2]) == "artifact_update" and state_of(events[-1]) == COMPLETED
        assert events[-2].artifact_update.artifact.parts[0].text == "Rebuilt."
    steps = [status_data(e).get("tool_call", {}).get("status") for e in runs[1:-2]]
    assert steps[:2] == ["started", "success"]  # the starter saw the tool start and end
    assert effects() == ["slow rebuild"]

    again = await streaming_client(serve(db), "slow")
    closing.append(again)
    with pytest.raises(UnsupportedOperationError):  # it ended: nothing to follow
        await events_of(again.subscribe(SubscribeToTaskRequest(id="job-1")))


async def _async(value: object) -> object:
    return value


# --- cancel ---------------------------------------------------------------------------------


async def test_cancel_of_a_paused_task_discards_its_pause(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    client = await sdk_client(serve(db), "ops")
    closing.append(client)
    task = await send(client, Part(text="Free some disk space"))
    [question] = questions(task)

    canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
    assert canceled.status.state == CANCELED
    got = await client.get_task(GetTaskRequest(id=task.id))
    assert got.status.state == CANCELED and "ana" in got.status.message.parts[0].text
    listed = await client.list_tasks(ListTasksRequest(status=CANCELED))
    assert [t.id for t in listed.tasks] == [task.id]
    store = open_store(db)
    session = await store.load(task.id)
    assert session is not None and session.pause is None
    assert session.state["interlude.a2a"]["canceled"]["by"] == "ana"
    assert await store.pending_interrupts() == []  # gone from the inbox too

    before = await stored(db, task.id)
    with pytest.raises(InvalidParamsError):  # the question is gone: its answer is refused
        await send(client, data({"answers": {question["id"]: True}}), task_id=task.id)
    with pytest.raises(TaskNotCancelableError):  # canceled already
        await client.cancel_task(CancelTaskRequest(id=task.id))
    assert await stored(db, task.id) == before and effects() == []  # never ran


async def test_cancel_of_a_finished_task_is_refused(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    client = await sdk_client(serve(db), "ops")
    closing.append(client)
    task = await send(client, Part(text="Free some disk space"))
    done = await send(client, Part(text="yes"), task_id=task.id)
    assert done.status.state == COMPLETED
    before = await stored(db, task.id)
    with pytest.raises(TaskNotCancelableError, match="COMPLETED"):
        await client.cancel_task(CancelTaskRequest(id=task.id))
    assert await stored(db, task.id) == before
    got = await client.get_task(GetTaskRequest(id=task.id))
    assert got.status.state == COMPLETED and result(got) == "Deleted."


async def test_a_cancel_declines_so_only_who_may_answer_may_cancel(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    asgi = serve(db)
    ana = await sdk_client(asgi, "guarded")
    bo = await sdk_client(asgi, "guarded", BO_TOKEN)
    closing.extend([ana, bo])
    task = await send(ana, Part(text="Wipe the data"))
    before = await stored(db, task.id)
    with pytest.raises(InvalidParamsError) as refused:
        await bo.cancel_task(CancelTaskRequest(id=task.id))
    assert error_data(refused.value)["code"] == "not_allowed"
    assert await stored(db, task.id) == before
    assert (await ana.cancel_task(CancelTaskRequest(id=task.id))).status.state == CANCELED
    assert effects() == []


async def test_cancel_of_a_running_task_stops_it(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    """The run stops in its tool (which never finishes), its stream ends ``canceled``, and
    the task stays canceled."""
    with serving(serve(db)) as base:
        starter = await streaming_client(base, "slow")
        canceler = await streaming_client(base, "slow")
        closing.extend([starter, canceler])
        run = asyncio.ensure_future(
            events_of(starter.send_message(message(Part(text="Rebuild"), context_id="job-2")))
        )
        await until(lambda: _async(GATE.entered.is_set()), "the run to be in its tool")
        with pytest.raises(InvalidParamsError):  # a message meanwhile: the run holds the task
            await events_of(canceler.send_message(message(data({"answers": {}}), task_id="job-2")))
        canceled = await canceler.cancel_task(CancelTaskRequest(id="job-2"))  # still found
        events = await run
    assert canceled.status.state == CANCELED
    assert kind(events[0]) == "task" and state_of(events[-1]) == CANCELED
    GATE.released.set()
    assert effects() == []  # the tool was stopped before its effect
    later = await sdk_client(serve(db), "slow")
    closing.append(later)
    assert (await later.get_task(GetTaskRequest(id="job-2"))).status.state == CANCELED
    with pytest.raises(TaskNotCancelableError):
        await later.cancel_task(CancelTaskRequest(id="job-2"))


async def test_cancel_of_an_answered_run_stops_it(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    """A run the floor carries on after a streamed answer, stopped in its tool: canceled for
    good (the save that ends the run says so), the answer kept in the audit trail."""
    with serving(serve(db)) as base:
        client = await streaming_client(base, "gated")
        closing.append(client)
        paused = await events_of(client.send_message(message(Part(text="Migrate"))))
        task_id = paused[0].task.id
        [question] = asked(paused[-1])
        answer = message(data({"answers": {question["id"]: True}}), task_id=task_id)
        run = asyncio.ensure_future(events_of(client.send_message(answer)))
        await until(lambda: _async(GATE.entered.is_set()), "the run to be in its tool")
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        events = await run
    assert canceled.status.state == CANCELED and state_of(events[-1]) == CANCELED
    GATE.released.set()
    assert effects() == []
    store = open_store(db)
    session = await store.load(task_id)
    assert session is not None and session.pause is None
    assert session.state["interlude.a2a"]["canceled"]["by"] == "ana"
    [entry] = await store.audit_trail(task_id)
    assert (entry["by"], entry["answer"]) == ("ana", True)
    later = await sdk_client(serve(db), "gated")
    closing.append(later)
    assert (await later.get_task(GetTaskRequest(id=task_id))).status.state == CANCELED


# --- push notifications ---------------------------------------------------------------------


def push_config(hook: Webhook, token: str | None = None) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(
        url=hook.url,
        token=hook.token if token is None else token,
        authentication=AuthenticationInfo(scheme="Bearer", credentials=hook.secret),
    )


async def test_a_webhook_is_told_when_the_task_needs_input_and_when_it_ends(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    with webhook() as hook:
        asgi = serve(db, push_url_check=loopback_only)
        client = await sdk_client(asgi, "ops")
        closing.append(client)
        request = message(Part(text="Free some disk space"), context_id="night-job")
        request.configuration.CopyFrom(
            SendMessageConfiguration(
                task_push_notification_config=push_config(hook), return_immediately=True
            )
        )
        async for reply in client.send_message(request):
            assert reply.task.id == "night-job"  # back at once, the run goes on

        await until(lambda: _async(hook.taken), "the input-required notification")
        [note] = hook.taken
        update = note["body"]["statusUpdate"]
        assert update["taskId"] == "night-job" and update["status"]["state"] == (
            "TASK_STATE_INPUT_REQUIRED"
        )
        [part] = [p for p in update["status"]["message"]["parts"] if "data" in p]
        [question] = part["data"]["questions"]
        assert question["reason"] == "delete /var/log/old.log?" and "timestamp" in update["status"]
        headers = note["headers"]
        assert headers["x-a2a-notification-token"] == hook.token
        assert headers["authorization"] == f"Bearer {hook.secret}"

        config = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id="night-job", id="night-job")
        )
        assert (config.url, config.token) == (hook.url, hook.token)
        assert config.authentication.scheme == "Bearer"
        assert config.authentication.credentials == ""  # never read back
        bo = await sdk_client(asgi, "ops", BO_TOKEN)
        closing.append(bo)
        listed = await bo.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id="night-job")
        )
        assert list(listed.configs) == []  # ana's, not bo's

        done = await send(client, data({"answers": {question["id"]: True}}), task_id="night-job")
        assert done.status.state == COMPLETED
        await until(lambda: _async(len(hook.taken) == 2), "the completed notification")
        assert hook.taken[1]["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert hook.refused == [] and effects() == ["delete /var/log/old.log"]


async def test_a_webhook_refuses_a_notification_without_its_token(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    """The receiver's side of the scheme: a notification with no token, or one registered
    with another token, is refused (401), and the server does not send a refused one again;
    the task goes on as if no webhook were there."""
    with webhook() as hook:
        async with httpx.AsyncClient() as http:  # someone who does not hold the token
            forged = {"statusUpdate": {"taskId": "night-job", "status": {"state": 3}}}
            assert (await http.post(hook.url, json=forged)).status_code == 401
            headers = {"X-A2A-Notification-Token": "guessed", "Authorization": "Bearer guessed"}
            assert (await http.post(hook.url, json=forged, headers=headers)).status_code == 401
        assert hook.taken == [] and len(hook.refused) == 2

        client = await sdk_client(serve(db, push_url_check=loopback_only), "ops")
        closing.append(client)
        task = await send(client, Part(text="Free some disk space"))
        wrong = push_config(hook, token="a-token-the-hook-never-gave")
        wrong.task_id = task.id
        await client.create_task_push_notification_config(wrong)
        [question] = questions(task)
        done = await send(client, data({"answers": {question["id"]: True}}), task_id=task.id)
        assert done.status.state == COMPLETED and effects() == ["delete /var/log/old.log"]
        await until(lambda: _async(len(hook.refused) == 3), "the wrong token's notification")
        sent = hook.refused[2]
        assert sent["headers"]["x-a2a-notification-token"] == "a-token-the-hook-never-gave"
        assert sent["body"]["statusUpdate"]["taskId"] == task.id
        assert hook.taken == []


async def test_a_refused_notification_is_final_a_failed_one_is_tried_again() -> None:
    """Delivery: a 401 is the receiver's answer (sent once); a 503 is tried again."""
    from a2a.server.context import ServerCallContext
    from a2a.types import TaskStatus

    from interlude.a2a._events import status_event
    from interlude.a2a._push import Pushes

    with webhook(busy=1) as hook:
        pushes = Pushes(lambda context: "ana", loopback_only)
        pushes.backoff = 0.0
        context = ServerCallContext()
        wrong = push_config(hook, token="not-the-hook-s")
        wrong.id = "wrong"
        await pushes.set("t-1", push_config(hook), context)
        await pushes.set("t-1", wrong, context)
        paused = status_event("t-1", TaskStatus(state=INPUT_REQUIRED))
        await pushes.send_notification("t-1", paused)  # returns once each webhook is done
    assert hook.unavailable == 1 and len(hook.taken) == 1  # 503, then taken on the retry
    assert len(hook.refused) == 1  # 401: not sent again
    assert hook.taken[0]["body"]["statusUpdate"]["taskId"] == "t-1"


async def test_webhook_urls_are_screened_before_anything_is_sent(
    db: str, effects_file: Path, closing: list[Client]
) -> None:
    """By default only public http(s) addresses are webhooks (a client cannot make the server
    call its own network): a loopback URL is refused when registered, nothing registered."""
    with webhook() as hook:
        client = await sdk_client(serve(db), "ops")
        closing.append(client)
        task = await send(client, Part(text="Free some disk space"))
        config = push_config(hook)
        config.task_id = task.id
        with pytest.raises(InvalidParamsError, match="refused"):
            await client.create_task_push_notification_config(config)
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert list(listed.configs) == []
        request = message(Part(text="Free some disk space"), context_id="with-hook")
        request.configuration.task_push_notification_config.CopyFrom(push_config(hook))
        with pytest.raises(InvalidParamsError, match="refused"):
            await send_request(client, request)
        assert await open_store(db).load("with-hook") is None  # no task was started
        assert hook.taken == hook.refused == []


async def send_request(client: Client, request: object) -> None:
    async for _ in client.send_message(request):  # type: ignore[arg-type]
        pass
