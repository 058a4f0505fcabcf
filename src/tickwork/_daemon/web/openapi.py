"""The OpenAPI 3.1 description of the JSON API, served at ``/api/openapi.json``.

Written by hand beside `tickwork._daemon.web.api`; a test checks every endpoint's real
answers against it.
"""

from __future__ import annotations

from typing import Any

from tickwork._daemon.oneoffs import COUNTED
from tickwork.stores import DELIVERIES, MISSED_POLICIES
from tickwork.stores.contract import JOB_STATES

__all__ = ["document"]

_TIME = {"type": "string", "description": "ISO 8601 UTC time"}
_OPT_TIME = {"type": ["string", "null"], "description": "ISO 8601 UTC time, or null"}
_NOTE = {"type": ["string", "null"], "description": "why, recorded with the action"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": sorted(required),
    }


_PAUSE = _obj({"by": {"type": "string"}, "at": _TIME, "note": _NOTE, "until": _OPT_TIME})

_SCHEMAS: dict[str, Any] = {
    "Error": _obj({"error": {"type": "string", "description": "what was refused and why"}}),
    "Job": _obj(
        {
            "job": {"type": "string"},
            "id": {"type": "string", "description": "namespace/name, as stored"},
            "schedule": {"type": ["string", "null"]},
            "paused": {"type": "boolean"},
            "pause": {"oneOf": [_PAUSE, {"type": "null"}]},
            "waiting": {"type": "object", "additionalProperties": {"type": "integer"}},
            "waiting_runs": {"type": "integer"},
            "running": {"type": "integer"},
            "lost": {"type": "array", "items": {"type": "object"}},
            "next_run": _OPT_TIME,
            "last_scheduled": _OPT_TIME,
            "last_started": _OPT_TIME,
            "last_ended": _OPT_TIME,
            "outcome": {"type": ["string", "null"]},
            "error": {"type": ["string", "null"]},
            "last_success": _OPT_TIME,
            "consecutive_failures": {"type": ["integer", "null"]},
        }
    ),
    "Jobs": _obj(
        {
            "jobs": {"type": "array", "items": _ref("Job"), "description": "this page, by name"},
            "total": {"type": "integer", "description": "jobs that match q and state"},
            "counts": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "jobs that match q: all, and per state",
            },
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
            "next": {
                "type": ["string", "null"],
                "description": "the next page's path and query, or null on the last page",
            },
        }
    ),
    "HistoryItem": _obj(
        {
            "kind": {"enum": ["slot", "action"]},
            "seq": {"type": "integer"},
            "job": {"type": "string"},
            "id": {"type": "string"},
        },
        {
            "scheduled": _TIME,
            "outcome": {"type": "string"},
            "error": {"type": ["string", "null"]},
            "output": {"type": ["string", "null"]},
            "action": {"type": "string"},
            "actor": {"type": "string", "description": "who acted: a token's name over HTTP"},
            "at": _TIME,
            "note": _NOTE,
            "detail": {"type": ["string", "null"]},
        },
    ),
    "History": _obj({"items": {"type": "array", "items": _ref("HistoryItem")}}),
    "Waiting": _obj(
        {
            "job": {"type": "string"},
            "waiting": {
                "type": "array",
                "items": _obj(
                    {"scheduled": _TIME, "origin": {"type": "string"}, "why": {"type": "string"}}
                ),
            },
        }
    ),
    "Done": _obj(
        {
            "job": {"type": "string"},
            "action": {"enum": ["pause", "resume", "trigger", "skip-next", "backfill", "cancel"]},
            "by": {"type": "string", "description": "the name of the token that acted"},
            "message": {"type": "string", "description": "what the CLI verb prints"},
        },
        {
            "paused": {"type": "boolean"},
            "until": _OPT_TIME,
            "resumed": {"type": "boolean"},
            "result": {"enum": ["queued", "skipped"]},
            "skipped": _OPT_TIME,
            "next_run": _OPT_TIME,
            "dry_run": {"type": "boolean"},
            "queued": {"type": "integer"},
            "first": _OPT_TIME,
            "last": _OPT_TIME,
            "before_first_slot": {"type": "integer"},
            "left_out": {"type": "integer"},
            "cancelled": {"type": "integer"},
            "slots": {"type": "array", "items": _TIME},
        },
    ),
}

_COUNT = {"type": "integer", "minimum": 0}
_SCHEMAS |= {
    "Enqueued": _obj(
        {
            "id": {"type": "string", "description": "~ and 28 hex digits, or ~key: and the key"},
            "run_at": _TIME,
            "created": {"type": "boolean", "description": "false: its key was pending already"},
            "key": {"type": ["string", "null"]},
            "by": {"type": "string", "description": "the name of the token that enqueued"},
        }
    ),
    "Cancelled": _obj(
        {"id": {"type": "string"}, "cancelled": {"enum": [True]}, "by": {"type": "string"}}
    ),
    "OneOffs": _obj(
        {
            "oneoffs": {
                "type": "array",
                "description": "per function, by import path (tickwork jobs' summary)",
                "items": _obj(
                    {"queue": {"type": "string", "description": "the function's import path"}}
                    | {name: _COUNT for name in COUNTED}
                ),
            }
        }
    ),
}
_SECONDS = {
    "type": ["number", "string"],
    "description": "seconds, or a duration such as 30s",
}
#: The body of ``POST /api/enqueue`` (`tickwork._daemon.oneoffs.FIELDS`).
_ENQUEUE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["func"],
    "properties": {
        "func": {"type": "string", "description": "import path 'package.module:function'"},
        "args": {"type": "array", "description": "positional arguments"},
        "kwargs": {"type": "object", "description": "keyword arguments"},
        "at": {
            "type": ["string", "number"],
            "description": "when: an ISO 8601 time (local time of the daemon without an"
            " offset) or POSIX seconds; neither at nor delay: now",
        },
        "delay": {**_SECONDS, "description": "or after this long: seconds or a duration"},
        "key": {
            "type": ["string", "null"],
            "description": "idempotency key: while one with it is pending or running, nothing"
            " is added (200, created false)",
        },
        "options": {
            "type": "object",
            "description": "the run's options, as tickwork enqueue takes them",
            "additionalProperties": False,
            "properties": {
                "retries": {"type": "integer", "minimum": 0},
                "retry_backoff": _SECONDS,
                "retry_backoff_max": _SECONDS,
                "timeout": _SECONDS,
                "kill_grace": _SECONDS,
                "isolation": {"enum": ["thread", "process"]},
                "pool": {"type": ["string", "null"]},
                "grace": {**_SECONDS, "type": ["number", "string", "null"]},
                "missed": {"enum": list(MISSED_POLICIES)},
                "delivery": {"enum": list(DELIVERIES)},
            },
        },
    },
}

_BODIES: dict[str, dict[str, Any]] = {
    "pause": {
        "note": _NOTE,
        "until": {"type": "string", "description": "a duration from now (2h) or an ISO time"},
    },
    "resume": {"note": _NOTE},
    "trigger": {"note": _NOTE},
    "skip-next": {"note": _NOTE},
    "backfill": {
        "note": _NOTE,
        "from": {"type": "string", "description": "as --from: ISO time or a duration back"},
        "to": {"type": "string", "description": "as --to: ISO time, a duration back, or now"},
        "dry_run": {"type": "boolean"},
        "max": {"type": "integer", "minimum": 1, "description": "as --max (default 1000)"},
        "yes": {"type": "boolean", "description": "as --yes: past max"},
    },
    "cancel": {
        "note": _NOTE,
        "all_waiting": {"type": "boolean"},
        "slot": {"type": "string", "description": "the waiting run due at this ISO time"},
    },
}

_SUMMARIES = {
    "pause": "Pause a job (tickwork pause)",
    "resume": "Resume a paused job (tickwork resume)",
    "trigger": "Run a job once now (tickwork trigger)",
    "skip-next": "Give up a job's next slot (tickwork skip-next)",
    "backfill": "Queue a job's past slots (tickwork backfill)",
    "cancel": "Cancel waiting runs (tickwork cancel --all-waiting / --slot)",
}


#: What each refusal means; `_EVERY` of them may answer any operation.
_WORDS = {
    400: "bad input, or a Host header that is not this server's",
    401: "no or a wrong token",
    403: "cross-site, or control off",
    404: "no such job (or pending one-off)",
    409: "the job's state refuses",
    413: "the body is over 64 KiB",
    415: "a body that is neither JSON nor a form",
    429: "too many wrong tokens from this client: try again after Retry-After seconds",
    503: "the state cannot be used now",
}
_EVERY = (400, 401, 429, 503)
#: The bodies an action takes: JSON, or a form's fields (what the pages post).
_ACCEPTED = ("application/json", "application/x-www-form-urlencoded")


def _answers(ok: str, *codes: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "200": {"description": "ok", "content": {"application/json": {"schema": _ref(ok)}}}
    }
    for code in sorted({*_EVERY, *codes}):
        out[str(code)] = {
            "description": _WORDS[code],
            "content": {"application/json": {"schema": _ref("Error")}},
        }
    out["429"]["headers"] = {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}}
    return out


_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_LISTING = [
    {"name": "q", "in": "query", "schema": {"type": "string"}, "description": "name contains"},
    {"name": "state", "in": "query", "schema": {"enum": list(JOB_STATES)}},
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 100}},
    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
]
_QUERY = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}},
    {"name": "outcome", "in": "query", "schema": {"type": "string"}},
    {"name": "since", "in": "query", "schema": {"type": "string"}},
]


def _get(summary: str, ok: str, parameters: list[Any], *codes: int) -> dict[str, Any]:
    return {
        "get": {"summary": summary, "parameters": parameters, "responses": _answers(ok, *codes)}
    }


def _paths() -> dict[str, Any]:
    paths: dict[str, Any] = {
        "/api/jobs": _get("A page of the jobs (tickwork jobs --json)", "Jobs", _LISTING),
        "/api/history": _get("The ledger and actions (tickwork history --json)", "History", _QUERY),
        "/api/jobs/{name}": _get("One job", "Job", [_NAME], 404),
        "/api/jobs/{name}/history": _get(
            "One job's ledger and actions", "History", [_NAME, *_QUERY], 404
        ),
        "/api/jobs/{name}/waiting": _get(
            "One job's waiting runs (tickwork cancel --list)", "Waiting", [_NAME], 404
        ),
    }
    paths["/api/oneoffs"] = _get(
        "The one-offs per function (tickwork jobs' summary)", "OneOffs", []
    )
    enqueued = _answers("Enqueued", 403, 413, 415)
    enqueued["200"]["description"] = "its key was pending: nothing added"
    paths["/api/enqueue"] = {
        "post": {
            "summary": "Enqueue a one-off (tickwork enqueue); the function is not imported",
            "security": [{"bearer": []}],
            "requestBody": {"content": {"application/json": {"schema": _ENQUEUE}}},
            "responses": {"201": {**enqueued["200"], "description": "added"}, **enqueued},
        }
    }
    paths["/api/enqueue/{ref}"] = {
        "delete": {
            "summary": "Cancel a pending one-off (tickwork enqueue --cancel)",
            "parameters": [
                {
                    "name": "ref",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                    "description": "its id (~...) or its key, URL-encoded",
                }
            ],
            "security": [{"bearer": []}],
            "responses": _answers("Cancelled", 403, 404),
        }
    }
    for action, fields in _BODIES.items():
        body = {"type": "object", "properties": fields, "additionalProperties": False}
        if action == "backfill":
            body["required"] = ["from", "to"]
        paths[f"/api/jobs/{{name}}/{action}"] = {
            "post": {
                "summary": _SUMMARIES[action],
                "parameters": [_NAME],
                "security": [{"bearer": []}],
                "requestBody": {"content": {kind: {"schema": body} for kind in _ACCEPTED}},
                "responses": _answers("Done", 403, 404, 409, 413, 415),
            }
        }
    return paths


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the JSON API."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "tickwork run --http",
            "version": "1",
            "description": "Read and control the jobs of one tickwork daemon. Writes need"
            " Authorization: Bearer SECRET of a token given with --http-token or"
            " --http-token-file; the token's name is recorded as who acted.",
        },
        "paths": _paths(),
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
    }
