"""Claude in the check-in graph, driven by a scripted model: off and no-key entries, an outage that
leaves the rules in charge, the review slots' composition (Claude adds rejections, never
overturns one), revision routing, and usage in the run's history and the JSON report."""

from __future__ import annotations

from rlagent.agents.llm.runtime import LLMRuntime
from rlagent.agents.report import build_report
from rlagent.tools.llm.client import LLMSettings, LLMUnavailable, TokenUsage, tool_reply

from llm_helpers import LAUNCH, check, copy_run, diagnosis, log_line, monitor, scripted


class Refuses:
    """A client that must never be built or called."""

    model = "none"

    def create(self, request, *, budget_s):
        raise AssertionError("Claude was called although it is off")


def test_llm_off_is_rules_only_and_the_entry_says_so(tmp_path):
    llm = LLMRuntime.from_settings(LLMSettings(mode="off"), {"ANTHROPIC_API_KEY": "k"}, client_factory=Refuses)
    state = check(copy_run("crash-oom-h", tmp_path), tmp_path, llm, launch_command=LAUNCH)
    assert "- LLM: off (--llm off; rules only)" in state.out.status_entry
    assert [c.name for v in state.out.reviews[0].verdicts for c in v.reasons if c.name.startswith("claude")] == []
    assert build_report(state)["llm"]["status"] == "off"


def test_auto_without_a_key_is_off_with_the_reason(tmp_path):
    llm = LLMRuntime.from_settings(LLMSettings(), {}, client_factory=Refuses)
    state = check(copy_run("reverse-text-h", tmp_path), tmp_path, llm)
    assert "- LLM: off (no ANTHROPIC_API_KEY; rules only)" in state.out.status_entry
    assert state.memory.llm_log[-1].status == "off"


def test_an_outage_leaves_the_rules_in_charge_and_costs_one_wait(tmp_path):
    rules = check(copy_run("crash-oom-h", tmp_path / "r"), tmp_path / "r", launch_command=LAUNCH)
    llm, fake = scripted(LLMUnavailable("overloaded (HTTP 529); gave up after 7 attempt(s) in 58.3 s"))
    state = check(copy_run("crash-oom-h", tmp_path), tmp_path, llm, launch_command=LAUNCH)
    assert len(fake.requests) == 1  # the personas do not each wait out the outage again
    assert [f.id for f in state.out.findings] == [f.id for f in rules.out.findings] and state.out.health == rules.out.health
    assert [v.approve for v in state.out.reviews[0].verdicts] == [v.approve for v in rules.out.reviews[0].verdicts]
    notes = [c.detail for v in state.out.reviews[0].verdicts for c in v.reasons if c.name == "claude_unavailable"]
    assert len(notes) == 3 and all("the rules verdict stands" in n for n in notes)
    assert (
        "LLM: unavailable (diagnostician: overloaded (HTTP 529); gave up after 7 attempt(s) in 58.3 s" in state.out.status_entry
    )
    assert build_report(state)["llm"]["status"] == "unavailable"


def _crash_answers(tmp_path, audit: dict, safety: dict | None = None, effect: dict | None = None):
    run = copy_run("crash-oom-h", tmp_path)
    return run, [
        tool_reply(
            "report_diagnosis", diagnosis(), usage=TokenUsage(input_tokens=2000, output_tokens=300, cache_read_input_tokens=6000)
        ),
        tool_reply("audit_verdict", audit),
        tool_reply("safety_verdict", safety or {"approve": True, "concerns": [], "reasons": ["fine"]}),
        tool_reply("effect_verdict", effect or {"approve": True, "reasons": ["fits"]}),
    ]


def test_the_auditors_quote_is_checked_on_disk_and_a_false_one_rejects(tmp_path):
    run, answers = _crash_answers(
        tmp_path,
        {
            "approve": True,
            "verified": [{"kind": "log", "file": "logs/attempt_1/trainer.log", "line": 29, "quote": "Fatal error in train"}],
            "reasons": ["ok"],
        },
    )
    llm, _ = scripted(*answers)
    good = check(run, tmp_path, llm, launch_command=LAUNCH).out.reviews[0].verdicts[0]
    assert good.reviewer == "evidence auditor" and good.approve
    assert any(c.name == "claude_quote_on_disk" and c.ok and "trainer.log:29" in c.detail for c in good.reasons)

    run, answers = _crash_answers(
        tmp_path / "b",
        {
            "approve": True,
            "verified": [{"kind": "log", "file": "logs/attempt_1/trainer.log", "line": 30, "quote": "Fatal error in train"}],
            "reasons": ["ok"],
        },
    )
    llm, _ = scripted(*answers)
    bad = check(run, tmp_path / "b", llm, launch_command=LAUNCH).out.reviews[0].verdicts[0]
    assert not bad.approve  # the rules auditor approved; Claude's unverifiable approval turns the slot into a rejection
    assert any(c.name == "claude_quote_on_disk" and not c.ok for c in bad.reasons)
    assert log_line(run, "logs/attempt_1/trainer.log", 29).endswith("Fatal error in train")


def test_a_persona_cannot_overturn_a_rules_rejection_and_a_rejection_ends_the_round(tmp_path):
    """Offline, the rules safety officer rejects (processes not probed); Claude's approval does not
    change that. Claude's effect reviewer rejects what the rules approved. The rejection is not
    fixable, so the rules withdraw the proposal without asking Claude for a revision."""
    run, answers = _crash_answers(
        tmp_path,
        {
            "approve": True,
            "verified": [{"kind": "log", "file": "logs/attempt_1/trainer.log", "line": 29, "quote": "Fatal error in train"}],
            "reasons": ["ok"],
        },
        safety={"approve": True, "concerns": [], "reasons": ["looks safe"]},
        effect={"approve": False, "reasons": ["a smaller seq_len slows every step; activation checkpointing first"]},
    )
    llm, fake = scripted(*answers)
    state = check(run, tmp_path, llm, launch_command=LAUNCH)
    verdicts = {v.reviewer: v for v in state.out.reviews[0].verdicts}
    assert not verdicts["safety officer"].approve and any(c.name == "claude_approves" for c in verdicts["safety officer"].reasons)
    assert not verdicts["effect reviewer"].approve and any(
        c.name == "claude_rejects" for c in verdicts["effect reviewer"].reasons
    )
    assert len(state.out.reviews) == 1 and state.out.proposal is None
    assert [r["tool_choice"].get("name") for r in fake.requests] == [None, "audit_verdict", "safety_verdict", "effect_verdict"]
    # offline, the entry says in one line what a live monitor would propose; the review's outcome is in the state
    assert any("proposal withdrawn after review round 1" in n for n in state.out.proposal_notes)
    assert "A live monitor would propose" in state.out.status_entry and "Review round" not in state.out.status_entry


def test_usage_goes_to_the_run_history_the_report_and_the_entry(tmp_path):
    run, answers = _crash_answers(
        tmp_path,
        {"approve": False, "verified": [], "reasons": ["cannot tell"]},
    )
    llm, _ = scripted(*answers, *answers)
    m = monitor(run, tmp_path, llm, launch_command=LAUNCH)
    try:
        first = m.check_in()
        second = m.check_in()
    finally:
        m.close()
    assert first.out.llm.usage.calls == 4 and set(first.out.llm.roles) == {
        "diagnostician",
        "evidence_auditor",
        "safety_officer",
        "effect_reviewer",
    }
    assert first.out.llm.usage.cache_read_input_tokens == 6000 and first.out.llm.usage.input_tokens == 2000
    assert [r.checkin for r in second.memory.llm_log] == [1, 2] and second.memory.llm_log[0] == first.out.llm
    report = build_report(first)["llm"]
    assert report["usage"]["prompt_tokens"] == 8000 and report["usage"]["cache_share"] == 0.75
    assert "input 8,000 tokens (6,000 from cache, 0 written to cache), output 300" in first.out.status_entry


def test_no_langgraph_retry_is_stacked_on_the_client_retries(tmp_path):
    llm, _ = scripted()
    m = monitor(copy_run("reverse-text-h", tmp_path), tmp_path, llm)
    try:
        assert {name: spec.retry_policy for name, spec in m.graph.builder.nodes.items()} == dict.fromkeys(m.graph.builder.nodes)
    finally:
        m.close()


def test_an_eval_summary_adds_up_the_check_ins(tmp_path):
    from rlagent.tools.llm.budget import summarise

    run, answers = _crash_answers(tmp_path, {"approve": False, "verified": [], "reasons": ["cannot tell"]})
    llm, _ = scripted(*answers)
    state = check(run, tmp_path, llm, launch_command=LAUNCH)
    off = LLMRuntime.from_settings(LLMSettings(mode="off"), {})
    quiet = check(copy_run("reverse-text-h", tmp_path / "h"), tmp_path / "h", off)
    summary = summarise([state.out.llm, quiet.out.llm])
    assert summarise([build_report(state)["llm"], build_report(quiet)["llm"]]) == summary
    assert summary["statuses"] == {"ok": 1, "off": 1} and summary["calls"] == 4
    assert summary["input_tokens"] == 8000 and summary["cache_share"] == 0.75
    assert summary["cost_per_checkin_usd"] == summary["cost_usd"] > 0
