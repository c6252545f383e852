"""The OpenAPI 3.1 document of the JSON API, written out by hand (it is small)."""

from __future__ import annotations

from typing import Any

__all__ = ["document"]

_ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "interrupt_id": {"type": ["string", "null"]},
        "path": {"type": ["array", "null"], "items": {"type": ["string", "integer"]}},
        "retry_after": {"type": "integer", "description": "with 503: seconds to wait"},
    },
}

_QUESTION: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "source", "shown", "raised_at", "expired"],
    "properties": {
        "id": {
            "type": "string",
            "description": "the question's answer key, <session>/<question id>: it names its "
            "session, so an answer meant for another session is refused",
        },
        "question_id": {"type": "string", "description": "the question's id in its session"},
        "name": {"type": "string"},
        "node": {
            "type": ["string", "null"],
            "description": "the node of a graph or swarm that asked it (outer/inner when nested)",
        },
        "reason": {"description": "any JSON the question carries"},
        "source": {"type": "string"},
        "tool": {"type": ["string", "null"]},
        "input": {"type": ["object", "null"]},
        "shown": {"type": "string", "description": "Interrupt.digest: pass it back as shown"},
        "response_schema": {"type": ["object", "null"]},
        "raised_at": {"type": "number"},
        "expires_at": {"type": ["number", "null"]},
        "expired": {"type": "boolean"},
        "has_default": {"type": "boolean"},
        "default": {},
        "approvers": {
            "type": "array",
            "items": {"type": "string"},
            "description": "the groups whose members may answer (empty: anyone)",
        },
        "quorum": {"type": "integer", "description": "how many people must give one answer"},
        "escalate_to": {"type": "array", "items": {"type": "string"}},
        "escalates_at": {
            "type": ["number", "null"],
            "description": "when escalate_to may answer too (epoch seconds)",
        },
        "escalated": {"type": "boolean"},
        "votes": {
            "type": ["object", "null"],
            "description": "in a session: the votes so far toward the quorum",
            "properties": {"answer": {}, "by": {"type": "array", "items": {"type": "string"}}},
        },
        "may_answer": {
            "type": "boolean",
            "description": "in a session: whether the token's approver may answer it now",
        },
    },
}

_PENDING: dict[str, Any] = {
    "allOf": [
        {"$ref": "#/components/schemas/Question"},
        {
            "type": "object",
            "required": ["session", "age_seconds"],
            "properties": {
                "session": {"type": "string"},
                "agent": {"type": ["string", "null"]},
                "age_seconds": {"type": "number"},
            },
        },
    ]
}

_RECORDED: dict[str, Any] = {
    "type": "object",
    "required": ["seq", "interrupt_id", "by", "at"],
    "properties": {
        "seq": {"type": "integer"},
        "interrupt_id": {"type": "string"},
        "answer": {},
        "by": {"type": "string"},
        "at": {"type": "number"},
        "shown": {"type": ["string", "null"]},
    },
}

_SESSION: dict[str, Any] = {
    "type": "object",
    "required": ["session", "agent", "version", "running", "stopped"],
    "properties": {
        "session": {"type": "string"},
        "agent": {"type": ["string", "null"]},
        "kind": {"enum": ["agent", "graph", "swarm"], "description": "whose session it is"},
        "version": {"type": "integer"},
        "running": {"type": "boolean"},
        "stopped": {"type": "boolean"},
        "messages": {"type": "array", "items": {"type": "object"}},
        "interrupts": {"type": "array", "items": {"$ref": "#/components/schemas/Question"}},
        "recorded": {"type": "array", "items": {"$ref": "#/components/schemas/RecordedAnswer"}},
        "audit": {"type": "array", "items": {"type": "object"}},
        "decisions": {
            "type": "object",
            "description": "approval decisions remembered now, by tool name: "
            '{"approve", "scope": "run" | "session", "note"?}',
        },
        "workflow": {
            "type": "object",
            "description": "on Temporal only: the workflow's status, run id, task queue, start "
            "and close times, and once it has ended its stop_reason and reply, or its failure",
        },
    },
}

_ANSWERS: dict[str, Any] = {
    "type": "object",
    "required": ["answers"],
    "additionalProperties": False,
    "properties": {
        "answers": {
            "type": "object",
            "description": "interrupt id -> answer (any JSON meeting the question's schema)",
            "minProperties": 1,
            "additionalProperties": {},
        },
        "shown": {
            "type": "object",
            "description": "interrupt id -> the digest of the question as the person saw it",
            "additionalProperties": {"type": "string"},
        },
    },
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json({"$ref": "#/components/schemas/Error"}, description)


_SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "the session id",
}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def document() -> dict[str, Any]:
    """The API's OpenAPI 3.1 document."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Interlude inbox",
            "version": "1",
            "description": "Questions that paused agents wait on, and their answers. A worker "
            "applies recorded answers; recording returns at once.",
        },
        "security": [{"bearer": []}],
        "components": _components(),
        "paths": {
            "/api/pending": {"get": _list_pending()},
            "/api/sessions/{session_id}": {"get": _show_session()},
            "/api/sessions/{session_id}/answers": {"post": _record_answers()},
        },
    }


def _components() -> dict[str, Any]:
    """The security scheme (a bearer token) and the schemas the operations refer to."""
    return {
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "a token from the server's tokens file or $INTERLUDE_TOKENS",
            }
        },
        "schemas": {
            "Error": _ERROR,
            "Question": _QUESTION,
            "Pending": _PENDING,
            "RecordedAnswer": _RECORDED,
            "Session": _SESSION,
            "Answers": _ANSWERS,
        },
    }


def _unauthorized() -> dict[str, Any]:
    return _error("no token, or a wrong one")


def _unavailable() -> dict[str, Any]:
    response = _error("the session store is unavailable just now (try again after Retry-After)")
    response["headers"] = {
        "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}
    }
    return response


def _list_pending() -> dict[str, Any]:
    """``GET /api/pending``."""
    seconds = {"type": "number", "minimum": 0}
    return {
        "operationId": "listPending",
        "summary": "The questions waiting for an answer, oldest first",
        "parameters": [
            _query("agent", {"type": "string"}, "only sessions of this agent"),
            _query("name", {"type": "string"}, "only questions of this name"),
            _query("tool", {"type": "string"}, "only questions about this tool"),
            _query("older_than", seconds, "raised at least this many seconds ago"),
            _query("expiring_within", seconds, "deadline within this many seconds"),
            _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "at most"),
        ],
        "responses": {
            "200": _json(
                {
                    "type": "object",
                    "required": ["pending"],
                    "properties": {
                        "pending": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Pending"},
                        }
                    },
                },
                "the pending questions",
            ),
            "400": _error("a malformed query parameter"),
            "401": _unauthorized(),
            "503": _unavailable(),
        },
    }


def _show_session() -> dict[str, Any]:
    """``GET /api/sessions/{session_id}``."""
    return {
        "operationId": "showSession",
        "summary": "A session: conversation, pending questions, recorded answers, audit trail",
        "parameters": [_SESSION_ID],
        "responses": {
            "200": _json({"$ref": "#/components/schemas/Session"}, "the session"),
            "401": _unauthorized(),
            "404": _error("no such session"),
            "503": _unavailable(),
            "504": _error("on Temporal: the workflow did not answer its query in time"),
        },
    }


def _record_answers() -> dict[str, Any]:
    """``POST /api/sessions/{session_id}/answers``."""
    return {
        "operationId": "recordAnswers",
        "summary": "Record answers for a worker to apply, as the token's approver",
        "parameters": [_SESSION_ID],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Answers"}}},
        },
        "responses": {
            "202": _json(
                {
                    "type": "object",
                    "required": ["session", "recorded"],
                    "properties": {
                        "session": {"type": "string"},
                        "recorded": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/RecordedAnswer"},
                        },
                    },
                },
                "recorded; a worker carries the session on (on Temporal: accepted "
                "by the workflow, which carries the run on)",
            ),
            "400": _error(
                "the body is not the expected JSON (or nests more than 64 levels, "
                "or holds a lone surrogate)"
            ),
            "401": _unauthorized(),
            "403": _error(
                "the approver is in none of the groups that may answer the question (now)"
            ),
            "404": _error("no such session"),
            "413": _error("the body is larger than 1 MiB"),
            "409": _error(
                "not paused, no such pending question, its deadline passed, it "
                "already has a recorded answer, or another vote on it is being applied"
            ),
            "422": _error(
                "an answer does not fit its question (path names the field), or "
                "the question changed since it was shown"
            ),
            "503": _unavailable(),
            "504": _error(
                "on Temporal: no worker took the answer in time (it may still be applied later)"
            ),
        },
    }
