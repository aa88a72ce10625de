"""An OpenAI request body (already JSON) to what the engine runs, validated field by field.

Unknown fields are ignored (clients send many); a known field with a wrong type or value is
a 400 naming the field. frequency_penalty and presence_penalty apply over the last 64
tokens (llama.cpp's penalties sampler; the repeat penalty stays off, as OpenAI has none).
Accepted and not used: user, logit_bias and the like. Tools (tools, tool_choice, tool messages)
are tool_request.py's."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from app.server.body import is_finite_number
from app.server.errors import ApiError
from app.tools import ToolUse
from app.tools.formats import GENERIC, ToolFormat
from inference import JSON_OBJECT, UNLIMITED, ChatRequest, RequestError, SamplingParams, SchemaError, schema_grammar

MAX_CHOICES = 4
MAX_STOP = 4
MAX_TOP_LOGPROBS = 20
SEED_RANGE = (-(2**63), 2**64 - 1)  # what OpenAI's clients send; the engine's seed is 32-bit
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


@dataclass(frozen=True)
class Generation:
    """One API call: the engine request of its first choice, and how to answer."""

    chat: ChatRequest
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    logprobs: int | None = None  # None: none asked; k: the chosen token's plus k alternatives
    json_object: bool = False  # the output is constrained to JSON (json_object or json_schema)
    prompt_text: str | None = None  # /v1/completions with a text prompt, still to tokenize
    tools: ToolUse | None = None  # the tools the reply may call (tool_request.py)
    tool_format: ToolFormat = GENERIC  # how the reply writes its calls (the model's template's)

    def choice(self, index: int) -> ChatRequest:
        """The engine request of choice `index`: the same prompt, seed + index."""
        seed = self.chat.sampling.seed
        if index == 0 or seed is None:
            return self.chat
        return replace(self.chat, sampling=replace(self.chat.sampling, seed=(seed + index) % 2**32))


def bad(param: str, message: str) -> ApiError:
    return ApiError(400, f"{param} {message}", param=param)


# ----- field readers -----------------------------------------------------------------------


def number(body: dict, name: str, default: float, lo: float, hi: float, lo_open: bool = False) -> float:
    value = body.get(name)
    if value is None:
        return default
    if not is_finite_number(value):
        raise bad(name, f"must be a finite number, got {shown(value)}")
    if value > hi or value < lo or (lo_open and value == lo):
        low = f"> {lo:g}" if lo_open else f">= {lo:g}"
        raise bad(name, f"must be {low} and <= {hi:g}, got {value:g}")
    return float(value)


def integer(body: dict, name: str, lo: int, hi: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(name, f"must be an integer, got {shown(value)}")
    if value < lo or (hi is not None and value > hi):
        span = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise bad(name, f"must be {span}, got {value}")
    return value


def flag(body: dict, name: str) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad(name, f"must be true or false, got {shown(value)}")
    return value


def valid_text(value: str, where: str) -> str:
    """A string the engine can tokenize: JSON may escape a lone surrogate ("\\ud800"),
    which is no character and no UTF-8, and would fail deep in tokenizing (a 500)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad(where, f"has text that is not valid Unicode (a lone surrogate, {value[exc.start:exc.end]!r} "
                         f"at character {exc.start})") from None
    return value


def shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = repr(value) if isinstance(value, str) else "null" if value is None else str(value).lower() \
        if isinstance(value, bool) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ----- messages ----------------------------------------------------------------------------


def messages_of(body: dict) -> tuple[dict, ...]:
    messages = body.get("messages")
    if messages is None:
        raise bad("messages", "is required: a list of {role, content} objects")
    if not isinstance(messages, list):
        raise bad("messages", f"must be a list, got {shown(messages)}")
    if not messages:
        raise bad("messages", "must not be empty")
    return tuple(_message(m, f"messages[{i}]") for i, m in enumerate(messages))


def _message(message: Any, where: str) -> dict:
    if not isinstance(message, dict):
        raise bad(where, f"must be an object with role and content, got {shown(message)}")
    role = message.get("role")
    if role not in ROLES:
        known = ", ".join(ROLES)
        raise bad(f"{where}.role", f"must be one of {known}, got {shown(role)}")
    return {"role": ROLES[role], "content": content_text(message.get("content"), role, f"{where}.content")}


def content_text(content: Any, role: str, where: str) -> str:
    if content is None and role == "assistant":  # an assistant turn that only called tools
        return ""
    if isinstance(content, str):
        return valid_text(content, where)
    if not isinstance(content, list):
        raise bad(where, f"must be a string or a list of text parts, got {shown(content)}")
    return "".join(_text_part(part, f"{where}[{i}]") for i, part in enumerate(content))


def _text_part(part: Any, where: str) -> str:
    if not isinstance(part, dict):
        raise bad(where, f"must be an object {{type, text}}, got {shown(part)}")
    if part.get("type") != "text":
        raise bad(f"{where}.type", f"must be \"text\" (this server reads text only), got {shown(part.get('type'))}")
    value = part.get("text")
    if not isinstance(value, str):
        raise bad(f"{where}.text", f"must be a string, got {shown(value)}")
    return valid_text(value, f"{where}.text")


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


def stop_strings(stop: list, name: str, limit: int) -> tuple[str, ...]:
    """A list of stop strings: at most limit, each a non-empty string of valid text."""
    if len(stop) > limit:
        raise bad(name, f"may hold at most {limit} strings, got {len(stop)}")
    for i, s in enumerate(stop):
        if not isinstance(s, str) or not s:
            raise bad(f"{name}[{i}]", f"must be a non-empty string, got {shown(s)}")
        valid_text(s, f"{name}[{i}]")
    return tuple(stop)


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
    seed = integer(body, "seed", SEED_RANGE[0], SEED_RANGE[1])
    params = SamplingParams(
        temperature=number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=number(body, "top_p", 1.0, 0.0, 1.0, lo_open=True),
        seed=None if seed is None else seed % 2**32,
        max_tokens=max_tokens_of(body, cap),
        stop=stop_of(body),
        ignore_eos=flag(body, "ignore_eos"),  # vLLM's and llama.cpp's extension: run to max_tokens
        repeat_penalty=1.0,
        frequency_penalty=number(body, "frequency_penalty", 0.0, -2.0, 2.0),
        presence_penalty=number(body, "presence_penalty", 0.0, -2.0, 2.0),
        top_k=0,
        min_p=0.0,
        logprobs=logprobs,
        grammar=grammar,  # response_format's (response_grammar_of), or a forced tool call's
    )
    try:
        params.validate()  # what the fields cannot say alone (a grammar with ignore_eos)
    except RequestError as exc:
        raise ApiError(400, str(exc)) from None
    return params


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
    try:
        return schema_grammar(schema)
    except SchemaError as exc:
        raise bad(where + exc.path, f"uses {exc.keyword!r}, which this server cannot enforce: {exc}") from None


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
