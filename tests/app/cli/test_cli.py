"""The `chorus` command line, run as a real subprocess on the real model."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import build_parser, main, parse
from tests.support.cli import chorus, chorus_in_process
from tests.support.net import unused_port


@pytest.fixture
def data_dir(tmp_path, model_path) -> Path:
    """A fresh data folder holding (a link to) the already verified default model."""
    models = tmp_path / "models"
    models.mkdir()
    (models / model_path.name).symlink_to(model_path)
    return tmp_path


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every (sub)command the parser has, as the words that select it: ("models", "fetch")."""
    paths = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths.append((*prefix, name))
                paths.extend(command_paths(sub, (*prefix, name)))
    return paths


def test_chat_has_an_option_for_each_sampling_field_the_table_gives_it() -> None:
    """--top-k, --min-p and the rest come from the engine's table, with its defaults."""
    from app.cli.chat import sampling_from_args
    from inference import SamplingParams

    assert sampling_from_args(parse(["chat"])) == SamplingParams()
    chosen = parse(["chat", "--temperature", "0.2", "--top-k", "5", "--top-p", "0.5", "--min-p", "0.1",
                    "--repeat-penalty", "1.3", "--seed", "9", "--max-tokens", "30"])
    assert sampling_from_args(chosen) == SamplingParams(temperature=0.2, top_k=5, top_p=0.5, min_p=0.1,
                                                        repeat_penalty=1.3, seed=9, max_tokens=30)


def test_every_command_is_there_with_a_handler() -> None:
    parser = build_parser()
    paths = command_paths(parser)
    assert set(paths) == {
        ("chat",), ("ask",), ("app",), ("serve",), ("export",), ("import",), ("list",), ("backup",),
        ("batch",), ("batch", "run"), ("batch", "list"), ("batch", "status"), ("batch", "cancel"),
        ("batch", "export"), ("batch", "delete"),
        ("bench",), ("bench-ui",), ("bench-storage",), ("bench-engines",), ("bench-serve",), ("bench-restart",),
        ("bench-grammar",), ("bench-schemas",), ("bench-documents",), ("bench-agents",), ("bench-jobs",),
        ("bench-images",),
        ("models",), ("models", "list"), ("models", "fetch"), ("models", "path"), ("models", "rm"),
        ("models", "defaults"), ("models", "search"), ("models", "pull"), ("models", "fit"),
    }
    required = {"ask": ["f.txt", "-q", "x"], "bench-schemas": ["--data", "sets"], "export": ["out.md"],
                "import": ["in.json"], "backup": ["copy.db"], "rm": ["x"], "defaults": ["x"], "search": ["gemma"],
                "pull": ["owner/repo"], "status": ["job_1"],
                "cancel": ["job_1"], "delete": ["job_1"], "batch export": ["job_1", "out.csv"]}
    for path in paths:
        args = parser.parse_args([*path, *required.get(" ".join(path), required.get(path[-1], []))])
        assert callable(args.handler), path


@pytest.mark.parametrize("words", [(), *command_paths(build_parser())], ids=lambda w: " ".join(w) or "chorus")
def test_every_help_exits_zero(words: tuple[str, ...], capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*words, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {' '.join(('chorus', *words))} ")


def test_the_command_line_loads_no_llama_cpp_until_a_command_needs_it() -> None:
    """`chorus app` is the window's process: every command module is imported to build the
    parser, so none may load llama.cpp at import (ask, chat, serve and the benchmarks did)."""
    code = ("import sys; from app.cli.main import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'llama_cpp'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_each_command_is_listed_with_the_group_that_adds_it() -> None:
    from app.cli.main import COMMAND_GROUP, COMMAND_GROUPS, _groups_for

    registered = {}
    for group in _groups_for(None):
        sub = argparse.ArgumentParser().add_subparsers()
        group.register(sub)
        registered.update(dict.fromkeys(sub.choices, group.__name__.rsplit(".", 1)[1]))
    assert registered == COMMAND_GROUP and set(COMMAND_GROUP.values()) == set(COMMAND_GROUPS)


def test_a_command_imports_its_own_group_only() -> None:
    """`chorus list` reads the chats group, not the server's, the terminal chat's or the
    benchmarks' (their imports were 1.1 s of its 1.7 s)."""
    code = ("import sys; from app.cli.main import parse; args = parse(['--data-dir', '/tmp/x', 'list']); "
            "print(args.command, sorted(m for m in sys.modules if m.startswith('app.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    command, groups = out.stdout.split(" ", 1)
    assert command == "list" and "'app.cli.chats'" in groups
    assert not [name for name in ("serve", "chat", "ask", "bench", "batch") if f"'app.cli.{name}'" in groups]


def test_a_bare_chorus_is_a_terminal_chat() -> None:
    args = parse(["--data-dir", "/tmp/somewhere"])
    assert args.command == "chat" and args.data_dir == "/tmp/somewhere" and args.max_tokens == 512


def test_an_unknown_command_is_a_clear_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["chta"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "chorus: error: argument command: invalid choice: 'chta'" in err
    assert "'chat'" in err  # the choices are listed


def test_an_unknown_option_is_a_clear_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["models", "list", "--colour"])
    assert exit_.value.code == 2
    assert "chorus: error: unrecognized arguments: --colour" in capsys.readouterr().err


@pytest.mark.model
def test_models_list_shows_what_is_installed(data_dir, tmp_path_factory):
    out = chorus(data_dir, "models", "list")
    assert out.returncode == 0
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[1:] if not line.startswith(" ")}
    assert "installed" in rows["smollm2-135m"].split() and "catalog" in rows["smollm2-135m"]
    assert "not installed" in rows["gemma3-270m"]
    empty = chorus(tmp_path_factory.mktemp("empty"), "models", "list")
    assert "not installed" in empty.stdout.splitlines()[1] and empty.stdout.splitlines()[1].startswith("smollm2-135m")


def test_models_errors_are_one_line_and_nonzero(tmp_path, capsys):
    unknown = chorus_in_process(capsys, tmp_path, "models", "fetch", "no-such-model")
    assert unknown.returncode == 2
    assert "unknown model(s): no-such-model" in unknown.stderr
    missing = chorus_in_process(capsys, tmp_path, "models", "path", "gemma3-270m")
    assert missing.returncode == 2
    assert "chorus models fetch gemma3-270m" in missing.stderr


@pytest.mark.model
def test_terminal_chat_streams_a_reply(data_dir):
    out = chorus(data_dir, "chat", "--max-tokens", "16", "--temperature", "0", stdin="Hello!\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert "bot> " in out.stdout
    reply = out.stdout.split("bot> ", 1)[1].strip()
    assert reply
    assert "tokens, first after" in out.stderr


def test_chat_on_a_broken_model_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_text("not a model")
    out = chorus_in_process(capsys, tmp_path, "chat", "--model", str(bad))  # refused before any input
    assert out.returncode == 2
    assert "not a GGUF model file" in out.stderr


@pytest.mark.model
def test_bench_prints_engine_baseline_and_ratios(data_dir):
    out = chorus(
        data_dir, "bench", "--chats", "3", "--system-tokens", "120", "--max-tokens", "6", "--json",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    fields = {"wall_s", "gen_tok_s", "decode_tok_s", "ttft_p50_s", "ttft_p95_s", "itl_p50_s",
              "itl_p95_s", "prompt_tokens_computed", "kv_cells_peak"}
    assert fields <= set(report["engine"]) and fields <= set(report["baseline"])
    assert set(report["ratio"]) == {"gen_tok_s", "ttft_p95_s"}
    assert report["engine"]["max_batch_seqs"] == 3
    # The shared system prompt is computed once by the engine.
    assert report["engine"]["prompt_tokens_computed"] <= report["ideal"]["prompt_tokens"] + 3


@pytest.mark.model
def test_bench_finishes_with_gemma_whose_template_has_no_system_role(data_dir, gemma_path):
    """The bench sized its system prompt by the system-only render, which Gemma's template
    leaves at BOS whatever the text: it looped forever. Now it sizes the derived prefix."""
    out = chorus(
        data_dir, "bench", "--model", str(gemma_path), "--chats", "2", "--system-tokens", "200",
        "--max-tokens", "8", "--warm", "--json", timeout=600,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["ideal"]["shared_prefix_tokens"] >= 170
    assert all(n > 200 for n in report["config"]["prompt_tokens_each"])
    assert report["engine"]["max_batch_seqs"] == 2


@pytest.mark.model
def test_bench_reports_host_and_sample_time_per_decode_step(data_dir):
    out = chorus(
        data_dir, "bench", "--chats", "2", "--system-tokens", "60", "--max-tokens", "6",
        "--sampling", "default", "--skip-baseline", "--json",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    eng = report["engine"]
    assert report["config"]["sampling"] == "default"
    assert 0 < eng["sample_ms_per_step"] <= eng["host_ms_per_step"] < eng["step_ms_per_step"]
    assert eng["host_ms_per_step_p95"] >= eng["host_ms_per_step"] * 0.5 > 0
    assert 0 < eng["host_ms_per_step_p50"] <= eng["host_ms_per_step_p95"]


@pytest.mark.model
def test_terminal_chat_is_saved_and_can_be_continued(data_dir):
    first = chorus(data_dir, "chat", "--max-tokens", "8", "--temperature", "0", stdin="Hello!\n/quit\n")
    assert first.returncode == 0, first.stderr
    assert "saved as conversation 1" in first.stderr
    listed = chorus(data_dir, "list")
    assert "Hello!" in listed.stdout
    again = chorus(data_dir, "chat", "--conversation", "1", "--max-tokens", "8", "--temperature", "0",
                   stdin="And again?\n/quit\n")
    assert again.returncode == 0, again.stderr
    assert "continuing conversation 1 (2 messages)" in again.stderr
    md = chorus(data_dir, "export", "--format", "md", "--conversation", "1", "-")
    assert md.returncode == 0
    body = md.stdout
    assert body.index("### You\n\nHello!") < body.index("### You\n\nAnd again?")
    assert body.count("### Assistant") == 2
    missing = chorus(data_dir, "chat", "--conversation", "99", stdin="hi\n")
    assert missing.returncode == 2 and "conversation 99 does not exist" in missing.stderr


@pytest.mark.model
def test_export_import_round_trip_and_rejection(data_dir, tmp_path):
    chorus(data_dir, "chat", "--max-tokens", "6", "--temperature", "0", stdin="Question one\n/quit\n")
    exported = tmp_path / "chats.json"
    out = chorus(data_dir, "export", "--format", "json", str(exported))
    assert out.returncode == 0, out.stderr
    data = json.loads(exported.read_text())
    assert data["format"] == "chorus-chats" and len(data["conversations"]) == 1
    imported = chorus(data_dir, "import", str(exported))
    assert imported.returncode == 0
    assert "imported 1 conversation(s), 2 message(s)" in imported.stdout
    assert len(chorus(data_dir, "list").stdout.strip().splitlines()) == 2
    broken = tmp_path / "broken.json"
    broken.write_text(exported.read_text()[:200])
    rejected = chorus(data_dir, "import", str(broken))
    assert rejected.returncode == 2
    assert rejected.stderr.count("\n") == 1 and "not valid JSON" in rejected.stderr
    assert len(chorus(data_dir, "list").stdout.strip().splitlines()) == 2


@pytest.mark.parametrize("content, reason", [
    ('{"format": "chorus-chats", "version": 1, "conversations": [' + "[" * 100_000 + "]" * 100_000 + "]}",
     "in.json is nested too deeply to be a Chorus export"),
    (json.dumps({"format": "chorus-chats", "version": 1, "conversations": [
        {"created_at": "0001-01-01T00:30:00+01:00", "messages": []}]}), "is out of range in UTC"),
    (json.dumps({"format": "chorus-chats", "version": 1, "conversations": [
        {"messages": [{"id": 1, "role": "user", "content": "owl \ud800"}]}]}),
     "message 1 has text that is not valid Unicode"),
])
def test_import_refuses_hostile_files_in_one_line(tmp_path, capsys, content, reason):
    """Issue 13: a RecursionError, an OverflowError and a UnicodeEncodeError (after 13 s)."""
    path = tmp_path / "in.json"
    path.write_text(content, encoding="utf-8")
    out = chorus_in_process(capsys, tmp_path / "data", "import", str(path))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and reason in out.stderr and "Traceback" not in out.stderr
    assert chorus_in_process(capsys, tmp_path / "data", "list").stdout == ""


def test_bench_storage_reports_the_three_timings(tmp_path):
    out = chorus(tmp_path, "bench-storage", "--messages", "2000", "--long", "500", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["long_conversation_messages"] == 500
    assert report["messages_total"] >= 2500
    for key in ("checkpoint_ms_p50", "open_long_conversation_ms_p50", "search_common_word_ms_p50"):
        assert report[key] > 0


@pytest.mark.model
def test_bench_ui_reports_event_loop_stalls(data_dir):
    out = chorus(data_dir, "bench-ui", "--tabs", "2", "--max-tokens", "8", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["tabs"] == 2 and report["max_batch_seqs"] == 2
    assert report["probes"] > 10
    assert 0 <= report["stall_p50_ms"] <= report["stall_p99_ms"] <= report["stall_max_ms"]


def test_a_comparison_survives_export_and_import_between_data_folders(tmp_path, capsys):
    from app.compare.state import ComparisonState
    from app.engines.sources import ModelSource
    from storage import CatalogRepository, ChatRepository, open_database

    source_dir, target_dir = tmp_path / "a", tmp_path / "b"
    db = open_database(source_dir / "chorus.db")
    repo, catalog = ChatRepository(db), CatalogRepository(db)
    convs = [repo.create_conversation(f"pane {i}") for i in range(2)]
    sources = {convs[0].id: ModelSource.local("/m/smol.gguf"), convs[1].id: ModelSource.local("/m/gemma.gguf")}
    state = ComparisonState(sources, [convs[1].id, convs[0].id], blind=True, favourite=convs[1].id)
    catalog.create_comparison("smol vs gemma", [c.id for c in convs], state.to_settings())
    repo.create_conversation("already there")
    db.close()
    other = open_database(target_dir / "chorus.db")
    ChatRepository(other).create_conversation("shifts the ids")
    other.close()
    exported = chorus_in_process(capsys, source_dir, "export", "--format", "json", str(tmp_path / "all.json"))
    assert exported.returncode == 0, exported.stderr
    out = chorus_in_process(capsys, target_dir, "import", str(tmp_path / "all.json"))
    assert out.returncode == 0, out.stderr
    db = open_database(target_dir / "chorus.db")
    try:
        [comp] = CatalogRepository(db).list_comparisons()
        back = ComparisonState.from_settings(comp.settings, comp.conversation_ids, ModelSource.local("/x"))
        titles = {i: ChatRepository(db).get_conversation(i).title for i in comp.conversation_ids}
        assert [titles[i] for i in back.order] == ["pane 1", "pane 0"]
        assert titles[back.favourite] == "pane 1" and back.blind
        paths = {titles[i]: s.path for i, s in back.sources.items()}
        assert paths == {"pane 0": "/m/smol.gguf", "pane 1": "/m/gemma.gguf"}
    finally:
        db.close()
    markdown = chorus_in_process(capsys, target_dir, "export", "--format", "md", "--comparison", str(comp.id), "-")
    assert markdown.returncode == 0, markdown.stderr
    assert markdown.stdout.startswith("# smol vs gemma\n") and "- **A**: gemma.gguf" in markdown.stdout
    wrong = chorus_in_process(capsys, target_dir, "export", "--format", "md", "--comparison", "999", "-")
    assert wrong.returncode == 2 and "comparison 999 does not exist" in wrong.stderr


@pytest.mark.model
def test_bench_ui_times_the_panel_opening_and_the_server_switch(data_dir):
    out = chorus(data_dir, "bench-ui", "--tabs", "2", "--panel", "--serve", "--max-tokens", "32", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    for action in ("panel_open", "server_start", "server_stop"):
        assert 0 <= report[f"{action}_call_ms"] <= report[f"{action}_ready_ms"]
        assert report[f"{action}_max_stall_ms"] >= 0


@pytest.mark.model
def test_bench_ui_with_a_compare_view(data_dir):
    out = chorus(data_dir, "bench-ui", "--tabs", "5", "--compare", "--max-tokens", "8", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["compare_panes"] == 4 and report["max_batch_seqs"] == 5


@pytest.mark.model
def test_bench_engines_runs_two_models_both_ways(data_dir, gemma_path):
    (data_dir / "models" / gemma_path.name).symlink_to(gemma_path)
    out = chorus(data_dir, "bench-engines", "--threads", "2", "--max-tokens", "8", "--json")
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)
    assert [r["threads"] for r in runs] == [2, 1]
    for run in runs:
        assert set(run["tok_s"]) == {"SmolLM2-135M-Instruct.Q4_1.gguf", gemma_path.name}
        assert all(rate > 0 for rate in run["tok_s"].values())


@pytest.mark.model
def test_the_desktop_app_starts_and_quits_cleanly(data_dir):
    env_extra = {"QT_QPA_PLATFORM": "offscreen"}
    env = {**os.environ, "CHORUS_DATA_DIR": str(data_dir), **env_extra}
    out = subprocess.run([sys.executable, "-m", "app", "app", "--quit-after", "4"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (data_dir / "chorus.db").exists()
    assert "Traceback" not in out.stderr


@pytest.mark.model
def test_chorus_serve_answers_on_loopback_and_stops_on_interrupt(data_dir):
    import signal
    import urllib.request

    port = unused_port()
    env = {**os.environ, "CHORUS_DATA_DIR": str(data_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port), "--parallel", "2",
                             "--ctx", "2048", "--cors-origin", "http://localhost:3000"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        assert f"at http://127.0.0.1:{port}/v1 (no API key)" in line, line
        models = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30).read())
        assert models["data"][0]["id"] == "SmolLM2-135M-Instruct.Q4_1"
        assert models["data"][0]["context_length"] == 2048
        preflight = urllib.request.Request(f"http://127.0.0.1:{port}/v1/messages", method="OPTIONS", headers={
            "Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
        with urllib.request.urlopen(preflight, timeout=30) as answer:  # --cors-origin reached the server
            assert answer.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


@pytest.mark.model
@pytest.mark.parametrize("how", ["--api-key ''", "CHORUS_API_KEY=''"])
def test_chorus_serve_refuses_an_empty_api_key(data_dir, how):
    """Issue 25: an empty key turned authentication off without a word; it is refused
    before any model loads, and the server never listens."""
    port = unused_port()
    args = ["--api-key", ""] if how.startswith("--") else []
    env = {k: v for k, v in os.environ.items() if k != "CHORUS_API_KEY"}
    env.update({"CHORUS_DATA_DIR": str(data_dir)}, **({} if args else {"CHORUS_API_KEY": ""}))
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port), *args],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stderr.readline()  # the refusal (or, the fault, "serving ... (no API key)")
        assert "serving" not in first, first
        assert proc.wait(timeout=60) == 2
        said = first + proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert "must not be empty" in said or "set but empty" in said, said
    assert "Traceback" not in said


def _at_most_2_gib() -> None:
    import resource

    # Without the fix /dev/zero grows for ever: this bounds the child (a MemoryError then).
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("what, reason", [("folder", "is a folder"), ("/dev/zero", "more than 67,108,864 bytes")])
def test_import_of_a_folder_or_an_endless_device_is_one_line(tmp_path, what, reason):
    """Issue 25: `chorus import DIR` was a traceback; `chorus import /dev/zero` passed the
    64 MiB check (stat() says 0 bytes) and grew without bound."""
    path = str(tmp_path) if what == "folder" else what
    env = {**os.environ, "CHORUS_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-m", "app", "import", path], capture_output=True, text=True, env=env,
                         timeout=120, preexec_fn=_at_most_2_gib)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stderr.count("\n") == 1 and reason in out.stderr, out.stderr


@pytest.mark.model
def test_chat_and_serve_on_a_read_only_database_say_so_in_one_line(data_dir):
    """Issue 25: both ended in SQLAlchemy's traceback when they first wrote (`chorus list`
    only reads, and worked). A chat, which saves every turn, stops before the model loads;
    a server, which saves nothing, says the library's defaults are lost and serves."""
    from tests.support.filesystems import read_only_file

    assert chorus(data_dir, "list").returncode == 0  # makes the database
    db = data_dir / "chorus.db"
    env = {**os.environ, "CHORUS_DATA_DIR": str(data_dir)}
    with read_only_file(db):
        chat = chorus(data_dir, "chat", stdin="hi\n/quit\n", timeout=120)
        serve = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", "0"], stderr=subprocess.PIPE,
                                 text=True, env=env)
        try:
            warning, serving = serve.stderr.readline(), serve.stderr.readline()
        finally:
            serve.kill()  # stopping cleanly is another test's (a SIGINT this early races its handler)
            serve.wait()
            serve.stderr.close()
    assert chat.returncode == 2 and "Traceback" not in chat.stderr, chat.stderr[-3000:]
    assert chat.stderr.count("\n") == 1 and "read-only" in chat.stderr and str(db) in chat.stderr, chat.stderr
    assert "read-only" in warning and str(db) in warning and serving.startswith("serving "), warning + serving


@pytest.mark.model
def test_a_truncated_model_is_one_line_and_llama_cpp_s_own_lines_come_with_v(tmp_path, model_path):
    """Issue 25: llama.cpp's forwarded warnings came before the one-line error; they are
    for -v (the error line already gives llama.cpp's reason)."""
    cut = tmp_path / "cut.gguf"
    with model_path.open("rb") as whole:
        cut.write_bytes(whole.read(2_000_000))  # the header whole, the tensors cut off
    quiet = chorus(tmp_path, "chat", "--model", str(cut), stdin="hi\n")
    assert quiet.returncode == 2 and quiet.stderr.count("\n") == 1, quiet.stderr
    assert "llama.cpp could not load cut.gguf" in quiet.stderr and "not within the file bounds" in quiet.stderr
    verbose = chorus(tmp_path, "-v", "chat", "--model", str(cut), stdin="hi\n")
    assert verbose.returncode == 2 and "llama.cpp: llama_model_load: error loading model" in verbose.stderr


def test_a_model_path_in_a_symlink_loop_says_so(tmp_path, capsys):
    """Issue 25: a link loop said "model file not found"; the reason is the loop."""
    (tmp_path / "a.gguf").symlink_to(tmp_path / "b.gguf")
    (tmp_path / "b.gguf").symlink_to(tmp_path / "a.gguf")
    out = chorus_in_process(capsys, tmp_path, "chat", "--model", str(tmp_path / "a.gguf"))  # refused before any input
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "symbolic links" in out.stderr and "not found" not in out.stderr, out.stderr


@pytest.mark.model
def test_a_message_typed_on_a_full_disk_is_kept_and_saved_when_room_returns(tmp_path, model_path):
    """Issue 25: `chorus chat` on a full disk crashed with SQLAlchemy's traceback at the
    user's message, which was lost. Now one line says so, the message waits in memory, and
    Enter tries again: on a real 4 MB tmpfs, room given back between the two tries."""
    from storage import ChatRepository, open_database
    from tests.support.filesystems import fill, small_filesystem

    with small_filesystem(tmp_path / "disk", "4m") as disk:
        assert chorus(disk, "list").returncode == 0  # makes the database
        env = {**os.environ, "CHORUS_DATA_DIR": str(disk)}
        chat = subprocess.Popen([sys.executable, "-m", "app", "chat", "--model", str(model_path), "--max-tokens", "4"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        try:
            ballast = fill(disk, leave=64 << 10)
            message = "owl " * (256 * 1024)  # 1 MB: more than the room left
            chat.stdin.write(message + "\n")
            chat.stdin.flush()
            lines = []
            while not any("disk is full" in line for line in lines):
                line = chat.stderr.readline()
                assert line, "".join(lines)
                lines.append(line)
            ballast.unlink()
            out, err = chat.communicate("\n/quit\n", timeout=300)  # Enter: the same message again
        finally:
            chat.kill()
        stderr = "".join(lines) + err
        db = open_database(disk / "chorus.db")
        try:
            repo = ChatRepository(db)
            [conv] = repo.list_conversations()
            saved = [m for m in repo.active_path(conv.id).messages if m.role == "user"]
        finally:
            db.close()
    assert chat.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.count("the disk is full") == 1 and "press Enter to try again" in stderr
    assert [m.content for m in saved] == [message.strip()]


@pytest.mark.parametrize("there_before", ["nothing", "a database"])
def test_a_data_folder_that_cannot_be_written_is_one_line_and_exit_status_2(tmp_path, capsys, there_before):
    """Issue 39: a PermissionError (app/paths.py) or "unable to open database file", each a traceback."""
    from tests.support.filesystems import read_only_folder

    target = tmp_path / "ro" / "chorus"
    if there_before == "a database":
        assert chorus_in_process(capsys, target, "list").returncode == 0
    with read_only_folder(tmp_path / "ro"):
        out = chorus_in_process(capsys, target, "list")
    assert out.returncode == 2
    [line] = out.stderr.splitlines()
    said = (f"the data folder {target} cannot be created" if there_before == "nothing"
            else f"the chat database cannot be opened: {target / 'chorus.db'}")
    assert line.startswith(f"chorus: {said}"), line


def test_a_disk_with_8_kb_left_is_one_line_and_exit_status_2(tmp_path, capsys):
    """Issue 39: opening the database there was a "disk I/O error" traceback."""
    from tests.support.filesystems import fill, small_filesystem

    with small_filesystem(tmp_path / "disk", "1m") as disk:
        fill(disk, leave=8 * 1024)
        out = chorus_in_process(capsys, disk / "chorus", "list")
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"chorus: the disk is full: {disk / 'chorus' / 'chorus.db'} could not be written; free some space"]


@pytest.mark.model
def test_a_chat_leaves_nothing_but_private_files_in_the_data_folder(data_dir, usual_umask):
    """Issue 39: chorus.db, its -wal/-shm and the prompt cache's files (written by the
    engine's writer thread) were 0644 in 0755 folders at the usual umask; the models folder
    the fixture made 0755 is tightened on start, the model it links to left alone."""
    import stat

    long_prompt = "Tell me about the lighthouse keeper who collected the names of passing ships. " * 16
    out = chorus(data_dir, "chat", "--max-tokens", "8", "--temperature", "0", stdin=f"{long_prompt}\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert list((data_dir / "kv-cache").rglob("*.kvs"))  # (-wal and -shm go when the last connection closes)
    made = [p for p in (data_dir, *data_dir.rglob("*")) if not p.is_symlink()]
    modes = {str(p.relative_to(data_dir)): oct(stat.S_IMODE(p.stat().st_mode)) for p in made}
    assert modes == {name: "0o700" if (data_dir / name).is_dir() else "0o600" for name in modes}
