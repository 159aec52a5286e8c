"""STATUS.md is append-only, idempotent per check-in id, and safe with two writers."""

import multiprocessing

from rlagent.tools.statusfile import append_entry, entry_marker


def test_appends_never_rewrite_and_repeat_ids_are_skipped(tmp_path):
    status = tmp_path / "STATUS.md"
    status.write_text("# my notes\nhand-written, no trailing newline")
    first = f"## 2026-11-20 14:00 UTC\n**Health**: Healthy\n{entry_marker('run-a', 1)}\n"
    assert append_entry(status, first, entry_marker("run-a", 1)) is True
    assert append_entry(status, first, entry_marker("run-a", 1)) is False  # a re-run of check-in 1
    second = f"## 2026-11-20 15:00 UTC\n**Health**: Down\n{entry_marker('run-a', 2)}\n"
    assert append_entry(status, second, entry_marker("run-a", 2)) is True
    text = status.read_text()
    assert text.startswith("# my notes\nhand-written, no trailing newline\n\n## 2026-11-20 14:00 UTC")
    assert text.count("rlagent:checkin run-a#1") == 1 and text.count("rlagent:checkin run-a#2") == 1
    assert text.index("#1 -->") < text.index("#2 -->")


def _writer(path, worker, count):
    for i in range(count):
        marker = entry_marker(f"w{worker}", i)
        append_entry(path, f"## entry {worker}-{i}\n" + ("line\n" * 50) + marker + "\n", marker)


def test_two_processes_never_interleave(tmp_path):
    status = tmp_path / "STATUS.md"
    procs = [multiprocessing.get_context("fork").Process(target=_writer, args=(status, w, 40)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    blocks = [b for b in status.read_text().split("\n\n") if b.strip()]
    assert len(blocks) == 80
    for block in blocks:
        lines = block.strip().splitlines()
        worker, index = lines[0].removeprefix("## entry ").split("-")
        assert lines[1:-1] == ["line"] * 50
        assert lines[-1] == entry_marker(f"w{worker}", int(index))
