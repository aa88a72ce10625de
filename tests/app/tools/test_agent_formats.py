"""The tool loop in a model's own tool format (app/tools/formats): the tools and the
history go to the template as ChatRequest.tools and OpenAI-shaped messages, the reply is
read in that format. A scripted engine (recorded replies) and a fake toolbox; no model."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from app.tools import ToolLoop
from app.tools.formats import HermesFormat, format_of_engine
from app.tools.mcp_results import McpTool, ToolResult
from app.tools.types import Tool
from inference import SamplingParams
from inference.tokenizer.chat_template import ChatTemplate
from tests.app.server.openai.test_reasoning_content import deltas

QWEN = (Path(__file__).parents[2] / "fixtures" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
WEATHER = Tool("get_weather", "The weather", {"type": "object", "properties": {"city": {"type": "string"}}})



class Scripted:
    """Hands out the replies in order, keeping the chats it was sent."""

    def __init__(self, *replies: list[str]) -> None:
        self.replies, self.sent = list(replies), []

    info = SimpleNamespace(chat_template=QWEN)  # as a local engine reports its model's

    def stream(self, chat, sink) -> str:
        self.sent.append(chat)
        for delta in deltas(self.replies.pop(0), chat.request_id):
            sink(delta)
        return chat.request_id

    def cancel(self, request_id: str) -> None:
        pass


class Weather:
    by_name = {"get_weather": McpTool("weather", WEATHER.name, WEATHER.description, WEATHER.parameters)}

    def __bool__(self) -> bool:
        return True

    def specs(self) -> tuple[Tool, ...]:
        return (WEATHER,)

    def call(self, name: str, arguments: dict) -> ToolResult:
        return ToolResult(f"18 C in {arguments['city']}")


def test_the_loop_speaks_the_models_format():
    engine = Scripted(['<tool_call>\n{"name": "get_weather", ', '"arguments": {"city": "Paris"}}\n</tool_call>'],
                      ["It is 18 C."])
    assert isinstance(format_of_engine(engine), HermesFormat)
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    loop = ToolLoop(engine, Weather(), messages, SamplingParams.greedy(32), tool_format=format_of_engine(engine))
    list(loop.run())
    assert messages[-1] == {"role": "assistant", "content": "It is 18 C."}
    first, second = engine.sent
    assert first.tools[0]["function"]["name"] == "get_weather"
    assert first.messages == ({"role": "user", "content": "Weather in Paris?"},)  # no tools in a system prompt
    call = second.messages[1]["tool_calls"][0]["function"]
    assert call["arguments"] == {"city": "Paris"} and second.messages[2]["content"] == "18 C in Paris"
    out = ChatTemplate(QWEN).render(list(second.messages), tools=list(second.tools))
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in out
    assert "<tool_response>\n18 C in Paris\n</tool_response>" in out


def test_a_required_call_is_forced_with_the_formats_grammar():
    engine = Scripted(['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'], ["Cold."])
    loop = ToolLoop(engine, Weather(), [{"role": "user", "content": "Oslo?"}], SamplingParams.greedy(32),
                    choice="required", tool_format=HermesFormat())
    list(loop.run())
    assert '"<tool_call>\\n" call_json' in engine.sent[0].sampling.grammar
    assert json.loads(loop.messages[1]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
