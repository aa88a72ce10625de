"""`chorus bench` sizes its shared system prompt by the prefix chats share, for any template,
and stops with a clear error on a template that leaves the system prompt out of it."""

from __future__ import annotations

import pytest

from app.bench.workload import SystemPromptError, _system_prompt
from inference.tokenizer.chat_template import GEMMA, ChatTemplate
from inference.tokenizer.input_processor import InputProcessor
from tests.support.core_driver import make_driver

# A template that drops the system message: no system text can reach any prefix.
NO_SYSTEM = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] != 'system' %}"
    "[{{ m['role'] }}] {{ m['content'] }}</s>{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}[assistant] {% endif %}"
)


class CoreCaller:
    """What _system_prompt uses of an Engine: its input processor, on a fake runner."""

    def __init__(self, template: str) -> None:
        self.core = make_driver(n_cells=4096).core
        self.inputs = self.core.inputs = InputProcessor(self.core.runner, 4096,
                                                        template=ChatTemplate(template, "<s>", "</s>"))


def test_the_system_prompt_of_a_template_without_a_system_role_grows_to_the_target() -> None:
    engine = CoreCaller(GEMMA)
    text = _system_prompt(engine, 600)  # type: ignore[arg-type]
    size = len(engine.core.inputs.system_prefix_tokens(text))
    assert 500 < size <= 600  # the fake vocabulary is bytes: a rule is ~75 tokens


def test_a_template_that_drops_the_system_prompt_fails_clearly_instead_of_looping() -> None:
    with pytest.raises(SystemPromptError, match="does not put the system prompt"):
        _system_prompt(CoreCaller(NO_SYSTEM), 600)  # type: ignore[arg-type]
