"""ChatTemplate: ChatML fallback, GGUF templates, validation and the Jinja sandbox."""

from __future__ import annotations

import datetime

import pytest
from jinja2.exceptions import SecurityError

from inference.errors import RequestError
from inference.tokenizer.chat_template import CHATML, ChatTemplate

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Bye"},
]


def test_chatml_fallback_exact_output() -> None:
    assert ChatTemplate(None).render(CHAT) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\nBye<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_chatml_without_generation_prompt() -> None:
    text = ChatTemplate("").render(CHAT[:1], add_generation_prompt=False)
    assert text == "<|im_start|>system\nBe brief.<|im_end|>\n"


def test_empty_source_falls_back_to_chatml() -> None:
    assert ChatTemplate(None).source == ChatTemplate("").source == CHATML


def test_system_prefix_is_a_prefix_of_the_whole_chat() -> None:
    """What pinning relies on: the system turn renders the same alone and in a chat."""
    t = ChatTemplate(None)
    assert t.render(CHAT).startswith(t.render(CHAT[:1], add_generation_prompt=False))


def test_custom_template_with_bos_eos_and_loop_controls() -> None:
    source = (
        "{{ bos_token }}"
        "{% for m in messages %}"
        "{% if m['role'] == 'system' %}{% continue %}{% endif %}"
        "[{{ m['role'] | upper }}] {{ m['content'] | trim }}{{ eos_token }}\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
    )
    t = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    assert t.bos_token == "<s>"
    chat = [{"role": "system", "content": "x"}, {"role": "user", "content": "  hi  "}]
    assert t.render(chat) == "<s>[USER] hi</s>\n[ASSISTANT]"
    assert t.render(chat, add_generation_prompt=False) == "<s>[USER] hi</s>\n"


def test_trim_blocks_and_lstrip_blocks_are_on() -> None:
    source = "{% for m in messages %}\n    {% if true %}\n{{ m['content'] }}\n    {% endif %}\n{% endfor %}"
    assert ChatTemplate(source).render(CHAT[:2]) == "Be brief.\nHi\n"


def test_template_helpers_raise_exception_and_strftime_now() -> None:
    t = ChatTemplate("{% if messages[0]['role'] != 'user' %}{{ raise_exception('user first') }}{% endif %}ok")
    assert t.render([{"role": "user", "content": "a"}]) == "ok"
    with pytest.raises(RequestError, match="user first"):
        t.render(CHAT)
    year = ChatTemplate("{{ strftime_now('%Y') }}").render([])
    assert year in {str(datetime.date.today().year), str(datetime.date.today().year + 1)}


@pytest.mark.parametrize(
    "message",
    [
        {"role": "robot", "content": "x"},
        {"content": "x"},
        {"role": "user"},
        {"role": "user", "content": None},
        {"role": "user", "content": ["parts"]},
        "just a string",
    ],
)
def test_invalid_message_raises_request_error(message: object) -> None:
    with pytest.raises(RequestError, match="message 1 needs a role"):
        ChatTemplate(None).render([CHAT[0], message])


@pytest.mark.parametrize("role", ["system", "user", "assistant", "tool"])
def test_every_known_role_is_accepted(role: str) -> None:
    assert f"<|im_start|>{role}\nx" in ChatTemplate(None).render([{"role": role, "content": "x"}])


def test_undefined_variable_in_template_is_a_request_error() -> None:
    with pytest.raises(RequestError, match="rejected this chat"):
        ChatTemplate("{{ tools.name }}").render(CHAT)


# ----- the sandbox -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ messages.append({'role': 'user'}) }}",
        "{{ messages[0].update({'role': 'x'}) }}",
        "{{ messages.pop() }}",
    ],
)
def test_sandbox_refuses_unsafe_access_as_request_error(source: str) -> None:
    with pytest.raises(RequestError, match="unsafe") as info:
        ChatTemplate(source).render(CHAT)
    assert isinstance(info.value.__cause__, SecurityError)
    assert len(CHAT) == 4 and CHAT[0]["role"] == "system"  # nothing was modified


def test_unsafe_attribute_that_is_only_printed_renders_empty() -> None:
    assert ChatTemplate("[{{ ''.__class__ }}]").render(CHAT) == "[]"


@pytest.mark.parametrize(
    "source",
    [
        "{{ range(10 ** 9) | list | length }}",  # the sandbox's range limit (OverflowError)
        "{{ 1 // 0 }}",
        "{{ 'a' + 1 }}",
    ],
)
def test_runtime_errors_of_untrusted_templates_become_request_errors(source: str) -> None:
    with pytest.raises(RequestError, match="rejected this chat"):
        ChatTemplate(source).render(CHAT)


def test_safe_string_methods_still_work() -> None:
    t = ChatTemplate("{{ messages[1]['content'].upper() }}|{{ messages[0].content.split(' ') | join('-') }}")
    assert t.render(CHAT) == "HI|Be-brief."


@pytest.mark.parametrize(
    "source", ["{% for m in messages %}", "{% generation %}{{ messages }}{% endgeneration %}"]
)
def test_a_template_that_does_not_compile_falls_back_to_chatml(source: str) -> None:
    template = ChatTemplate(source)
    assert template.source == CHATML
    out = template.render([{"role": "user", "content": "hi"}])
    assert out == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_gemma_files_without_a_template_get_gemmas_turns_not_chatml():
    from inference.tokenizer.chat_template import CHATML, GEMMA, builtin_template

    assert builtin_template("gemma3") is GEMMA and builtin_template("llama") is CHATML
    assert builtin_template(None) is CHATML
    t = ChatTemplate(builtin_template("gemma3"), bos_token="<bos>")
    text = t.render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi "},
                     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "And you?"}])
    assert text == ("<bos><start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n"
                    "<start_of_turn>model\nHello!<end_of_turn>\n"
                    "<start_of_turn>user\nAnd you?<end_of_turn>\n<start_of_turn>model\n")


@pytest.mark.model
def test_the_real_gemma_file_is_read_as_gemma(gemma_path):
    from inference.core.engine_core import EngineCore
    from inference.params import LoadSettings
    from inference.tokenizer.chat_template import GEMMA
    from inference.worker.runner import LlamaRunner

    runner = LlamaRunner(LoadSettings(model_path=gemma_path, n_ctx=256, n_seq_max=1))
    try:
        assert runner.chat_template() is None  # this GGUF carries none
        assert runner.metadata("general.architecture") == "gemma3"
        assert runner.metadata("no.such.key") is None
        core = EngineCore(runner, LoadSettings(model_path=gemma_path, n_ctx=256, n_seq_max=1))
        assert core.inputs.template.source == GEMMA
        tokens = core.inputs.chat_tokens([{"role": "user", "content": "hi"}])
        assert tokens[:2] == [runner.bos_token, 105]  # <bos><start_of_turn> as special tokens
        assert tokens.count(runner.bos_token) == 1
    finally:
        runner.close()
