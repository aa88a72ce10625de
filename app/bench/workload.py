"""`chorus bench`'s workload: N chats sharing a system prompt of about S tokens, rendered and
tokenized once so that the engine and the baselines get exactly the same prompt tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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


# The edit workload (`chorus bench --workload edit`): each chat asks the model to copy a
# text, so its output copies its prompt (what speculative decoding's prompt lookup serves).
# A fixed text the default small model copies reliably (this project's README front page
# as it was when the workload was written), not a file of the tree that changes.
EDIT_INSTRUCTION = "Copy the following text exactly, word for word:\n\n"
EDIT_TEXT = """# Chorus

Many local LLM chats at once, all served by **one** continuously batched llama.cpp engine.
Every conversation that is generating joins the same `llama_decode` loop; conversations that
start with the same system prompt share that prompt's KV cells instead of computing and
storing it again. The reply in the tab you are looking at goes first, other tabs next, chat
titles only on spare capacity. Chats are kept in a SQLite history (a killed process loses at
most the last second of a reply); a live performance panel shows throughput, batch, KV cache
and latency as they happen; a compare view puts 2 to 4 models or settings side by side on
one prompt. The same engine serves an OpenAI-compatible HTTP API, and the app's tabs can use
a remote OpenAI-compatible server instead of a local model.

Status: the engine, chat storage, the desktop app (PySide6) with side-by-side comparison and
its live performance panel, an OpenAI-compatible server, remote models, the terminal chat and
the benchmarks are here. It installs as a desktop application (a one-folder bundle, or from
source, with a desktop entry)."""


def edit_messages(chat: int) -> list[dict]:
    """Chat `chat`'s edit request: the shared text, then a line of its own."""
    return [{"role": "user", "content": f"{EDIT_INSTRUCTION}{EDIT_TEXT}\n\n(Copy {chat + 1}.)"}]


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
