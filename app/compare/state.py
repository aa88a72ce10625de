"""What a comparison remembers beyond its conversations: each pane's model source, the
order the panes are shown in, blind mode and the favourite. Saved as the Comparison's
settings JSON; read back tolerantly (a damaged entry falls back, it never fails to open)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from app.engines.sources import ModelSource, SourceError


@dataclass
class ComparisonState:
    sources: dict[int, ModelSource]
    order: list[int]
    blind: bool = False
    favourite: int | None = None
    extra: dict = field(default_factory=dict)  # keys written by other versions, kept
    # Each blind pick, kept when blind mode is left or the panes change (app/compare/leaderboard.py)
    votes: list[dict] = field(default_factory=list)

    def to_settings(self) -> dict:
        return {
            **self.extra,
            "panes": {str(conv_id): {"source": s.to_dict()} for conv_id, s in self.sources.items()},
            "order": list(self.order),
            "blind": self.blind,
            "favourite": self.favourite,
            "votes": list(self.votes),
        }

    @classmethod
    def from_settings(
        cls, settings: dict, conversation_ids: tuple[int, ...], default: ModelSource | None
    ) -> ComparisonState:
        """default: the source of a pane whose saved one is missing or damaged; None leaves
        such a pane out of `sources` (it stays in `order`)."""
        settings = settings if isinstance(settings, dict) else {}
        raw_panes = settings.get("panes")
        panes: dict = raw_panes if isinstance(raw_panes, dict) else {}
        known = set(conversation_ids)
        sources: dict[int, ModelSource] = {}
        for conv_id in conversation_ids:
            entry = panes.get(str(conv_id))
            try:
                sources[conv_id] = ModelSource.from_dict(entry.get("source") if isinstance(entry, dict) else None)
            except SourceError:
                if default is not None:
                    sources[conv_id] = default
        raw_order = settings.get("order")
        saved: list = raw_order if isinstance(raw_order, list) else []
        order = [i for i in saved if i in known]
        order += [i for i in conversation_ids if i not in order]
        favourite = settings.get("favourite")
        extra = {k: v for k, v in settings.items() if k not in ("panes", "order", "blind", "favourite", "votes")}
        votes = settings.get("votes")
        return cls(sources, order, bool(settings.get("blind")), favourite if favourite in known else None, extra,
                   [v for v in votes if isinstance(v, dict)] if isinstance(votes, list) else [])

    @staticmethod
    def remap_settings(settings: dict, ids: dict) -> dict:
        """The same settings after the panes' conversations got new ids (an import)."""
        new = {str(old): fresh for old, fresh in ids.items()}
        out = dict(settings)
        panes = settings.get("panes")
        if isinstance(panes, dict):
            out["panes"] = {str(new[k]): v for k, v in panes.items() if k in new}
        if isinstance(settings.get("order"), list):
            out["order"] = [new[str(i)] for i in settings["order"] if str(i) in new]
        if "favourite" in settings:
            out["favourite"] = new.get(str(settings["favourite"]))
        return out

    def add(self, conversation_id: int, source: ModelSource) -> None:
        self.sources[conversation_id] = source
        self.order.append(conversation_id)

    def remove(self, conversation_id: int) -> None:
        self.sources.pop(conversation_id, None)
        self.order = [i for i in self.order if i != conversation_id]
        if self.favourite == conversation_id:
            self.favourite = None

    def record_vote(self, winner: str, contenders: list[str], at: str) -> None:
        """A blind pick: the favourite's model and preset over the others' (their labels as
        shown when it was picked, so later changes to the panes do not rewrite it)."""
        self.votes.append({"winner": winner, "contenders": contenders, "at": at})

    def go_blind(self, blind: bool, rng: random.Random | None = None) -> None:
        """Blind mode shuffles the panes, so their places say nothing about their models."""
        self.blind = blind
        self.favourite = None
        if blind:
            (rng or random.Random()).shuffle(self.order)
