"""An AG-UI client (``@ag-ui/client`` under Node) drives Interlude agents served by
``interlude serve --app``: a pause and its answer, several questions at once, partial answers."""

from __future__ import annotations

from typing import Any

import httpx

from interlude import Inbox
from tests.support import wait_for

from .harness import TOKEN, Client, Served, past, stored


def test_an_ag_ui_client_drives_an_agent_through_a_pause_and_an_answer(
    served: Served, client: Client, thread: str
) -> None:
    asked, answered = client.drive(
        served.url, thread, [{"prompt": "pay ana"}, {"answer": {"approve": True}}]
    )
    assert asked["error"] is None and asked["thrown"] is None
    assert asked["outcome"] == "interrupt"
    [question] = asked["interrupts"]
    assert question["toolCallId"] == "t1" and question["reason"] == "approval"
    assert question["message"] == "May the agent run pay with this input?"
    assert question["responseSchema"]["anyOf"][0] == {"type": "boolean"}
    assert question["metadata"]["interlude"]["toolUse"] == {
        "name": "pay",
        "input": {"to": "ana", "cents": 100},
    }
    assert asked["types"][0] == "RUN_STARTED" and asked["types"][-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in asked["types"] and asked["pending"] == [question["id"]]

    assert answered["error"] is None and answered["outcome"] == "success"
    assert answered["results"] == ["paid 100 to ana"]
    assert answered["text"][-1] == "done: paid 100 to ana"
    assert answered["pending"] == []
    assert served.paid.read_text() == "ana 100\n"
    [entry] = Inbox(f"sqlite:///{served.db}").audit(thread)
    # the id AG-UI shows names the thread: <thread>/<question id>
    assert (f"{thread}/{entry['interrupt_id']}", entry["by"]) == (question["id"], "ana")


def test_several_questions_at_once_are_one_outcome_answered_in_one_resume(
    served: Served, client: Client, thread: str
) -> None:
    asked, answered = client.drive(
        served.url, thread, [{"prompt": "pay ana and bob"}, {"answer": {"approve": True}}]
    )
    assert [i["toolCallId"] for i in asked["interrupts"]] == ["t1", "t2"]
    assert len({i["id"] for i in asked["interrupts"]}) == 2
    assert answered["outcome"] == "success" and answered["error"] is None
    # the two calls run concurrently: their results stream in the order they finish
    assert sorted(answered["results"]) == ["paid 100 to ana", "paid 250 to bob"]
    assert sorted(served.paid_lines()) == ["ana 100", "bob 250"]


def test_a_partial_resume_sends_the_open_question_again_never_success(
    served: Served, client: Client, thread: str
) -> None:
    asked, partly = client.drive(
        served.url,
        thread,
        [{"prompt": "pay ana and bob"}, {"resumeLast": {"1": {"approve": True}}}],
    )
    ana, _ = asked["interrupts"]
    assert partly["error"] is None and partly["outcome"] == "interrupt"
    assert [i["id"] for i in partly["interrupts"]] == [ana["id"]]  # bob's is answered
    assert partly["interrupts"][0]["metadata"] == ana["metadata"]
    assert served.paid.read_text() == "bob 250\n"
    # Another client (another HttpAgent, which kept nothing) answers the question left open.
    [done] = client.drive(
        served.url,
        thread,
        [{"resume": [{"interruptId": ana["id"], "status": "resolved", "payload": True}]}],
    )
    assert done["outcome"] == "success" and done["text"] == [
        "done: paid 100 to ana; paid 250 to bob"
    ]
    assert served.paid.read_text() == "bob 250\nana 100\n"


def test_cancelled_declines_the_call_it_never_runs(
    served: Served, client: Client, thread: str
) -> None:
    _, cancelled = client.drive(served.url, thread, [{"prompt": "pay ana"}, {"cancel": True}])
    assert cancelled["outcome"] == "success" and cancelled["error"] is None
    assert cancelled["results"][0].startswith("error: ")
    assert not served.paid.exists()
    [entry] = Inbox(f"sqlite:///{served.db}").audit(thread)
    assert (entry["answer"], entry["by"]) == (False, "ana")


def test_an_expired_question_is_cancelled_by_its_deadline(
    served: Served, client: Client, thread: str
) -> None:
    [asked] = client.drive(served.url, thread, [{"prompt": "restart now"}], agent="asker")
    [question] = asked["interrupts"]
    assert question["responseSchema"] == {"enum": ["low", "high"], "type": "string"}
    assert question["reason"] == "Which priority?" and question["expiresAt"].endswith("Z")
    past(question["expiresAt"])
    cancel = {"interruptId": question["id"], "status": "cancelled"}
    [done] = client.drive(served.url, thread, [{"resume": [cancel]}], agent="asker")
    assert done["outcome"] == "success", done
    [entry] = Inbox(f"sqlite:///{served.db}").audit(thread)
    assert (entry["by"], entry["expired"]) == ("expiry", True)


def test_the_asking_process_is_not_the_answering_one(serve: Any, client: Client) -> None:
    asking = serve()
    [asked] = client.drive(asking.url, "th-6", [{"prompt": "pay ana"}])
    asking.kill()
    answering = serve()  # another process on the same store
    [question] = asked["interrupts"]
    entry = {"interruptId": question["id"], "status": "resolved", "payload": True}
    entry["metadata"] = question["metadata"]
    [done] = client.drive(answering.url, "th-6", [{"resume": [entry]}])
    assert done["outcome"] == "success" and done["results"] == ["paid 100 to ana"]
    assert answering.paid.read_text() == "ana 100\n"


def test_without_a_token_the_client_gets_401_and_nothing_runs(
    served: Served, client: Client, thread: str
) -> None:
    before = stored(served.db)
    [refused] = client.drive(
        served.url, thread, [{"prompt": "pay ana"}], token="not-a-token-at-all"
    )
    assert "401" in (refused["thrown"] or ""), refused
    response = httpx.post(f"{served.url}/ag-ui/payer", json={})
    assert response.status_code == 401
    # nothing at all was kept (the store is every test's: it is compared, not required empty)
    assert stored(served.db) == before and not served.paid.exists()


def test_an_unknown_agent_is_404(served: Served, client: Client, thread: str) -> None:
    [unknown] = client.drive(served.url, thread, [{"prompt": "go"}], agent="nobody")
    assert "404" in (unknown["thrown"] or ""), unknown


def test_a_client_that_leaves_mid_run_does_not_stop_the_answered_run(
    serve: Any, client: Client
) -> None:
    served = serve(AGUI_SLOW="1")  # the tool takes a second: the client leaves while it runs
    [asked] = client.drive(served.url, "th-9", [{"prompt": "pay ana"}])
    [question] = asked["interrupts"]
    body = {"threadId": "th-9", "runId": "r2", "messages": []}
    body["resume"] = [{"interruptId": question["id"], "status": "resolved", "payload": True}]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("POST", f"{served.url}/ag-ui/payer", json=body, headers=headers) as r:
        first = next(r.iter_lines())
        assert '"RUN_STARTED"' in first  # then the client goes away, mid-tool
    inbox = Inbox(f"sqlite:///{served.db}")

    def finished() -> bool:
        return inbox.session("th-9").messages[-1].text == "done: paid 100 to ana"

    wait_for(finished, what="the run the client left to finish", process=served.process)
    view = inbox.session("th-9")
    assert view.messages[-1].text == "done: paid 100 to ana"  # the run went on to its end
    assert not view.interrupts and not view.stopped and not view.running
    assert served.paid.read_text() == "ana 100\n"
