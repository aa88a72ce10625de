"""`chorus bench`'s workload: N chats sharing a system prompt of about S tokens, rendered and
tokenized once so that the engine and the baselines get exactly the same prompt tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.bench.edit_code import EDIT_CODE

if TYPE_CHECKING:
    from inference import Engine

SENTENCES = (
    "You are Chorus, a careful assistant who answers in plain language.",
    "Prefer short paragraphs, concrete examples and honest uncertainty.",
    "When the user asks about code, explain the idea before showing the snippet.",
    "Never invent citations; say when you do not know something.",
    "Keep units, names and numbers exactly as the user wrote them.",
    "If a question is ambiguous, state the reading you chose in one sentence.",
    "Summaries come first, details after, and a final line with next steps.",
    "Respect the user's time: no filler, no repetition, no flattery.",
)
TOPICS = (
    "why the sky is blue", "how a hash map works", "the rules of chess castling",
    "what causes tides", "how to brew green tea", "the history of the printing press",
    "how vaccines train immunity", "why bridges have expansion joints", "how compilers parse code",
    "what a black hole is", "how bread rises", "why leaves change colour",
    "how GPS finds a position", "what inflation means", "how bees make honey", "why ice floats",
)


# The edit workload (`chorus bench --workload edit`): each chat asks the model to repeat a
# Python file with a class renamed, so its output copies its prompt but for the new name
# (what speculative decoding's prompt lookup serves). A fixed file written for it, which the
# default small model repeats (not a file of the tree, which changes).

EDIT_NAMES = ("Stockroom", "Warehouse", "Storehouse", "Depot", "Pantry", "Larder", "Cellar", "Granary")
EDIT_PROMPT_TOKENS = 1024  # a bound on one edit prompt's tokens, for sizing the context


def edit_messages(chat: int) -> list[dict]:
    """Chat `chat`'s edit request: the shared file, then its own new name for the class."""
    name = EDIT_NAMES[chat % len(EDIT_NAMES)] + (str(chat // len(EDIT_NAMES)) if chat >= len(EDIT_NAMES) else "")
    return [{"role": "user", "content": f"```python\n{EDIT_CODE}```\n\n"
                                        f"Repeat the code above, with the class Inventory renamed to {name}."}]


class SystemPromptError(RuntimeError):
    """The bench cannot build its shared system prompt with this model's template."""


@dataclass(frozen=True)
class Workload:
    system_prompt: str
    questions: list[str]
    prompts: list[list[int]]  # rendered and tokenized, identical for both runs
    warm_prompt: list[int]
    max_tokens: int


def build_workload(engine: Engine, chats: int, system_tokens: int, max_tokens: int) -> Workload:
    system = _system_prompt(engine, system_tokens)
    questions = [f"Question {i + 1}: explain {TOPICS[i % len(TOPICS)]} in a few sentences." for i in range(chats)]
    prompts = [
        engine.inputs.chat_tokens([{"role": "system", "content": system}, {"role": "user", "content": q}])
        for q in questions
    ]
    warm = engine.inputs.chat_tokens(
        [{"role": "system", "content": system}, {"role": "user", "content": "Say hello."}]
    )
    return Workload(system, questions, prompts, warm, max_tokens)


def build_edit_workload(engine: Engine, chats: int, max_tokens: int) -> Workload:
    """Each chat repeats EDIT_CODE with its own rename: no system prompt; the warm prompt is
    the first chat's, whose file the others share."""
    prompts = [engine.inputs.chat_tokens(edit_messages(i)) for i in range(chats)]
    questions = [m[-1]["content"] for m in (edit_messages(i) for i in range(chats))]
    return Workload("", questions, prompts, prompts[0], max_tokens)


def _system_prompt(engine: Engine, target_tokens: int) -> str:
    """The longest text of rules whose shareable prefix (what pinning caches, derived for
    any template) stays within target_tokens; at least one rule. A template that leaves
    the system text out of that prefix stops the growth at once instead of looping."""
    parts: list[str] = []
    size = 0
    for i in range(max(target_tokens, 1) + 1):  # each rule adds tokens, so this is enough
        rule = f"Rule {i + 1}: {SENTENCES[i % len(SENTENCES)]}"
        grown = _prefix_size(engine, " ".join(parts + [rule]))
        if grown > target_tokens and parts:
            return " ".join(parts)
        if grown <= size:
            raise SystemPromptError(
                "this model's chat template does not put the system prompt into the prefix its "
                "chats share, so a system prompt cannot be sized for the bench"
            )
        parts.append(rule)
        size = grown
    return " ".join(parts)


def _prefix_size(engine: Engine, system_prompt: str) -> int:
    return len(engine.inputs.system_prefix_tokens(system_prompt))


def common_prefix(prompts: list[list[int]]) -> int:
    """Tokens at the start of every prompt (the shared system prefix and what follows it)."""
    first = prompts[0]
    n = len(first)
    for p in prompts[1:]:
        n = min(n, next((i for i, (a, b) in enumerate(zip(first, p)) if a != b), min(len(first), len(p))))
    return n
