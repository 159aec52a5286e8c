"""lines.py: frameworks.md section 7.1 preprocessing."""

from __future__ import annotations

from rlagent.tools.frameworks.lines import clean_line, iter_lines, preprocess, read_text


def test_ray_prefix_ansi_and_dedup_suffix_are_stripped():
    raw = "\x1b[36m(TaskRunner pid=221183)\x1b[0m step:3 - actor/entropy:0.42 [repeated 7x across cluster]"
    assert clean_line(raw) == ("step:3 - actor/entropy:0.42", "TaskRunner")


def test_remote_prefix_and_anonymous_prefix():
    assert clean_line("(WorkerDict pid=17, ip=10.0.0.2) hello") == ("hello", "WorkerDict")
    assert clean_line("(pid=123) hello") == ("hello", "")
    assert clean_line("no prefix (pid=1) here") == ("no prefix (pid=1) here", None)


def test_traceback_indentation_survives_the_prefix():
    text, _ = clean_line('(TaskRunner pid=5)   File "/x/naive.py", line 85, in __call__')
    assert text == '  File "/x/naive.py", line 85, in __call__'


def test_carriage_returns_split_a_tqdm_bar_from_the_metric_line_and_keep_line_numbers():
    text = "first\nTraining Progress:  1%|  | 2/200 [02:41<4:29:12, 81.49s/it]\rstep:2 - a:1\nlast"
    lines = preprocess(text)
    assert [(line.lineno, line.text) for line in lines] == [
        (1, "first"),
        (2, "Training Progress:  1%|  | 2/200 [02:41<4:29:12, 81.49s/it]"),
        (2, "step:2 - a:1"),
        (3, "last"),
    ]


def test_blank_segments_are_dropped_and_crlf_works():
    assert [line.text for line in iter_lines("a\r\n\r\n   \r\nb\r\n")] == ["a", "b"]


def test_read_text_survives_binary(tmp_path):
    path = tmp_path / "junk.log"
    path.write_bytes(b"\x00\xff\xfe step:1 - a:1\n\x80\x81")
    text = read_text(path)
    assert "step:1 - a:1" in text and "\x00" not in text
