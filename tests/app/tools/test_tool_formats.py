"""Each native tool format (app/tools/formats) on recorded model outputs, rendered into the
real chat templates of tests/fixtures/chat_templates, and chosen by the template's source.
The outputs are llama.cpp's (tests/test-chat.cpp, MIT, The ggml authors). No model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.tools import Tool, ToolUse
from app.tools.formats import GENERIC, HermesFormat, Llama3Format, MistralFormat, ToolFormat, format_for_template
from inference.tokenizer.chat_template import CHATML, GEMMA, ChatTemplate

TEMPLATES = Path(__file__).parents[2] / "fixtures" / "chat_templates"
ARGS = {"type": "object", "properties": {"arg1": {"type": "integer"}}}
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
USE = ToolUse((Tool("special_function", "A special function", ARGS), Tool("python", "Runs code", {
    "type": "object", "properties": {"code": {"type": "string"}}}), Tool("get_weather", "The weather", CITY)))
HERMES, LLAMA3, MISTRAL = HermesFormat(), Llama3Format(), MistralFormat()


def source(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text()


def calls(fmt: ToolFormat, text: str, use: ToolUse = USE) -> list[tuple[str, dict]] | None:
    found = fmt.parse(text, use)
    return None if found is None else [(c.name, json.loads(c.arguments)) for c in found]


# ----- detection ----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("Qwen-Qwen2.5-7B-Instruct", "hermes"),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes"),
    ("meta-llama-Llama-3.1-8B-Instruct", "llama3"),
    ("meta-llama-Llama-3.2-3B-Instruct", "llama3"),
    ("mistralai-Mistral-Nemo-Instruct-2407", "mistral"),
    ("HuggingFaceTB-SmolLM2-135M-Instruct", "generic"),
    ("google-gemma-2-2b-it", "generic"),
])
def test_the_template_source_decides_the_format(name, expected):
    assert format_for_template(source(name)).name == expected


def test_builtin_templates_and_an_unknown_one_are_generic():
    assert format_for_template(CHATML) is GENERIC and format_for_template(GEMMA) is GENERIC
    assert format_for_template(None) is GENERIC
    assert ChatTemplate(source("Qwen-Qwen2.5-7B-Instruct")).supports_tools
    assert not ChatTemplate(source("HuggingFaceTB-SmolLM2-135M-Instruct")).supports_tools


# ----- parsing recorded outputs -------------------------------------------------------------


def test_hermes_reads_its_calls():
    one = '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>'
    assert calls(HERMES, one) == [("special_function", {"arg1": 1})]
    python = '<tool_call>\n{"name": "python", "arguments": {"code": "print(\'hey\')"}}\n</tool_call>'
    assert calls(HERMES, python) == [("python", {"code": "print('hey')"})]
    assert [n for n, _ in calls(HERMES, one + "\n" + python)] == ["special_function", "python"]
    assert calls(HERMES, "<think>Which?</think>\n" + one) == [("special_function", {"arg1": 1})]


@pytest.mark.parametrize("text", [
    "Hello, world!\nWhat's up?",
    '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>\nDone.',  # prose after
    'Use <tool_call> tags.\n<tool_call>\n{"name": "special_function", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}',  # cut short
    '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "special_function", "arguments": [1]}\n</tool_call>',
])
def test_hermes_anything_else_is_text(text):
    assert HERMES.parse(text, USE) is None


PROSE_FIRST = 'Let me look that up.\n<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>'


def test_hermes_reads_prose_before_the_calls_as_the_replys_text():
    """As llama.cpp's Hermes 2 Pro parser does (its content before the first <tool_call>)."""
    prose, found = HERMES.split(PROSE_FIRST, USE)
    assert prose == "Let me look that up." and [c.name for c in found] == ["special_function"]
    two = PROSE_FIRST + '\n<tool_call>\n{"name": "python", "arguments": {"code": "1"}}\n</tool_call>'
    assert [c.name for c in HERMES.split(two, USE)[1]] == ["special_function", "python"]
    assert HERMES.split(PROSE_FIRST.removeprefix("Let me look that up.\n"), USE)[0] == "", "calls alone: no prose"
    # A <tool_call> in the reasoning is no call; the reasoning stays the reply's text
    thought = "<think>I need <tool_call> here.</think>\n\n" + PROSE_FIRST
    prose, found = HERMES.split(thought, USE)
    assert prose == "<think>I need <tool_call> here.</think>\n\nLet me look that up." and len(found) == 1
    assert LLAMA3.split('Sure. {"name": "special_function", "parameters": {"arg1": 1}}', USE) is None


def test_hermes_calls_start_at_the_first_tag_or_where_one_may_be_opening():
    assert HERMES.call_start("Let me look.\n<tool_call>\n{") == 13
    assert HERMES.call_start("Let me look.\n<tool_") == 13, "a tag cut at the end is held"
    assert HERMES.call_start("Let me look.\n<") == 13
    assert HERMES.call_start("Let me look.\n<tool_x") is None and HERMES.call_start("Let me look.") is None
    assert HERMES.call_start("") == 0 and HERMES.call_start("  ") == 0 and HERMES.call_start("<th") is None
    assert HERMES.call_start("<think>a <tool_call>") is None, "thinking: no call yet"
    assert HERMES.call_start("<think>a</think>\n<tool_call>") == 17
    # The other families call at the start of a reply only, as llama.cpp's parsers read them
    assert LLAMA3.call_start('{"na') == 0 and LLAMA3.call_start('Sure. {"na') is None
    assert MISTRAL.call_start("[TOOL_CALLS]") == 0 and GENERIC.call_start("Hi {") is None


def test_llama3_reads_json_and_python_tag_calls():
    one = '{"name": "special_function", "parameters": {"arg1": 1}}'
    assert calls(LLAMA3, one) == [("special_function", {"arg1": 1})]
    assert calls(LLAMA3, "<|python_tag|>python.call(code=\"print('hey')\")") == [("python", {"code": "print('hey')"})]
    assert calls(LLAMA3, 'python.call(code="1")') == [("python", {"code": "1"})]  # the tag is a control token
    two = '{"name": "special_function", "parameters": {"arg1": 1}}; {"name": "python", "parameters": {"code": "x"}}'
    assert [n for n, _ in calls(LLAMA3, two)] == ["special_function", "python"]


@pytest.mark.parametrize("text", ["Hello, world!\nWhat's up?", '{"name": "special_function", "parameters": {"arg1": 1}',
                                  'I will call {"name": "special_function", "parameters": {}}', "python.call(code=1)"])
def test_llama3_anything_else_is_text(text):
    assert LLAMA3.parse(text, USE) is None


def test_mistral_reads_both_of_its_forms():
    nemo = '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]'
    assert calls(MISTRAL, nemo) == [("special_function", {"arg1": 1})]
    assert calls(MISTRAL, nemo.removeprefix("[TOOL_CALLS]")) == [("special_function", {"arg1": 1})]
    assert calls(MISTRAL, '[TOOL_CALLS]special_function[ARGS]{"arg1":1}') == [("special_function", {"arg1": 1})]
    two = '[TOOL_CALLS]special_function[ARGS]{"arg1": 1}[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
    assert calls(MISTRAL, two) == [("special_function", {"arg1": 1}), ("get_weather", {"city": "Paris"})]
    assert MISTRAL.parse(two, ToolUse(USE.tools, parallel=False)) is None


@pytest.mark.parametrize("text", ["Hello, world!\nWhat's up?", '[TOOL_CALLS][{"name": "special_function"',
                                  '[TOOL_CALLS]nope[ARGS]{}', "[1, 2]"])
def test_mistral_anything_else_is_text(text):
    assert MISTRAL.parse(text, USE) is None


def test_streams_hold_back_only_what_may_be_a_call():
    assert HERMES.might_be_call("<tool") and HERMES.might_be_call(" <tool_call>\n{") and not HERMES.might_be_call("Hi")
    assert LLAMA3.might_be_call('{"na') and LLAMA3.might_be_call("<|python") and not LLAMA3.might_be_call("Hi")
    assert MISTRAL.might_be_call("[TOOL") and MISTRAL.might_be_call("[{") and not MISTRAL.might_be_call("Hi")


# ----- rendering into the real templates ----------------------------------------------------

HISTORY = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0123456789abcdef01234567", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_0123456789abcdef01234567", "content": "18 C"},
]


def rendered(name: str) -> str:
    text = source(name)
    fmt = format_for_template(text)
    return ChatTemplate(text, "<s>", "</s>").render(fmt.template_messages(HISTORY), tools=list(fmt.template_tools(USE)))


def test_qwen_renders_tools_the_call_and_the_result():
    out = rendered("Qwen-Qwen2.5-7B-Instruct")
    tools_at = out.index('<tools>\n{"type": "function", "function": {"name": "special_function"')
    call_at = out.index('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
                        '\n</tool_call><|im_end|>')
    result_at = out.index("<|im_start|>user\n<tool_response>\n18 C\n</tool_response><|im_end|>")
    assert tools_at < call_at < result_at and out.endswith("<|im_start|>assistant\n")


def test_hermes3_renders_its_tool_turns():
    out = rendered("NousResearch-Hermes-3-Llama-3.1-8B-tool_use")
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in out
    assert "<|im_start|>tool\n<tool_response>\n" in out


def test_llama31_renders_the_call_as_json_with_parameters():
    out = rendered("meta-llama-Llama-3.1-8B-Instruct")
    assert "Environment: ipython" in out and '"name": "get_weather",' in out  # the tools, indented JSON
    assert ('<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}'
            "<|eot_id|><|start_header_id|>ipython<|end_header_id|>") in out


def test_llama3_splits_parallel_calls_into_turns_it_accepts():
    call = HISTORY[1]["tool_calls"][0]
    two = [HISTORY[0], {"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "call_2"}]}]
    out = ChatTemplate(source("meta-llama-Llama-3.2-3B-Instruct")).render(LLAMA3.template_messages(two),
                                                                            tools=list(LLAMA3.template_tools(USE)))
    assert out.count('{"name": "get_weather", "parameters": {"city": "Paris"}}') == 2


def test_mistral_nemo_renders_calls_with_its_nine_character_ids():
    out = rendered("mistralai-Mistral-Nemo-Instruct-2407")
    assert '[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "special_function"' in out
    short = MistralFormat().template_messages(HISTORY)[1]["tool_calls"][0]["id"]
    assert len(short) == 9 and short.isalnum()
    assert f'[TOOL_CALLS][{{"name": "get_weather", "arguments": {{"city": "Paris"}}, "id": "{short}"}}]</s>' in out
    assert f'[TOOL_RESULTS]{{"content": 18 C, "call_id": "{short}"}}[/TOOL_RESULTS]' in out


def test_other_messages_are_still_checked():
    from inference import RequestError

    bad = [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]
    with pytest.raises(RequestError):
        ChatTemplate(source("Qwen-Qwen2.5-7B-Instruct")).render(bad)  # arguments must be a dict by now
    with pytest.raises(RequestError):
        ChatTemplate(CHATML).render([{"role": "user", "content": None}])


# ----- forced calls -------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "opening"), [(HERMES, 'start:  call_item'), (LLAMA3, 'start:  call_item'),
                                              (MISTRAL, 'start: "[" call_item')])
def test_each_forced_grammar_compiles_and_names_the_tool(fmt, opening):
    grammar = fmt.grammar(ToolUse(USE.tools, "named", "get_weather"))  # lark_grammar checked it compiles
    assert grammar.startswith(opening) and '{"const": "get_weather"}' in grammar
    assert "get_time" not in grammar  # a named call offers that tool alone


def test_hermes_forces_its_tags_and_parallel_calls():
    required = ToolUse(USE.tools, "required")
    grammar = HERMES.grammar(required)  # parallel
    assert 'call_item: "<tool_call>\\n" call_json "\\n</tool_call>"' in grammar
    assert grammar.count('("\\n" call_item)?') == 3  # up to MAX_PARALLEL calls
    assert "call_item)?" not in LLAMA3.grammar(required)  # Llama takes one call a turn
