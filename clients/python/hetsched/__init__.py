"""A client of the hetsched HTTP API (API.md), with Python's standard library only.

    from hetsched import Client
    c = Client("http://127.0.0.1:7070")            # or $HETSCHED_SERVER, $HETSCHED_TOKEN
    t = c.submit({"command": ["python3", "train.py"], "resources": {"nvidia.com/gpu": 1}})
    for task in c.tasks(state="running"):           # every page, lazily
        print(task.id, task.node, task.devices)
    with c.lease(gpus=2) as devices:                # placed, used, then completed
        print([d.id for d in devices])
    for ev in c.watch(since=0):                     # the event stream
        print(ev.kind, ev.id, ev.state)
    for r in c.history(since="7d", user="ann"):     # finished work, as sacct
        print(r.id, r.state, r.model, r.device_hours)
    print(c.usage(since="7d", by="queue,model").rows)  # as sreport

With no token the client names its user as the CLI does ($USER); with a token
the server knows who it is.

Errors are APIError with the API's code, message and field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterator, Optional

__all__ = ["Client", "APIError", "Task", "Job", "Device", "Event", "AccountingRecord", "UsageReport", "UsageRow"]

DEFAULT_SERVER = "http://127.0.0.1:7070"
FINAL = {"succeeded", "failed", "timeout", "cancelled", "expired", "skipped"}


class APIError(Exception):
    """An error answer: status, code (invalid_argument, not_found, ...), message, field."""

    def __init__(self, status: int, code: str, message: str, field: str = ""):
        super().__init__(f"{message} ({status} {code}{', field ' + field if field else ''})")
        self.status, self.code, self.message, self.field = status, code, message, field


@dataclasses.dataclass
class Device:
    type: str
    id: str
    model: str = ""
    share: int = 0

    @classmethod
    def of(cls, d: dict) -> "Device":
        return cls(type=d.get("type", ""), id=d.get("id", ""), model=d.get("model", ""), share=d.get("share", 0))


@dataclasses.dataclass
class Task:
    id: str
    state: str
    name: str = ""
    queue: str = ""
    node: str = ""
    devices: list = dataclasses.field(default_factory=list)
    exit_code: Optional[int] = None
    reason: str = ""
    attempt: int = 0
    service: str = ""
    user: str = ""
    raw: dict = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict) -> "Task":
        return cls(id=d.get("id", ""), state=d.get("state", ""), name=d.get("name", ""), queue=d.get("queue", ""),
                   node=d.get("node", ""), devices=[Device.of(x) for x in d.get("devices") or []],
                   exit_code=d.get("exitCode"), reason=d.get("reason", ""), attempt=d.get("attempt", 0),
                   service=d.get("service", ""), user=d.get("user", ""), raw=d)

    @property
    def done(self) -> bool:
        return self.state in FINAL


@dataclasses.dataclass
class Job:
    id: str
    state: str
    counts: dict
    tasks: list
    raw: dict = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict) -> "Job":
        return cls(id=d.get("id", ""), state=d.get("state", ""), counts=d.get("counts") or {},
                   tasks=[Task.of(t) for t in d.get("tasks") or []], raw=d)


@dataclasses.dataclass
class AccountingRecord:
    """What is kept of a task once it ended (GET /api/v1/accounting)."""
    id: str
    state: str
    user: str = ""
    queue: str = ""
    job: str = ""
    tenant: str = ""
    node: str = ""
    model: str = ""
    exit_code: Optional[int] = None
    submitted: str = ""
    started: str = ""
    finished: str = ""
    attempts: int = 0
    cpu_hours: float = 0.0
    device_hours: dict = dataclasses.field(default_factory=dict)
    raw: dict = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, d: dict) -> "AccountingRecord":
        return cls(id=d.get("id", ""), state=d.get("state", ""), user=d.get("user", ""), queue=d.get("queue", ""),
                   job=d.get("job", ""), tenant=d.get("tenant", ""), node=d.get("node", ""), model=d.get("model", ""),
                   exit_code=d.get("exitCode"), submitted=d.get("submitted", ""), started=d.get("started", ""),
                   finished=d.get("finished", ""), attempts=d.get("attempts", 0), cpu_hours=d.get("cpuHours", 0.0),
                   device_hours=d.get("deviceHours") or {}, raw=d)


@dataclasses.dataclass
class UsageRow:
    group: dict
    tasks: int
    cpu_hours: float
    device_hours: dict

    @classmethod
    def of(cls, d: dict) -> "UsageRow":
        return cls(group=d.get("group") or {}, tasks=d.get("tasks", 0), cpu_hours=d.get("cpuHours", 0.0),
                   device_hours=d.get("deviceHours") or {})


@dataclasses.dataclass
class UsageReport:
    """What the work used over [since, until), grouped by the fields of by (GET /api/v1/usage)."""
    since: str
    until: str
    by: list
    rows: list
    total: UsageRow


@dataclasses.dataclass
class Event:
    seq: int
    kind: str
    id: str
    state: str
    node: str = ""
    reason: str = ""
    time: str = ""


class Client:
    """One server (its URL) and a token; every call has a timeout."""

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None, timeout: float = 30.0):
        self.server = (server or os.environ.get("HETSCHED_SERVER") or DEFAULT_SERVER).rstrip("/")
        self.token = token if token is not None else os.environ.get("HETSCHED_TOKEN", "")
        self.timeout = timeout

    # -- the transport --
    def _request(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            raise _api_error(e) from None

    def _json(self, method: str, path: str, body: Any = None) -> Any:
        with self._request(method, path, body) as resp:
            raw = resp.read()
            return json.loads(raw) if raw else None

    def _user(self, spec: dict) -> dict:
        """spec naming the local user when no token does (as the CLI: $USER)."""
        if self.token or "user" in spec:
            return spec
        with contextlib.suppress(Exception):
            return dict(spec, user=getpass.getuser())
        return spec

    # -- tasks --
    def submit(self, task: dict) -> Task:
        """Submit one task (API.md "Task"); returns it as the server has it."""
        out = self._json("POST", "/api/v1/tasks", self._user(task))
        ids = out.get("ids") or [out.get("id")]
        return self.task(ids[0])

    def task(self, task_id: str) -> Task:
        return Task.of(self._json("GET", "/api/v1/tasks/" + urllib.parse.quote(task_id, safe="")))

    def tasks(self, state: str = "", queue: str = "", job: str = "", service: str = "", selector: str = "",
              user: str = "", page: int = 1000) -> Iterator[Task]:
        """Every task matching the filters, page by page (state may list several: "pending,running")."""
        q = {"state": state, "queue": queue, "job": job, "service": service, "selector": selector, "user": user}
        for t in self._pages("/api/v1/tasks", "tasks", q, page):
            yield Task.of(t)

    def _pages(self, path: str, key: str, q: dict, page: int) -> Iterator[dict]:
        """Every item of a paged listing, following its cursors."""
        q = {k: v for k, v in dict(q, limit=str(page)).items() if v}
        cursor = ""
        while True:
            if cursor:
                q["cursor"] = cursor
            out = self._json("GET", path + "?" + urllib.parse.urlencode(q))
            yield from out.get(key) or []
            cursor = out.get("cursor", "")
            if not cursor:
                return

    # -- accounting --
    def history(self, since: str = "", until: str = "", page: int = 1000, **filters: str) -> Iterator[AccountingRecord]:
        """Finished work, oldest first, as sacct lists it: since and until are RFC 3339, a date or an age
        ("7d", "36h"; default the last 24 hours); filters: user, queue, job, node, model, state, tenant."""
        for r in self._pages("/api/v1/accounting", "records", dict(filters, since=since, until=until), page):
            yield AccountingRecord.of(r)

    def usage(self, since: str = "", until: str = "", by: str = "queue", **filters: str) -> UsageReport:
        """What the work used over a range (default the last 7 days), grouped by the fields of by
        (tenant, user, queue, model, node, state, job), as sreport reports it."""
        q = {k: v for k, v in dict(filters, since=since, until=until, by=by).items() if v}
        d = self._json("GET", "/api/v1/usage?" + urllib.parse.urlencode(q))
        return UsageReport(since=d.get("since", ""), until=d.get("until", ""), by=d.get("by") or [],
                           rows=[UsageRow.of(r) for r in d.get("rows") or []], total=UsageRow.of(d.get("total") or {}))

    def cancel(self, task_id: str) -> Task:
        return Task.of(self._json("DELETE", "/api/v1/tasks/" + urllib.parse.quote(task_id, safe="")))

    def wait(self, task_id: str, timeout: Optional[float] = None, every: float = 0.2) -> Task:
        """The task once it is finished (or TimeoutError after timeout seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            t = self.task(task_id)
            if t.done:
                return t
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"task {task_id} still {t.state} after {timeout}s")
            time.sleep(every)
            every = min(every * 2, 1.0)

    def logs(self, task_id: str, follow: bool = False) -> Iterator[str]:
        """The task's output, line by line; with follow, until it ends."""
        path = "/api/v1/tasks/" + urllib.parse.quote(task_id, safe="") + "/logs" + ("?follow=true" if follow else "")
        with self._request("GET", path, timeout=None if follow else self.timeout) as resp:
            for line in resp:
                yield line.decode(errors="replace").rstrip("\n")

    # -- leases --
    def complete(self, task_id: str, exit_code: int = 0) -> None:
        self._json("POST", "/api/v1/tasks/" + urllib.parse.quote(task_id, safe="") + "/complete", {"exitCode": exit_code})

    def renew(self, task_id: str) -> None:
        self._json("POST", "/api/v1/tasks/" + urllib.parse.quote(task_id, safe="") + "/renew", {})

    @contextlib.contextmanager
    def lease(self, gpus: float = 0, resources: Optional[dict] = None, wait: str = "30s", **task: Any):
        """Devices held for the with block: placed (POST /schedule), yielded, then completed
        (exit 1 when the block raised). Raises APIError when not placed within wait."""
        res = dict(resources or {})
        if gpus:
            res["nvidia.com/gpu"] = gpus
        spec = self._user(dict(task, resources=res))
        out = self._json("POST", "/api/v1/schedule?wait=" + urllib.parse.quote(wait), spec)
        t = Task.of(out if "id" in out else (out.get("tasks") or [{}])[0])
        if t.state not in ("scheduled", "running"):
            with contextlib.suppress(APIError):
                self.cancel(t.id)
            raise APIError(409, "not_placed", f"lease {t.id} not placed within {wait}: {t.state} {t.reason}".strip())
        failed = True
        try:
            yield t.devices
            failed = False
        finally:
            with contextlib.suppress(APIError):
                self.complete(t.id, 1 if failed else 0)

    # -- jobs --
    def submit_job(self, job: dict) -> Job:
        return Job.of(self._json("POST", "/api/v1/jobs", self._user(job)))

    def job(self, job_id: str) -> Job:
        return Job.of(self._json("GET", "/api/v1/jobs/" + urllib.parse.quote(job_id, safe="")))

    def cancel_job(self, job_id: str) -> Job:
        return Job.of(self._json("DELETE", "/api/v1/jobs/" + urllib.parse.quote(job_id, safe="")))

    # -- the cluster and events --
    def cluster(self) -> dict:
        return self._json("GET", "/api/v1/cluster")

    def watch(self, since: Optional[int] = None, timeout: Optional[float] = None) -> Iterator[Event]:
        """The event stream (Server-Sent Events) from event since (None: from now)."""
        path = "/api/v1/events" + ("" if since is None else f"?since={since}")
        with self._request("GET", path, timeout=timeout) as resp:
            data = ""
            for raw in resp:
                line = raw.decode(errors="replace").rstrip("\n")
                if line.startswith("data: "):
                    data = line[6:]
                elif line == "" and data:
                    d = json.loads(data)
                    data = ""
                    yield Event(seq=d.get("seq", 0), kind=d.get("kind", ""), id=d.get("id", ""), state=d.get("state", ""),
                                node=d.get("node", ""), reason=d.get("reason", ""), time=d.get("time", ""))


def _api_error(e: urllib.error.HTTPError) -> APIError:
    try:
        body = json.loads(e.read() or b"{}")
        err = body.get("error") or {}
        return APIError(e.code, err.get("code", "http"), err.get("message", str(e)), err.get("field", ""))
    except ValueError:
        return APIError(e.code, "http", str(e))
