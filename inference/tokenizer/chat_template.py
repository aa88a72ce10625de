"""Renders a conversation with the chat template stored in the GGUF file.

The template is untrusted input (it comes with a downloaded model), so it runs in
Jinja's immutable sandbox.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from jinja2 import TemplateError, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from inference.errors import RequestError

# Used when the GGUF carries no template and its architecture has none of its own below:
# ChatML, what SmolLM2 and many others speak.
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Gemma's turns (what its own template renders). Gemma has no system role: the system
# prompt opens the first user turn.
GEMMA = (
    "{{ bos_token }}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set prefix = messages[0]['content'] + '\n\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set prefix = '' %}{% set turns = messages %}{% endif %}"
    "{% for message in turns %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\n' + (prefix if loop.first else '') "
    "+ message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)

# For GGUF files that carry no template, by general.architecture (as llama.cpp guesses).
BUILTIN_BY_ARCHITECTURE = {"gemma": GEMMA, "gemma2": GEMMA, "gemma3": GEMMA, "gemma3n": GEMMA}


def builtin_template(architecture: str | None) -> str:
    return BUILTIN_BY_ARCHITECTURE.get(architecture or "", CHATML)


ROLES = ("system", "user", "assistant", "tool")

log = logging.getLogger(__name__)


def _raise(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """HF transformers' tojson: keys in their order and no HTML escaping (Jinja's own sorts
    the keys and writes < as \\u003c), so tools and arguments read as the model was trained."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.filters["tojson"] = _tojson
    return env


def template_supports_tools(source: str) -> bool:
    """Whether the template reads a `tools` variable (its own tool format): a template
    without one (SmolLM2's ChatML, Gemma's) is shown tools in the system prompt instead."""
    try:
        return "tools" in meta.find_undeclared_variables(_environment().parse(source))
    except TemplateError:
        return False


def template_problem(source: str) -> str | None:
    """Why this template text cannot be used (one line), or None when it compiles: checked
    before a user's template override is saved, since a broken one would fall back to ChatML."""
    if not source.strip():
        return "the chat template is empty"
    try:
        _environment().from_string(source)
    except TemplateError as exc:
        return f"the chat template does not compile: {exc}"
    return None


class ChatTemplate:
    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "") -> None:
        env = _environment()
        self.source = source or CHATML
        try:
            self._template = env.from_string(self.source)
        except TemplateError as exc:  # e.g. a tag only the model's own runtime knows
            log.warning("the model's chat template does not compile (%s); using ChatML", exc)
            self.source = CHATML
            self._template = env.from_string(CHATML)
        self._bos = bos_token
        self._eos = eos_token

    @property
    def bos_token(self) -> str:
        return self._bos

    @property
    def supports_tools(self) -> bool:
        return template_supports_tools(self.source)

    def render(self, messages: list[dict], add_generation_prompt: bool = True,
               tools: list[dict] | None = None) -> str:
        """tools: OpenAI's shape ({"type": "function", "function": {name, description,
        parameters}}), given to the template as its `tools` variable (left undefined when
        None: templates test `tools is defined`). Assistant turns may carry tool_calls whose
        function.arguments is a dict, as HF transformers passes them (Qwen writes them with
        tojson, Llama 3.1 iterates them); role "tool" turns answer a call."""
        for i, m in enumerate(messages):
            _check_message(i, m)
        extra = {} if tools is None else {"tools": tools}
        try:
            return self._template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self._bos,
                eos_token=self._eos,
                **extra,
            )
        except Exception as exc:  # untrusted code: TemplateError, sandbox limits, 1 // 0 ...
            raise RequestError(f"the model's chat template rejected this chat: {exc}") from exc


def _check_message(i: int, m: Any) -> None:
    """A message the templates can render: a role and text content; an assistant turn with
    tool_calls may have no text (None or ""), each call a function with a name and arguments."""
    if not isinstance(m, dict) or m.get("role") not in ROLES:
        raise RequestError(f"message {i} needs a role in {ROLES} and text content, got {m!r:.80}")
    calls = m.get("tool_calls") if m["role"] == "assistant" else None
    if calls:
        if not (isinstance(calls, list) and all(_is_call(c) for c in calls)):
            raise RequestError(f"message {i} has tool_calls that are not "
                               "[{id, type: function, function: {name, arguments: {...}}}]")
        if m.get("content") is None or isinstance(m.get("content"), str):
            return
    if not isinstance(m.get("content"), str):
        raise RequestError(f"message {i} needs a role in {ROLES} and text content, got {m!r:.80}")


def _is_call(call: Any) -> bool:
    function = call.get("function") if isinstance(call, dict) else None
    return (isinstance(function, dict) and isinstance(function.get("name"), str)
            and isinstance(function.get("arguments"), dict))
