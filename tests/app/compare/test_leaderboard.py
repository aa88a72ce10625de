"""The blind leaderboard (app/compare/leaderboard.py): votes read from comparisons'
settings, standings by the share of blind rounds won, ties sharing a rank."""

from app.compare.leaderboard import Standing, Vote, standings, votes_in
from app.compare.state import ComparisonState
from app.engines.sources import ModelSource

SMOL, GEMMA, QWEN = "SmolLM2", "Gemma 3 · Poet", "Qwen"


def test_standings_rank_by_the_share_of_rounds_won_and_ties_share_a_rank():
    votes = [Vote(SMOL, (SMOL, GEMMA)), Vote(GEMMA, (SMOL, GEMMA, QWEN)), Vote(QWEN, (QWEN, SMOL)),
             Vote(SMOL, (SMOL, QWEN))]
    assert standings(votes) == [
        Standing(1, SMOL, 2, 4),   # 2 of 4
        Standing(2, GEMMA, 1, 2),  # the same share over fewer rounds: after it, not tied
        Standing(3, QWEN, 1, 3),
    ]
    tied = standings([Vote(SMOL, (SMOL, GEMMA)), Vote(GEMMA, (SMOL, GEMMA))])
    assert [(s.rank, s.contender, s.share) for s in tied] == [(1, GEMMA, 0.5), (1, SMOL, 0.5)]


def test_a_round_between_one_contender_and_itself_counts_for_nothing():
    assert standings([Vote(SMOL, (SMOL, SMOL))]) == []
    assert standings([Vote(SMOL, (SMOL, SMOL, GEMMA))]) == [Standing(1, SMOL, 1, 1), Standing(2, GEMMA, 0, 1)]


def test_votes_are_read_tolerantly_from_comparisons_settings():
    settings = [{"votes": [{"winner": SMOL, "contenders": [SMOL, GEMMA], "at": "2026-12-06T07:00:00"},
                           {"winner": QWEN, "contenders": [SMOL, GEMMA]},  # a winner not among them
                           "junk", {"winner": 3, "contenders": [SMOL]}]},
                {"votes": "junk"}, {}, None]
    assert votes_in(settings) == [Vote(SMOL, (SMOL, GEMMA))]


def test_votes_stay_in_the_comparison_when_blind_mode_is_left():
    smol = ModelSource.local("/m/smol.gguf")
    state = ComparisonState({1: smol, 2: smol}, [1, 2], blind=True, favourite=2)
    state.record_vote(GEMMA, [SMOL, GEMMA], at="2026-12-06T07:00:00")
    state.go_blind(False)
    back = ComparisonState.from_settings(state.to_settings(), (1, 2), default=smol)
    assert back.favourite is None
    assert votes_in([back.to_settings()]) == [Vote(GEMMA, (SMOL, GEMMA))]
