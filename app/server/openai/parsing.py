"""An OpenAI chat or completions body (already JSON) to what the engine runs, validated field
by field with the readers of calls/parsing.py.

OpenAI's requests sample with no top-k, min-p or repeat penalty (the sampling table has no
OpenAI name for them). frequency_penalty and presence_penalty apply over the last 64 tokens
(llama.cpp's penalties sampler). Accepted and not used: user, logit_bias and the like. Tools
(tools, tool_choice, tool messages) are tool_request.py's."""

from __future__ import annotations

from typing import Any

from app.output_schema import SchemaRefused, enforced_grammar
from app.server.calls.images import data_url_part, is_image, within_limit
from app.server.calls.parsing import (
    ROLES,
    Generation,
    api_sampling,
    bad,
    checked,
    content_text,
    flag,
    integer,
    shown,
    stop_strings,
    valid_text,
)
from inference import JSON_OBJECT, OPENAI, UNLIMITED, ChatRequest, SamplingParams

MAX_CHOICES = 4
MAX_STOP = 4
MAX_TOP_LOGPROBS = 20


# ----- messages ----------------------------------------------------------------------------


def messages_of(body: dict) -> tuple[dict, ...]:
    messages = body.get("messages")
    if messages is None:
        raise bad("messages", "is required: a list of {role, content} objects")
    if not isinstance(messages, list):
        raise bad("messages", f"must be a list, got {shown(messages)}")
    if not messages:
        raise bad("messages", "must not be empty")
    out = tuple(_message(m, f"messages[{i}]") for i, m in enumerate(messages))
    within_limit(out, "messages")
    return out


def _message(message: Any, where: str) -> dict:
    if not isinstance(message, dict):
        raise bad(where, f"must be an object with role and content, got {shown(message)}")
    role = message.get("role")
    if role not in ROLES:
        known = ", ".join(ROLES)
        raise bad(f"{where}.role", f"must be one of {known}, got {shown(role)}")
    content = message.get("content")
    if role == "user" and isinstance(content, list) and any(is_image(part) for part in content):
        return {"role": "user", "content": _parts(content, f"{where}.content")}
    return {"role": ROLES[role], "content": content_text(content, role, f"{where}.content")}


def _parts(content: list, where: str) -> list[dict]:
    """A user message's text and image_url parts, as the engine takes them."""
    parts: list[dict] = []
    for i, part in enumerate(content):
        if not is_image(part):
            kind = part.get("type") if isinstance(part, dict) else None
            text = part.get("text") if isinstance(part, dict) else None
            if kind != "text" or not isinstance(text, str):
                raise bad(f"{where}[{i}]", "must be a text part {type: \"text\", text} or an image_url part")
            parts.append({"type": "text", "text": valid_text(text, f"{where}[{i}].text")})
            continue
        ref = part.get("image_url")
        if not isinstance(ref, dict) or not isinstance(ref.get("url"), str):
            raise bad(f"{where}[{i}].image_url", "must be an object {url}")
        parts.append(data_url_part(ref["url"], f"{where}[{i}].image_url.url"))
    return parts


# ----- sampling ----------------------------------------------------------------------------


def stop_of(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list):
        raise bad("stop", f"must be a string or a list of strings, got {shown(stop)}")
    return stop_strings(stop, "stop", MAX_STOP)


def max_tokens_of(body: dict, cap: int | None) -> int:
    """max_completion_tokens wins over max_tokens (OpenAI's newer name); above the cap, or
    absent, a request gets the cap."""
    asked = integer(body, "max_tokens", 1)
    newer = integer(body, "max_completion_tokens", 1)
    if newer is not None:
        asked = newer
    if cap is None:
        return asked if asked is not None else UNLIMITED
    return cap if asked is None else min(asked, cap)


def sampling_of(body: dict, cap: int | None, logprobs: int | None = None, grammar: str | None = None) -> SamplingParams:
    # grammar: response_format's (response_grammar_of), or a forced tool call's
    return checked(SamplingParams(**api_sampling(body, OPENAI), max_tokens=max_tokens_of(body, cap),
                                  stop=stop_of(body), logprobs=logprobs, grammar=grammar))


# ----- the rest of a call ------------------------------------------------------------------


def stream_options_of(body: dict, stream: bool) -> bool:
    """include_usage; stream_options only make sense on a stream (OpenAI refuses them too)."""
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        raise bad("stream_options", "is only allowed when stream is true")
    if not isinstance(options, dict):
        raise bad("stream_options", f"must be an object, got {shown(options)}")
    return flag(options, "include_usage")


def chat_logprobs_of(body: dict) -> int | None:
    wanted = flag(body, "logprobs")
    top = integer(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if top is not None and not wanted:
        raise bad("top_logprobs", "needs logprobs set to true")
    return (top or 0) if wanted else None


def response_grammar_of(body: dict) -> str | None:
    """The grammar response_format asks for: none for text, llama.cpp's JSON grammar for
    json_object, the schema's own (json_schema.py in the engine) for json_schema."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise bad("response_format", f"must be an object with a type, got {shown(fmt)}")
    kind = fmt["type"]
    if kind not in ("text", "json_object", "json_schema"):
        raise bad("response_format.type",
                  f"must be \"text\", \"json_object\" or \"json_schema\", got {shown(kind)}")
    if kind == "json_schema":
        return schema_format_grammar(fmt.get("json_schema"), "response_format.json_schema")
    return JSON_OBJECT if kind == "json_object" else None


def schema_format_grammar(spec: Any, where: str) -> str:
    """{"name", "schema", "strict"} to its grammar; strict or not, the output follows the
    schema (the grammar is the only way this server knows to honour one)."""
    if not isinstance(spec, dict):
        raise bad(where, f"must be an object with name and schema, got {shown(spec)}")
    name = spec.get("name")
    if name is not None and not isinstance(name, str):
        raise bad(f"{where}.name", f"must be a string, got {shown(name)}")
    flag(spec, "strict")
    if not isinstance(spec.get("schema"), dict):
        raise bad(f"{where}.schema", f"must be a JSON Schema object, got {shown(spec.get('schema'))}")
    return grammar_of_schema(spec["schema"], f"{where}.schema")


def grammar_of_schema(schema: dict, where: str) -> str:
    """The check the Jobs window and `chorus batch run --schema` make too (app/output_schema.py)."""
    try:
        return enforced_grammar(schema, where)
    except SchemaRefused as exc:
        raise bad(exc.param, exc.reason) from None


def _common(body: dict) -> tuple[int, bool, bool]:
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("model", f"must be a string, got {shown(model)}")
    n = integer(body, "n", 1, MAX_CHOICES)
    stream = flag(body, "stream")
    return n or 1, stream, stream_options_of(body, stream)


def chat_generation(body: dict, cap: int | None) -> Generation:
    """A /v1/chat/completions body."""
    n, stream, include_usage = _common(body)
    logprobs, grammar = chat_logprobs_of(body), response_grammar_of(body)
    chat = ChatRequest(messages=messages_of(body), sampling=sampling_of(body, cap, logprobs, grammar))
    return Generation(chat, n, stream, include_usage, logprobs, grammar is not None)


def completion_generation(body: dict, cap: int | None) -> Generation:
    """A /v1/completions body: a raw prompt, text or token ids."""
    n, stream, include_usage = _common(body)
    logprobs = integer(body, "logprobs", 0, 5)  # the legacy API's logprobs: how many alternatives
    sampling = sampling_of(body, cap, logprobs, response_grammar_of(body))
    if body.get("echo") is True:
        raise bad("echo", "is not supported by this server")
    if body.get("suffix") is not None:
        raise bad("suffix", "is not supported by this server")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        if not prompt:
            raise bad("prompt", "must not be empty")
        valid_text(prompt, "prompt")
        return Generation(ChatRequest(sampling=sampling), n, stream, include_usage, logprobs, prompt_text=prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        chat = ChatRequest(prompt_tokens=tuple(prompt), sampling=sampling)
        return Generation(chat, n, stream, include_usage, logprobs)
    raise bad("prompt", f"must be a non-empty string or list of token ids (one prompt), got {shown(prompt)}")

