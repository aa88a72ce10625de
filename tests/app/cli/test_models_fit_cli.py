"""`chorus models fit` and the load options of issue 26 on the command line: the chats that
fit per KV type for the real default model's header, and --kv-type / --chats-that-fit
reaching the settings a command loads with."""

from __future__ import annotations

import argparse
import json

import pytest

from app.cli.engine_args import add_model_args, settings_from_args
from tests.support.cli import chorus_in_process

pytestmark = pytest.mark.model


def test_models_fit_reports_chats_per_kv_type_and_context(capsys, data_dir, model_path) -> None:
    (data_dir / "models").mkdir(parents=True, exist_ok=True)
    (data_dir / "models" / model_path.name).symlink_to(model_path)
    out = chorus_in_process(capsys, data_dir, "models", "fit", "--ctx", "4096", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    rows = {r["kv_type"]: r for r in report["capacity"]}
    assert set(rows) == {"f16", "q8_0", "q4_0"}
    assert rows["f16"]["chats"] <= rows["q8_0"]["chats"] <= rows["q4_0"]["chats"] <= 256
    assert rows["f16"]["kv_bytes_per_chat"] == 4096 * 2 * 30 * 192 * 2  # 30 layers, K and V width 192
    table = chorus_in_process(capsys, data_dir, "models", "fit", "--ctx", "2048")
    assert "q4_0" in table.stdout and "KV per token: f16 22.5 KiB" in table.stdout


def test_kv_type_and_chats_that_fit_reach_the_settings(model_path) -> None:
    parser = argparse.ArgumentParser()
    add_model_args(parser)
    args = parser.parse_args(["--kv-type", "q4_0", "--flash-attn", "on", "--chats-that-fit", "1024"])
    settings = settings_from_args(args, model_path)
    assert (settings.kv_type, settings.flash_attn) == ("q4_0", True)
    assert settings.n_ctx == settings.n_seq_max * 1024 and 1 <= settings.n_seq_max <= 256
    settings.validate()


def test_a_draft_model_on_the_command_line_implies_draft_and_beats_the_library(model_path, tmp_path) -> None:
    from app.cli.engine_args import resolve_model
    from app.models.library import ModelDefaults

    parser = argparse.ArgumentParser()
    add_model_args(parser)
    args = parser.parse_args(["--model", str(model_path), "--draft-model", str(model_path)])
    assert resolve_model(args, tmp_path) == model_path  # the draft model too, on the way
    stored = ModelDefaults(speculative="lookup")
    settings = settings_from_args(args, model_path, stored)
    assert (settings.speculative, settings.draft_model) == ("draft", model_path)
    settings.validate()
