"""Each API's sampling fields, parsed from a request body (no model, no server): which fields
it reads, what it sends for the ones it has no name for, and its 400s naming the field."""

from __future__ import annotations

import pytest

from app.server.anthropic.parsing import message_generation
from app.server.http.errors import ApiError
from app.server.openai.parsing import chat_generation, completion_generation
from app.server.responses.parsing import response_ask
from inference import UNLIMITED, SamplingParams

HI = [{"role": "user", "content": "hi"}]
# What the server sends for the fields none of its APIs names: the samplers OpenAI lacks off.
OFF = dict(top_k=0, min_p=0.0, repeat_penalty=1.0)


def openai(**body) -> SamplingParams:
    return chat_generation({"messages": HI, **body}, None).chat.sampling


def anthropic(**body) -> SamplingParams:
    return message_generation({"messages": HI, "max_tokens": 16, **body}, None).chat.sampling


def responses(**body) -> SamplingParams:
    return response_ask({"input": "hi", **body}, None).sampling


def refused(parse, **body) -> tuple[str | None, str]:
    with pytest.raises(ApiError) as err:
        parse(**body)
    assert err.value.status == 400
    return err.value.param, err.value.message


def test_openai_reads_its_own_fields_and_turns_llama_cpps_extra_samplers_off() -> None:
    assert openai() == SamplingParams(temperature=1.0, top_p=1.0, max_tokens=UNLIMITED, **OFF)
    asked = openai(temperature=0.3, top_p=0.5, frequency_penalty=0.4, presence_penalty=-1, seed=7,
                   ignore_eos=True, stop=["\n"], max_tokens=9,
                   top_k=5, min_p=0.2, repeat_penalty=1.3, repeat_last_n=3)  # not OpenAI's: ignored
    assert asked == SamplingParams(temperature=0.3, top_p=0.5, frequency_penalty=0.4, presence_penalty=-1.0,
                                   seed=7, ignore_eos=True, stop=("\n",), max_tokens=9, **OFF)
    assert type(asked.temperature) is float and type(asked.presence_penalty) is float
    assert completion_generation({"prompt": "hi", "top_p": 0.25}, 64).chat.sampling == SamplingParams(
        temperature=1.0, top_p=0.25, max_tokens=64, **OFF)


def test_openai_s_seed_is_any_64_bit_value_taken_modulo_2_to_the_32() -> None:
    assert openai(seed=-1).seed == 2**32 - 1
    assert openai(seed=2**40 + 5).seed == 5
    assert refused(openai, seed=2**64) == ("seed", f"seed must be between {-(2**63)} and {2**64 - 1}, got {2**64}")
    assert refused(openai, seed=1.5) == ("seed", "seed must be an integer, got 1.5")


@pytest.mark.parametrize("body, param, message", [
    ({"temperature": 3}, "temperature", "temperature must be >= 0 and <= 2, got 3"),
    ({"temperature": -0.5}, "temperature", "temperature must be >= 0 and <= 2, got -0.5"),
    ({"temperature": "hot"}, "temperature", "temperature must be a finite number, got 'hot'"),
    ({"top_p": 0}, "top_p", "top_p must be > 0 and <= 1, got 0"),
    ({"top_p": 1.5}, "top_p", "top_p must be > 0 and <= 1, got 1.5"),
    ({"frequency_penalty": 2.5}, "frequency_penalty", "frequency_penalty must be >= -2 and <= 2, got 2.5"),
    ({"presence_penalty": -3}, "presence_penalty", "presence_penalty must be >= -2 and <= 2, got -3"),
    ({"ignore_eos": "yes"}, "ignore_eos", "ignore_eos must be true or false, got 'yes'"),
    ({"ignore_eos": True, "response_format": {"type": "json_object"}}, None,
     "a grammar cannot be combined with ignore_eos (the grammar decides where output ends)"),
])
def test_openai_refuses_a_bad_value_naming_its_field(body: dict, param: str | None, message: str) -> None:
    assert refused(openai, **body) == (param, message)


def test_anthropic_reads_temperature_to_1_top_p_and_top_k() -> None:
    assert anthropic() == SamplingParams(temperature=1.0, top_p=1.0, max_tokens=16, **OFF)
    asked = anthropic(temperature=0.5, top_p=0.9, top_k=7, ignore_eos=True, stop_sequences=["END"],
                      seed=3, frequency_penalty=1.0, min_p=0.5, repeat_penalty=2.0)  # not Anthropic's: ignored
    assert asked == SamplingParams(temperature=0.5, top_p=0.9, top_k=7, ignore_eos=True, stop=("END",),
                                   max_tokens=16, min_p=0.0, repeat_penalty=1.0)
    assert refused(anthropic, temperature=1.5) == ("temperature", "temperature must be >= 0 and <= 1, got 1.5")
    assert refused(anthropic, top_k=-1) == ("top_k", "top_k must be at least 0, got -1")
    assert refused(anthropic, top_k=2.5) == ("top_k", "top_k must be an integer, got 2.5")
    assert refused(anthropic, top_p=0) == ("top_p", "top_p must be > 0 and <= 1, got 0")


def test_responses_reads_temperature_and_top_p_and_repeats_them() -> None:
    assert responses() == SamplingParams(temperature=1.0, top_p=1.0, max_tokens=UNLIMITED, **OFF)
    ask = response_ask({"input": "hi", "temperature": 0.2, "top_p": 0.8, "ignore_eos": True, "seed": 4,
                        "top_k": 3, "frequency_penalty": 1.0}, 100)  # not the Responses API's: ignored
    assert ask.sampling == SamplingParams(temperature=0.2, top_p=0.8, ignore_eos=True, max_tokens=100, **OFF)
    assert (ask.temperature, ask.top_p) == (0.2, 0.8)
    assert refused(responses, temperature=2.5) == ("temperature", "temperature must be >= 0 and <= 2, got 2.5")
    assert refused(responses, top_p=-1) == ("top_p", "top_p must be > 0 and <= 1, got -1")
