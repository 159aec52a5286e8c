"""Claude as diagnostician and reviewers on bundled runs, replayed from vcrpy cassettes.

Replay (CI, the default): record mode `none`, nothing listens at the stub's URL, every recorded
interaction must be played exactly once. Re-recording:
- `make record-cassettes-stub`: against the local Messages API stub (tests/stub_anthropic.py);
- `make record-cassettes`: against the real API, for whoever has ANTHROPIC_API_KEY.
The assertions hold for either recording: they check rlagent's behaviour around the answers
(all rule findings kept, Claude's findings evidenced, every slot reviewed by both, usage
recorded, requests within the input budget), not the words a particular model chose.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from rlagent.agents.report import build_report
from rlagent.agents.rules.catalogue import CATALOGUE
from rlagent.tools.llm.client import DEFAULT_MODEL, AnthropicClient, LLMSettings

from llm_helpers import LAUNCH, check, copy_run, monitor, runtime
from stub_anthropic import STUB_PORT, STUB_URL, StubServer

CASSETTES = Path(__file__).parent / "cassettes" / "test_llm_cassettes"
LIVE = os.environ.get("RLAGENT_RECORD_LIVE") == "1"
LIVE_KEY = os.environ.get("ANTHROPIC_API_KEY")  # read at import: the hermetic fixture removes it
LIVE_URL = os.environ.get("ANTHROPIC_BASE_URL")
DROP_RESPONSE_HEADERS = ("anthropic-organization-id", "cf-ray", "set-cookie", "x-envoy-upstream-service-time")


def scrub_request(request):
    """Keep the cassette small and free of anything private: the static prefix (tools, system)
    is replaced by its size; messages and tool_choice stay (the matcher reads tool_choice)."""
    try:
        body = json.loads(request.body)
    except (TypeError, ValueError):
        return request
    for key in ("tools", "system"):
        if key in body:
            body[key] = f"<{len(json.dumps(body[key]))} chars, not kept>"
    request.body = json.dumps(body).encode()
    return request


def scrub_response(response):
    headers = response.get("headers", {})
    for name in list(headers):
        if name.lower() in DROP_RESPONSE_HEADERS:
            del headers[name]
    return response


@pytest.fixture(scope="module")
def vcr_config():
    return {
        "filter_headers": ["authorization", "x-api-key"],
        "match_on": ["messages_call"],
        "allow_playback_repeats": False,
        "decode_compressed_response": True,
        "before_record_request": scrub_request,
        "before_record_response": scrub_response,
    }


@pytest.fixture
def claude(record_mode, vcr):
    """The real anthropic client, aimed at what the cassette replays (or records)."""

    def make(url: str, key: str):
        return runtime(AnthropicClient(api_key=key, base_url=url, call_timeout_s=60.0, backoff_s=0.1), model=DEFAULT_MODEL)

    if record_mode == "none":
        yield make(STUB_URL, "sk-replay-no-key")
    elif LIVE:
        if not LIVE_KEY:
            pytest.skip("RLAGENT_RECORD_LIVE=1 needs ANTHROPIC_API_KEY")
        yield make(LIVE_URL or "https://api.anthropic.com", LIVE_KEY)
    else:
        with StubServer(port=STUB_PORT) as stub:
            yield make(stub.url, "sk-stub-no-key")
    if record_mode == "none":
        assert vcr.all_played, f"{len(vcr) - len(vcr.play_counts)} recorded interaction(s) were not used"


def prompt_tokens(vcr) -> list[int]:
    out = []
    for response in vcr.responses:
        usage = json.loads(response["body"]["string"])["usage"]
        out.append(usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"])
    return out


def assert_sound(state, rules, vcr):
    """What must hold whatever the model answered."""
    llm = state.out.llm
    assert llm.status == "ok" and llm.problems == [] and llm.model == DEFAULT_MODEL
    assert llm.usage.calls == len(vcr) and llm.usage.prompt_tokens == sum(prompt_tokens(vcr))
    assert max(prompt_tokens(vcr)) <= LLMSettings().max_input_tokens
    ids = {f.id for f in state.out.findings}
    assert {f.id for f in rules.out.findings} <= ids and state.out.health.value in ("Healthy", "Degraded", "Down")
    for finding in state.out.findings:
        if finding.source == "llm":
            assert finding.id in CATALOGUE and finding.severity.value in ("info", "warning") and finding.evidence
    assert f"- LLM: {DEFAULT_MODEL}; {llm.usage.calls} call(s)" in state.out.status_entry
    assert any(n.startswith("Claude's reading: ") for n in llm.notes)
    report = build_report(state)
    assert report["llm"]["status"] == "ok" and report["llm"]["usage"]["prompt_tokens"] == llm.usage.prompt_tokens


@pytest.mark.vcr
@pytest.mark.parametrize("name", ["reverse-text-h", "reverse-text-l"])
def test_diagnostician_on_the_bundled_examples(name, tmp_path, claude, vcr):
    rules = check(copy_run(name, tmp_path / "rules"), tmp_path / "rules")
    state = check(copy_run(name, tmp_path), tmp_path, claude)
    assert_sound(state, rules, vcr)
    assert set(state.out.llm.roles) == {"diagnostician"} and state.out.reviews == []


@pytest.mark.vcr
@pytest.mark.parametrize("name", ["crash-oom-h", "nan-h", "stall-h"])
def test_diagnostician_and_every_reviewer_on_fixtures_with_a_proposal(name, tmp_path, claude, vcr):
    rules = check(
        copy_run(name, tmp_path / "rules"), tmp_path / "rules", launch_command=LAUNCH if name == "crash-oom-h" else None
    )
    state = check(copy_run(name, tmp_path), tmp_path, claude, launch_command=LAUNCH if name == "crash-oom-h" else None)
    assert_sound(state, rules, vcr)
    assert set(state.out.llm.roles) >= {"diagnostician", "evidence_auditor", "safety_officer", "effect_reviewer"}
    first = state.out.reviews[0]
    assert [v.reviewer for v in first.verdicts] == ["evidence auditor", "safety officer", "effect reviewer"]
    for verdict, ruled in zip(first.verdicts, rules.out.reviews[0].verdicts, strict=True):
        claude_checks = [c for c in verdict.reasons if c.name.startswith("claude_")]
        assert claude_checks and "claude_unavailable" not in {c.name for c in claude_checks}
        assert verdict.approve <= ruled.approve  # Claude adds rejections, never overturns one
        assert verdict.reasons[: len(ruled.reasons)] == ruled.reasons
    # The proposal under review is the rules' (its command, if any, is built from the launch command).
    assert first.proposal.model_dump_json() == rules.out.reviews[0].proposal.model_dump_json()  # (NaN claims)
    sent, ruled_send = first.plan.send or "", rules.out.reviews[0].plan.send or ""
    assert sent.replace(str(tmp_path), "TMP") == ruled_send.replace(str(tmp_path / "rules"), "TMP")


@pytest.mark.vcr
def test_a_repeat_check_in_reads_the_static_prompt_from_the_cache(tmp_path, claude, vcr):
    m = monitor(copy_run("reverse-text-l", tmp_path), tmp_path, claude)
    try:
        first, second = m.check_in(), m.check_in()
    finally:
        m.close()
    assert first.out.llm.status == second.out.llm.status == "ok"
    assert second.out.llm.usage.cache_creation_input_tokens == 0 and second.out.llm.usage.cache_share >= 0.5
    assert [r.checkin for r in second.memory.llm_log] == [1, 2]


def test_cassettes_hold_no_credentials():
    files = sorted(CASSETTES.glob("*.yaml"))
    assert len(files) >= 6
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "sk-" not in text and "Bearer" not in text, path.name
        for interaction in yaml.safe_load(text)["interactions"]:
            headers = {k.lower() for k in interaction["request"]["headers"]}
            assert not headers & {"authorization", "x-api-key"}, path.name
