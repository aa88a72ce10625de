"""SamplingParams: OpenAI's frequency and presence penalties checked, and where they sample."""

from __future__ import annotations

import pytest

from inference.errors import RequestError
from inference.params import SamplingParams


def test_openai_penalties_are_checked_and_send_a_row_to_the_sampler_chain() -> None:
    assert not SamplingParams().needs_chain
    assert SamplingParams(frequency_penalty=0.5).needs_chain
    assert SamplingParams(presence_penalty=-1.0).needs_chain
    assert not SamplingParams(grammar="start: \"a\"").needs_chain  # a mask, then the C kernel like any row
    SamplingParams(frequency_penalty=2.0, presence_penalty=-2.0).validate()
    with pytest.raises(RequestError, match=r"frequency_penalty must be in \[-2, 2\], got 2.5"):
        SamplingParams(frequency_penalty=2.5).validate()
    with pytest.raises(RequestError, match="presence_penalty"):
        SamplingParams(presence_penalty=-3.0).validate()


def test_every_sampling_field_has_its_row_in_the_table_with_the_dataclass_default_and_type() -> None:
    from dataclasses import fields

    from inference.params import CHAIN, SAMPLING_FIELDS

    rows = {f.name: f for f in SAMPLING_FIELDS}
    assert {f.name for f in fields(SamplingParams)} - set(rows) == {"stop", "logprobs", "grammar"}
    assert (rows["top_p"].default, rows["top_p"].kind, rows["seed"].kind, rows["ignore_eos"].kind) == (
        0.95, float, int, bool)
    assert {f.stage for f in SAMPLING_FIELDS} - {None} <= set(CHAIN)
    for row in SAMPLING_FIELDS:
        if not row.kernel:  # the C kernel lacks it: a request that turns it on samples on the chain
            on = next(v for v in (row.bounds.hi, row.bounds.lo, 0.5) if v is not None and v != row.off)
            assert SamplingParams(**{row.name: on}).needs_chain, row.name


@pytest.mark.parametrize("field, value, rule", [
    ("temperature", -1, ">= 0"), ("top_k", -1, ">= 0"), ("top_p", 0, "in (0, 1]"), ("min_p", 1.5, "in [0, 1]"),
    ("repeat_penalty", 0, "> 0"), ("presence_penalty", 2.5, "in [-2, 2]"), ("repeat_last_n", -2, ">= -1"),
    ("max_tokens", -2, ">= 0 (or -1 for unlimited)"),
])
def test_validate_says_each_fields_bounds_from_the_table(field: str, value: float, rule: str) -> None:
    with pytest.raises(RequestError) as err:
        SamplingParams(**{field: value}).validate()
    assert str(err.value) == f"{field} must be {rule}, got {value}"


def test_the_stages_a_request_uses() -> None:
    assert SamplingParams().stages() == ("penalties", "top_k", "top_p", "min_p", "temperature", "dist")
    assert SamplingParams(repeat_penalty=1.0, top_k=0, min_p=0.0).stages() == ("top_p", "temperature", "dist")
    assert SamplingParams(repeat_last_n=0).stages()[0] == "top_k"  # penalties over no tokens: none
    assert SamplingParams(repeat_penalty=1.0, presence_penalty=0.1).penalised
    assert SamplingParams.greedy(ignore_eos=True).stages() == ("ignore_eos", "greedy")
