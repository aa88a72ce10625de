"""The blind leaderboard: every favourite picked in blind mode is a vote, kept in its
comparison (ComparisonState.votes), for the pane's model and preset ("contender") over the
others shown beside it. Standings rank contenders by the share of their blind rounds they
won; equal shares over equal rounds share a rank (1, 1, 3)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Vote:
    winner: str
    contenders: tuple[str, ...]  # every pane's, the winner's included


@dataclass(frozen=True, slots=True)
class Standing:
    rank: int
    contender: str
    wins: int
    rounds: int  # blind rounds it was in, against someone else

    @property
    def share(self) -> float:
        return self.wins / self.rounds if self.rounds else 0.0


def votes_in(settings: Iterable[dict]) -> list[Vote]:
    """The votes kept in comparisons' settings; a damaged entry is skipped, never fatal."""
    votes: list[Vote] = []
    for comparison in settings:
        raw = comparison.get("votes") if isinstance(comparison, dict) else None
        for entry in raw if isinstance(raw, list) else []:
            vote = _vote(entry)
            if vote is not None:
                votes.append(vote)
    return votes


def _vote(entry: object) -> Vote | None:
    if not isinstance(entry, dict):
        return None
    winner, contenders = entry.get("winner"), entry.get("contenders")
    if not isinstance(winner, str) or not isinstance(contenders, list):
        return None
    names = tuple(c for c in contenders if isinstance(c, str))
    return Vote(winner, names) if winner in names else None


def compared(votes: Iterable[Vote]) -> int:
    """The votes that count: picks between panes of at least two contenders."""
    return sum(1 for vote in votes if len(set(vote.contenders)) > 1)


def standings(votes: Iterable[Vote]) -> list[Standing]:
    wins: dict[str, int] = {}
    rounds: dict[str, int] = {}
    for vote in votes:
        field = set(vote.contenders)
        if len(field) < 2:  # the same model and preset in every pane: nothing was compared
            continue
        for name in field:
            rounds[name] = rounds.get(name, 0) + 1
        wins[vote.winner] = wins.get(vote.winner, 0) + 1
    ordered = sorted(rounds, key=lambda n: (-wins.get(n, 0) / rounds[n], -rounds[n], n))
    table: list[Standing] = []
    for position, name in enumerate(ordered, start=1):
        row = Standing(position, name, wins.get(name, 0), rounds[name])
        previous = table[-1] if table else None
        if previous is not None and (previous.share, previous.rounds) == (row.share, row.rounds):
            row = Standing(previous.rank, name, row.wins, row.rounds)  # a tie
        table.append(row)
    return table
