"""SamplingParams: OpenAI's frequency and presence penalties checked, and where they sample."""

from __future__ import annotations

import pytest

from inference.errors import RequestError
from inference.params import SamplingParams


def test_openai_penalties_are_checked_and_send_a_row_to_the_sampler_chain() -> None:
    assert not SamplingParams().needs_chain
    assert SamplingParams(frequency_penalty=0.5).needs_chain
    assert SamplingParams(presence_penalty=-1.0).needs_chain
    assert SamplingParams(grammar="root ::= \"a\"").needs_chain
    SamplingParams(frequency_penalty=2.0, presence_penalty=-2.0).validate()
    with pytest.raises(RequestError, match=r"frequency_penalty must be in \[-2, 2\], got 2.5"):
        SamplingParams(frequency_penalty=2.5).validate()
    with pytest.raises(RequestError, match="presence_penalty"):
        SamplingParams(presence_penalty=-3.0).validate()
