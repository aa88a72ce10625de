"""The app-wide chat defaults (Settings) as the settings table keeps them."""

from __future__ import annotations

from app.chats.defaults import ChatDefaults
from inference import UNLIMITED, SamplingParams


def test_a_reply_runs_until_the_model_stops_by_default() -> None:
    """Issue 27: the app's 512-token default cut long replies."""
    assert ChatDefaults().max_tokens == UNLIMITED
    assert ChatDefaults().sampling().max_tokens == UNLIMITED
    assert ChatDefaults().overflow == "drop_oldest"


def test_saved_defaults_come_back_and_a_damaged_field_falls_back_alone() -> None:
    chosen = ChatDefaults(temperature=0.2, top_k=5, max_tokens=900, overflow="truncate_middle")
    assert ChatDefaults.from_setting(chosen.to_setting()) == chosen
    damaged = {**chosen.to_setting(), "temperature": "hot", "top_p": 7.0, "max_tokens": True, "overflow": "zip"}
    back = ChatDefaults.from_setting(damaged)
    assert (back.temperature, back.top_p, back.max_tokens, back.overflow) == (
        ChatDefaults().temperature, ChatDefaults().top_p, UNLIMITED, "drop_oldest")
    assert back.top_k == 5
    assert ChatDefaults.from_setting(None) == ChatDefaults() == ChatDefaults.from_setting([1, 2])


def test_the_defaults_go_on_top_of_a_base_but_leave_its_other_fields() -> None:
    base = SamplingParams(seed=7, stop=("END",))
    sampling = ChatDefaults(temperature=0.3, max_tokens=64).sampling(base)
    assert (sampling.temperature, sampling.max_tokens, sampling.seed, sampling.stop) == (0.3, 64, 7, ("END",))
