"""A local stand-in for the Anthropic Messages API, for recording cassettes and driving failures.

It speaks `POST /v1/messages` with realistic bodies: `msg_` ids, `tool_use` blocks with `toolu_`
ids, `stop_reason`, and usage with `cache_creation_input_tokens` / `cache_read_input_tokens`
(the prefix up to the last `cache_control` block is "cached" for its TTL, as the real API does).
Token counts are rlagent's own estimate (tools.llm.estimate_tokens), so figures measured against
the stub are estimates, not tokenizer counts.

Without a plan it answers like a careful, terse model (`Brain`): it confirms the rules' findings,
takes one look at a cited log line when it may use tools, writes a short narrative, and reviews
proposals from the facts in its prompt. A test can queue faults and canned answers first:

    stub.plan(Fault(status=529), Fault(status=429, retry_after=1), Fault(sleep=3),
              Fault(tool_input={...}), Fault(text="plain words"))

Usage: `with StubServer(port=STUB_PORT) as stub: ...` (a fixed port lets cassettes recorded
against it replay), or `port=0` for an ephemeral one.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rlagent.tools.llm.client import estimate_tokens

STUB_PORT = 18765
STUB_URL = f"http://127.0.0.1:{STUB_PORT}"


@dataclass
class Fault:
    """One planned answer: an HTTP error, a delay, a given tool input or a text-only reply."""

    status: int | None = None
    error_type: str = "api_error"
    retry_after: float | None = None
    sleep: float = 0.0
    tool_input: Any = None
    """Answer the forced (or first answer) tool with exactly this input."""
    tool: str | None = None
    text: str | None = None


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class StubState:
    plan: list[Fault] = field(default_factory=list)
    cache: dict[str, float] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)
    """The scheme of each request's credentials (`Bearer`, `x-api-key`), never the key."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: itertools.count = field(default_factory=lambda: itertools.count(1))


class StubServer:
    def __init__(self, port: int = 0, seed: str = "stub") -> None:
        self.state = StubState()
        self.seed = seed
        state, seed_text = self.state, seed

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.split("?")[0] != "/v1/messages":
                    return self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                if not (self.headers.get("authorization") or self.headers.get("x-api-key")):
                    return self._send(401, _error(401, "missing credentials"))
                with state.lock:
                    state.requests.append(body)
                    bearer = (self.headers.get("authorization") or "").split(" ", 1)[0]
                    state.auth.append(bearer or "x-api-key")
                    fault = state.plan.pop(0) if state.plan else Fault()
                if fault.sleep:
                    time.sleep(fault.sleep)
                if fault.status is not None:
                    headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
                    return self._send(fault.status, _error(fault.status, "planned failure"), headers)
                self._send(200, answer(body, fault, state, seed_text))

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                with state.lock:
                    state.statuses.append(status)
                    number = next(state.ids)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", f"req_stub_{seed_text}_{number:04d}")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def plan(self, *faults: Fault) -> StubServer:
        with self.state.lock:
            self.state.plan.extend(faults)
        return self

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.state.requests

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _error(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


# --- answering --------------------------------------------------------------------------------


def _prefix(body: dict[str, Any]) -> tuple[str | None, int, float]:
    """(cache key, tokens, ttl s) of the prompt prefix up to the last cache_control block."""
    parts: list[Any] = [body.get("tools", [])]
    key, tokens, ttl = None, 0, 300.0
    for block in body.get("system", []) if isinstance(body.get("system"), list) else []:
        parts.append(block)
        control = block.get("cache_control")
        if control:
            text = json.dumps(parts, sort_keys=True)
            key, tokens = hashlib.sha256(text.encode()).hexdigest(), estimate_tokens(parts)
            ttl = 3600.0 if control.get("ttl") == "1h" else 300.0
    return key, tokens, ttl


def answer(body: dict[str, Any], fault: Fault, state: StubState, seed: str) -> dict[str, Any]:
    total = estimate_tokens({k: body[k] for k in ("system", "tools", "messages") if k in body})
    key, prefix, ttl = _prefix(body)
    read = written = 0
    now = time.monotonic()
    if key is not None:
        with state.lock:
            if state.cache.get(key, 0) > now:
                read = prefix
            else:
                written = prefix
            state.cache[key] = now + ttl
    if fault.text is not None:
        content = [{"type": "text", "text": fault.text}]
    else:
        choice = body.get("tool_choice") or {"type": "auto"}
        if fault.tool_input is not None:
            name = fault.tool or choice.get("name") or "report_diagnosis"
            content = [_use(name, fault.tool_input, state, seed)]
        else:
            content = [_use(name, value, state, seed) for name, value in Brain(body).decide(choice)]
    uses = [b for b in content if b["type"] == "tool_use"]
    with state.lock:
        number = next(state.ids)
    return {
        "id": f"msg_stub_{seed}_{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-stub"),
        "content": content,
        "stop_reason": "tool_use" if uses else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": total - read - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written if ttl == 300.0 else 0,
                "ephemeral_1h_input_tokens": written if ttl == 3600.0 else 0,
            },
            "output_tokens": 12 + estimate_tokens(content),
            "service_tier": "standard",
        },
    }


def _use(name: str, value: Any, state: StubState, seed: str) -> dict[str, Any]:
    with state.lock:
        number = next(state.ids)
    return {"type": "tool_use", "id": f"toolu_stub_{seed}_{number:04d}", "name": name, "input": value}


_FINDING = re.compile(r"^- \[(info|warning|critical)\] (\w+) \(")
_CITE = re.compile(r"^((?:logs|run_default)/[^\s:]+\.log):(\d+): (.+)$", re.MULTILINE)
_LINE = re.compile(r"^(\d+): (.+)$", re.MULTILINE)
_METRIC = re.compile(r"^(trainer|orchestrator) (\w+) @ step (\d+) = (\S+)$", re.MULTILINE)


class Brain:
    """Answers from what the prompt says, the way a terse careful model would."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        messages = body.get("messages", [])
        first = messages[0]["content"] if messages else ""
        self.prompt = first if isinstance(first, str) else json.dumps(first)
        self.read_before = len(messages) > 1

    def decide(self, choice: dict[str, Any]) -> list[tuple[str, Any]]:
        forced = choice.get("name") if choice.get("type") == "tool" else None
        if forced is None and "report_diagnosis once" in self.prompt:
            cite = _CITE.search(self.prompt)
            if cite and not self.read_before:
                return [("read_log_lines", {"file": cite.group(1), "line": int(cite.group(2)), "before": 2, "after": 2})]
            forced = "report_diagnosis"
        name = forced or self._task_tool()
        return [(name, getattr(self, name)())]

    def _task_tool(self) -> str:
        match = re.search(r"Answer by calling (\w+) once", self.prompt)
        return match.group(1) if match else "report_diagnosis"

    def findings(self) -> list[tuple[str, str]]:
        return [(m.group(2), m.group(1)) for line in self.prompt.splitlines() if (m := _FINDING.match(line))]

    def report_diagnosis(self) -> dict[str, Any]:
        found = self.findings()
        checks = [{"id": fid, "verdict": "confirm", "why": "the rules' evidence matches the data shown"} for fid, _ in found]
        worst = [fid for fid, sev in found if sev != "info"]
        if worst:
            narrative = (
                f"The rules' findings hold: {', '.join(worst)}. The metric table and the grouped warnings agree with them; "
                "watch whether they persist at the next check-in before changing anything."
            )
        else:
            narrative = (
                "Training looks healthy: reward, entropy and step times are within the run's own early range, "
                "and the warnings are the usual start-up and timeout noise."
            )
        proposal = None
        rules = re.search(
            r"^- the rules' proposal: (restart_with_overrides|restart|stop)\b.* for ([\w, ]+)$", self.prompt, re.MULTILINE
        )
        if rules:
            proposal = {
                "action": rules.group(1),
                "addresses": [a.strip() for a in rules.group(2).split(",")][:3],
                "overrides": [],
                "why": "agrees with the rules",
            }
            if proposal["action"] == "restart_with_overrides":
                proposal = None  # the overrides are the rules' to size
        return {"rule_findings": checks, "extra_findings": [], "narrative": narrative, "proposal": proposal}

    def report_revision(self) -> dict[str, Any]:
        return {
            "decision": "withdraw",
            "proposal": None,
            "why": "the rejection is about safety or evidence, which a revision cannot fix",
        }

    def audit_verdict(self) -> dict[str, Any]:
        reread = self.prompt.split("## What rlagent re-read from disk for the claim", 1)[-1]
        raw = _CITE.search(reread)
        if raw:
            return {
                "approve": True,
                "verified": [{"kind": "log", "file": raw.group(1), "line": int(raw.group(2)), "quote": raw.group(3)[-120:]}],
                "reasons": [f"the step line at {raw.group(1)}:{raw.group(2)} shows the claimed value"],
            }
        claim = _CITE.search(self.prompt.split("load-bearing claim", 1)[-1])
        if claim:
            for m in _LINE.finditer(reread):
                if int(m.group(1)) == int(claim.group(2)):
                    quote = m.group(2)[-120:]
                    return {
                        "approve": True,
                        "verified": [{"kind": "log", "file": claim.group(1), "line": int(claim.group(2)), "quote": quote}],
                        "reasons": [f"line {claim.group(2)} of {claim.group(1)} reads as claimed"],
                    }
        metric = _METRIC.search(reread)
        if metric and metric.group(4) not in ("n/a", "nan", "inf", "-inf"):
            value = float(metric.group(4))
            return {
                "approve": True,
                "verified": [
                    {
                        "kind": "metric",
                        "process": metric.group(1),
                        "metric": metric.group(2),
                        "step": int(metric.group(3)),
                        "value": value,
                    }
                ],
                "reasons": ["the metric values re-read from disk match the claim"],
            }
        return {"approve": False, "verified": [], "reasons": ["the claim could not be confirmed from what was re-read"]}

    def safety_verdict(self) -> dict[str, Any]:
        concerns = []
        if "not probed (offline)" in self.prompt:
            concerns.append(
                {"name": "run_state_unknown", "detail": "processes were not probed, so a second launch could fight a live run"}
            )
        if "none could be built" in self.prompt:
            concerns.append({"name": "no_command", "detail": "no exact command was built from the run's launch command"})
        if concerns:
            return {"approve": False, "concerns": concerns, "reasons": ["not safe to send now"]}
        return {
            "approve": True,
            "concerns": [],
            "reasons": ["checkpoint complete, run down, command rebuilt from the launch command"],
        }

    def effect_verdict(self) -> dict[str, Any]:
        action = re.search(r"^- action: (\w+)", self.prompt, re.MULTILINE)
        primary = re.search(r"^- addresses: (\w+)", self.prompt, re.MULTILINE)
        kind, first = (action.group(1) if action else ""), (primary.group(1) if primary else "")
        fits = (kind.startswith("restart") and first in ("run_crashed", "process_down")) or (
            kind == "stop" and first in ("nan_detected", "run_stalled")
        )
        reason = f"a {kind} {'answers' if fits else 'does not answer'} {first}"
        return {"approve": fits, "reasons": [reason]}

    def read_log_lines(self) -> dict[str, Any]:  # only reached when a test forces it
        cite = _CITE.search(self.prompt)
        return {"file": cite.group(1) if cite else "logs/trainer.log", "line": int(cite.group(2)) if cite else 1}
