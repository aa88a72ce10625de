"""A /v1/chat/completions body with tools: tools, tool_choice and parallel_tool_calls
checked (a 400 naming the field), then offered in the model's tool format
(app/tools/formats, chosen by the template the engine renders with): a native one gives the
tools and the history's calls and results to the template (ChatRequest.tools, OpenAI-shaped
messages); the generic one writes them as text (tool_prompt.py, app/tools/prompt.py). When
the call is forced (tool_choice "required" or a named function), the format's grammar, built
from the tools' parameter schemas, makes the reply a call whose arguments validate. With
"auto" the reply is not constrained: the format reads a call back when the whole reply is
one, and anything else is text."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from app.server.calls.parsing import Generation, bad, flag, shown
from app.server.openai.parsing import chat_generation
from app.server.openai.tool_prompt import native_messages, plain_messages, with_tools_prompt
from app.tools import Tool, ToolSchemaError, ToolUse
from app.tools.formats import GENERIC, ToolFormat, format_for_template
from inference import RequestError, SamplingParams

MAX_TOOLS = 128
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # OpenAI's rule for function names (the whole name: fullmatch)


def tool_chat_generation(body: dict, cap: int | None, template: str | None = None) -> Generation:
    """template: the source of the chat template the engine renders with (None: unknown).
    A history with tool turns goes to a template with its own tool format in that format
    even when no call may be made now (tool_choice "none"): the model reads its earlier
    calls as it wrote them, and the reply is text."""
    use = tool_use_of(body)
    fmt = format_for_template(template) if use is not None or _has_tool_turns(body) else GENERIC
    gen = _native(body, cap, use, fmt) if fmt.native else _generic(body, cap, use)
    if use is None:
        return gen
    if use.forced:
        if gen.json_object:
            raise bad("response_format", "cannot be combined with a forced tool call (tool_choice)")
        gen = replace(gen, chat=replace(gen.chat, sampling=_with_grammar(gen, forced_grammar(use, fmt))))
    return replace(gen, tools=use, tool_format=fmt)


def _generic(body: dict, cap: int | None, use: ToolUse | None) -> Generation:
    messages = plain_messages(body.get("messages"))
    if use is not None and isinstance(messages, list):
        messages = with_tools_prompt(messages, use)
    return chat_generation({**body, "messages": messages}, cap)


def _native(body: dict, cap: int | None, use: ToolUse | None, fmt: ToolFormat) -> Generation:
    """The tools to the template (none when no call may be made); the tool turns, checked
    here, replace their plain stand-ins once parsing.py has checked the rest."""
    plain, native = native_messages(body.get("messages"))
    gen = chat_generation({**body, "messages": plain}, cap)
    messages = [native.get(i, m) for i, m in enumerate(gen.chat.messages)]
    tools = fmt.template_tools(use) if use is not None else None
    chat = replace(gen.chat, messages=tuple(fmt.template_messages(messages)), tools=tools)
    return replace(gen, chat=chat)


def _has_tool_turns(body: dict) -> bool:
    messages = body.get("messages")
    return isinstance(messages, list) and any(
        isinstance(m, dict) and (m.get("role") == "tool" or (m.get("role") == "assistant" and m.get("tool_calls")))
        for m in messages)


def _with_grammar(gen: Generation, grammar: str) -> SamplingParams:
    sampling = replace(gen.chat.sampling, grammar=grammar)
    try:
        sampling.validate()  # a grammar with ignore_eos, say
    except RequestError as exc:
        raise bad("tool_choice", f"cannot force a call here: {exc}") from None
    return sampling


def forced_grammar(use: ToolUse, fmt: ToolFormat = GENERIC) -> str:
    """The format's grammar of a forced call, a keyword it cannot enforce a 400 naming where it is."""
    try:
        return fmt.grammar(use)
    except ToolSchemaError as exc:
        raise bad(exc.where, f"uses {exc.keyword!r}, which {exc.error.reason}") from None


# ----- the fields ------------------------------------------------------------------------------


def tool_use_of(body: dict) -> ToolUse | None:
    """None when no tool may be called (none given, or tool_choice "none")."""
    tools = tools_of(body)
    choice, name = choice_of(body.get("tool_choice"), {t.name for t in tools})
    parallel = flag(body, "parallel_tool_calls") if body.get("parallel_tool_calls") is not None else True
    if not tools or choice == "none":
        return None
    return ToolUse(tools, choice, name, parallel)


def tools_of(body: dict) -> tuple[Tool, ...]:
    tools = body.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise bad("tools", f"must be a list, got {shown(tools)}")
    if len(tools) > MAX_TOOLS:
        raise bad("tools", f"may hold at most {MAX_TOOLS} tools, got {len(tools)}")
    out = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(tools))
    names = [t.name for t in out]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise bad(f"tools[{i}].function.name", f"repeats {name!r}: each function needs its own name")
    return out


def _tool(tool: Any, where: str) -> Tool:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise bad(f"{where}.type", "must be \"function\" (the only kind of tool)")
    function = tool.get("function")
    if not isinstance(function, dict):
        raise bad(f"{where}.function", f"must be an object {{name, description, parameters}}, got {shown(function)}")
    name = function.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise bad(f"{where}.function.name", f"must be 1 to 64 letters, digits, _ or -, got {shown(name)}")
    description = function.get("description", "")
    if not isinstance(description, str):
        raise bad(f"{where}.function.description", f"must be a string, got {shown(description)}")
    flag(function, "strict")
    return Tool(name, description, _parameters(function.get("parameters"), f"{where}.function.parameters"))


def _parameters(parameters: Any, where: str) -> dict:
    if parameters is None:
        return {"type": "object", "properties": {}}  # OpenAI: a function without parameters
    if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
        raise bad(where, "must be a JSON Schema of an object ({\"type\": \"object\", ...})")
    return parameters  # its keywords are checked when a call is forced (call_grammar)


def choice_of(choice: Any, names: set[str]) -> tuple[str, str | None]:
    if choice is None:
        return "auto", None
    if choice in ("none", "auto", "required"):
        if choice == "required" and not names:
            raise bad("tool_choice", "is \"required\" but no tools were given")
        return choice, None
    function = choice.get("function") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function" or not isinstance(function, dict):
        raise bad("tool_choice", "must be \"none\", \"auto\", \"required\" or "
                                 f"{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, got {shown(choice)}")
    name = function.get("name")
    if name not in names:
        known = ", ".join(sorted(names)) or "none given"
        raise bad("tool_choice", f"names the function {shown(name)}, which is not among the tools ({known})")
    return "named", name
