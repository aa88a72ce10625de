"""`chorus bench-grammar` (app/bench/grammar_rows.py) once on the real model, small: its
grammar lets no row end early (the run raises if one did), each mode is measured every
round, and the ratios are those of the medians."""

from __future__ import annotations

import pytest

from app.bench import grammar_rows
from inference import LoadSettings

pytestmark = pytest.mark.model


def test_the_grammar_bench_measures_every_mode_with_whole_rows(model_path):
    report = grammar_rows.run_grammar_bench(LoadSettings(model_path=model_path), chats=3, grammar_chats=1,
                                            max_tokens=6, system_tokens=200, rounds=1)
    assert {mode: len(runs) for mode, runs in report["runs"].items()} == {m: 1 for m in grammar_rows.MODES}
    assert all(r["grammar_tok_s"] > 0 for r in report["runs"]["mixed"])  # its rows ran, constrained
    assert all(r["grammar_tok_s"] == 0 for r in report["runs"]["plain_alone"])
    plain = report["plain_tok_s_median"]
    assert report["ratio"]["mixed_vs_all_plain"] == pytest.approx(plain["mixed"] / plain["all_plain"])
    assert "mixed / all plain" in grammar_rows.render(report, as_json=False)
