"""The fast suite stays fast: a test that loads a model without the `model` marker stops the run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import pytest_collection_modifyitems


def item(name: str, fixtures: list[str], marked: bool) -> SimpleNamespace:
    marker = pytest.mark.model.mark if marked else None
    return SimpleNamespace(nodeid=name, fixturenames=fixtures, get_closest_marker=lambda _name: marker)


def test_an_unmarked_test_using_a_model_fixture_stops_the_run() -> None:
    items = [
        item("t::marked", ["shared_engine", "model_path"], marked=True),
        item("t::plain", ["tmp_path"], marked=False),
        item("t::sneaky", ["qtbot", "make_engine", "model_path"], marked=False),
    ]
    with pytest.raises(pytest.UsageError, match=r"t::sneaky \(uses make_engine, model_path\)") as raised:
        pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    assert "t::marked" not in str(raised.value) and "t::plain" not in str(raised.value)


def test_marked_and_model_free_tests_pass() -> None:
    pytest_collection_modifyitems(None, [item("t::a", ["gemma_path"], True), item("t::b", [], False)])  # type: ignore[arg-type]
