"""Renders a conversation with the chat template stored in the GGUF file.

The template is untrusted input (it comes with a downloaded model), so it runs in
Jinja's immutable sandbox.
"""

from __future__ import annotations

import logging
from datetime import datetime

from jinja2 import TemplateError
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


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


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

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        for i, m in enumerate(messages):
            ok = isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str)
            if not ok:
                raise RequestError(
                    f"message {i} needs a role in {ROLES} and text content, got {m!r:.80}"
                )
        try:
            return self._template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self._bos,
                eos_token=self._eos,
            )
        except Exception as exc:  # untrusted code: TemplateError, sandbox limits, 1 // 0 ...
            raise RequestError(f"the model's chat template rejected this chat: {exc}") from exc
