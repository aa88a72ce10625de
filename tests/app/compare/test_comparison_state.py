import random

from app.compare.state import ComparisonState
from app.engines.sources import ModelSource

SMOL = ModelSource.local("/m/smol.gguf")
GEMMA = ModelSource.local("/m/gemma.gguf")
REMOTE = ModelSource.remote("http://127.0.0.1:8080/v1", "smol")


def test_round_trip_keeps_sources_order_blind_and_favourite():
    state = ComparisonState({1: SMOL, 2: GEMMA, 3: REMOTE}, [3, 1, 2], blind=True, favourite=2)
    back = ComparisonState.from_settings(state.to_settings(), (1, 2, 3), default=SMOL)
    assert back == state


def test_damaged_settings_fall_back_instead_of_failing():
    settings = {"panes": {"1": {"source": {"kind": "ftp"}}, "2": "junk"}, "order": [9, 2, "x"],
                "favourite": 7, "blind": 1, "note": "from a newer version"}
    state = ComparisonState.from_settings(settings, (1, 2, 3), default=GEMMA)
    assert state.sources == {1: GEMMA, 2: GEMMA, 3: GEMMA}
    assert state.order == [2, 1, 3]  # unknown ids dropped, missing ones appended
    assert state.favourite is None and state.blind is True
    assert state.to_settings()["note"] == "from a newer version"
    assert ComparisonState.from_settings(None, (4,), default=SMOL).sources == {4: SMOL}


def test_blind_mode_shuffles_and_forgets_the_old_favourite():
    state = ComparisonState({i: SMOL for i in range(1, 5)}, [1, 2, 3, 4], favourite=3)
    state.go_blind(True, random.Random(1))
    assert sorted(state.order) == [1, 2, 3, 4] and state.order != [1, 2, 3, 4]
    assert state.favourite is None and state.blind
    state.remove(2)
    assert 2 not in state.order and 2 not in state.sources
    state.add(5, GEMMA)
    assert state.order[-1] == 5 and state.sources[5] == GEMMA


def test_settings_follow_the_conversations_to_their_new_ids():
    state = ComparisonState({1: SMOL, 2: GEMMA}, [2, 1], blind=True, favourite=2, extra={"note": "x"})
    moved = ComparisonState.remap_settings(state.to_settings(), {1: 11, 2: 12})
    back = ComparisonState.from_settings(moved, (11, 12), default=REMOTE)
    assert back.sources == {11: SMOL, 12: GEMMA} and back.order == [12, 11]
    assert back.favourite == 12 and back.blind and back.extra == {"note": "x"}
    partial = ComparisonState.remap_settings(state.to_settings(), {"1": 21})  # ids as text, one missing
    assert partial["panes"] == {"21": {"source": SMOL.to_dict()}} and partial["order"] == [21]
    assert partial["favourite"] is None
