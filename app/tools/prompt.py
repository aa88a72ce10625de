"""The generic tool format: how tools, the calls a model made and their results are written
into a chat's messages for a model whose chat template has no tool format of its own
(SmolLM2's has none; the engine renders only role and content today).

The tools and the call format go in the system prompt; a call is a JSON object
{"name": ..., "arguments": {...}} (several: a JSON list of them) and nothing else, which is
what parsing.py reads back and what a forced call's grammar produces. An assistant turn
that called tools shows its calls that way; a tool's result becomes a user turn naming the
call it answers (consecutive results in one turn: some templates refuse two user turns in a
row)."""

from __future__ import annotations

import json

from app.tools.types import ToolUse


def tools_prompt(use: ToolUse) -> str:
    lines = ["You can call these functions (their parameters as JSON Schema):"]
    lines += [json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters},
                         ensure_ascii=False) for t in use.tools]
    rule = ('To call a function, reply with only a JSON object and nothing before or after it: '
            '{"name": "<the function\'s name>", "arguments": {<its arguments>}}.')
    if use.parallel:
        rule += " To call several at once, reply with a JSON list of such objects."
    if use.choice == "named":
        rule += f" Call {use.name} now."
    elif use.choice == "required":
        rule += " Call a function now."
    else:
        rule += " If no function is needed, answer in plain text."
    return "\n".join(lines + [rule])


def with_tools_prompt(messages: list[dict], use: ToolUse, system_text: str | None = None) -> list[dict]:
    """The tools' description after the system prompt, or as one. system_text: the first
    message's content as text, when the caller has already read it (the server checks it)."""
    prompt = tools_prompt(use)
    first = messages[0] if messages else None
    if isinstance(first, dict) and first.get("role") in ("system", "developer"):
        text = system_text if system_text is not None else str(first.get("content") or "")
        return [{"role": "system", "content": f"{text}\n\n{prompt}"}, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]


def calls_text(text: str, calls: list[dict]) -> str:
    """An assistant turn that called tools, as the model is shown it: its text (if any), then
    the calls ({"name", "arguments"} each) as one object or a list."""
    shown = json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)
    return f"{text}\n{shown}" if text else shown


def result_text(name: str, call_id: str, content: str) -> str:
    return f"The result of {name} (call {call_id}):\n{content}"


def add_result(out: list[dict], text: str) -> None:
    """A tool result appended to the plain messages: joined to the previous turn when that
    one holds results too."""
    last = out[-1] if out else None
    if isinstance(last, dict) and last.get("tool_results"):
        last["content"] += "\n\n" + text
    else:
        out.append({"role": "user", "content": text, "tool_results": True})


def plain_turns(messages: list[dict]) -> list[dict]:
    """Assistant calls and tool results as plain turns, for messages this side wrote (the
    server checks a client's with app/server/openai/tool_prompt.py)."""
    names: dict[str, str] = {}
    out: list[dict] = []
    for m in messages:
        if m.get("role") == "tool":
            call_id = str(m.get("tool_call_id"))
            add_result(out, result_text(names.get(call_id, "a tool"), call_id, str(m.get("content") or "")))
        elif m.get("role") == "assistant" and m.get("tool_calls"):
            calls = [c["function"] for c in m["tool_calls"]]
            names.update((c["id"], c["function"]["name"]) for c in m["tool_calls"])
            shown = [{"name": c["name"], "arguments": json.loads(c["arguments"])} for c in calls]
            written = m.get("written")  # the loop's own turns: the model's text, token for token
            out.append({"role": "assistant",
                        "content": written if written else calls_text(str(m.get("content") or ""), shown)})
        else:
            out.append({"role": m["role"], "content": m.get("content") or ""})
    return [{k: v for k, v in m.items() if k != "tool_results"} for m in out]
