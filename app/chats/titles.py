"""Chat titles the loaded model writes after the first exchange: the request, and turning
what the model says into a short title (or, when that fails, a title from the user's words).

The default model is tiny (SmolLM2-135M): asked plainly ("write a title for this chat") it
answers the question instead, and given the reply as well it drifts further. What works
(measured on it and on Gemma 3 270M, a base model, over a dozen first messages): a system
line saying never to answer, a few examples as earlier turns, and the user's first message
alone. The examples and system line are the same for every chat, so the engine's prefix
cache computes them once. Whatever comes back is cleaned and checked against the chat's
words; a title that shares none is the model's invention and gives way to the fallback.
"""

from __future__ import annotations

import re
import unicodedata

from inference import SPARE_PRIORITY, TITLE_OWNER, ChatRequest, SamplingParams

TITLE_CHARS = 48
MAX_WORDS = 8  # a longer "title" is an answer or a sentence
MAX_TOKENS = 20  # a 48-character title is about 12 tokens
PROMPT_CHARS = 400  # of the user's message: the title is in its start, the rest costs prefill

SYSTEM = ("You write a short title of 3 to 6 words for the chat message you are given, in Title Case. "
          "You never answer or follow the message.")
EXAMPLES = (
    ("What is the boiling point of water?", "Boiling Point of Water"),
    ("How do I sort a dict by value in Python?", "Sorting a Dict by Value"),
    ("help me write a cover letter for a nurse job", "Nurse Job Cover Letter"),
    ("Write a poem about the sea", "Poem About the Sea"),
    ("Translate 'thank you' into French", "Thank You in French"),
    ("Tell me a story about a dragon", "Dragon Story"),
    ("hello", "Greeting"),
)

_LABEL = re.compile(r"^(?:(?:chat|suggested|short)\s+)?title(?:\s+for)?\s*[:\-–—]\s*", re.IGNORECASE)
_PREFACE = re.compile(r"^(?:here(?:'s| is)|sure|okay|ok)\b.*?\btitle\b[^:]*:\s*", re.IGNORECASE)
_LIST_MARK = re.compile(r"^(?:[#>*\-•]+|\d+[.)])\s*")
_LEAD_INS = re.compile(
    r"^(?:please|can you|could you|would you|will you|help me(?: to)?|i want to|i need to|i'd like to|"
    r"i would like to)\b[\s,]*", re.IGNORECASE)
_QUOTES = "\"'`*_“”‘’«»"
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_CLAUSE = re.compile(r"\s*(?::|,|;|\s[-–—])\s")
_TRAILING = ".,;:!?-–—…·"
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def title_request(first_message: str, request_id: str) -> ChatRequest:
    """A short greedy request below every tab's priority: it runs on spare capacity only.
    It stops at the end of the line: a base model (no end of turn) goes on inventing chats."""
    sampling = SamplingParams.greedy(max_tokens=MAX_TOKENS, stop=("\n",))
    return ChatRequest(messages=title_messages(first_message), sampling=sampling, priority=SPARE_PRIORITY,
                       request_id=request_id, overflow="drop_oldest", owner=TITLE_OWNER)


def title_messages(first_message: str) -> tuple[dict, ...]:
    messages = [{"role": "system", "content": SYSTEM}]
    for message, title in EXAMPLES:
        messages += [{"role": "user", "content": f"Title for: {message}"}, {"role": "assistant", "content": title}]
    messages.append({"role": "user", "content": f"Title for: {_shorten(first_message, PROMPT_CHARS)}"})
    return tuple(messages)


def make_title(output: str, first_message: str, reply: str = "") -> str:
    """The model's output as a title, or the fallback when it is empty or not about the chat."""
    title = clean_title(output, source=f"{first_message}\n{reply}")
    if is_usable(title, f"{first_message}\n{reply}"):
        return title
    return fallback_title(first_message)


def clean_title(output: str, source: str = "") -> str:
    """One line of the output, without labels, quotes, markdown, drift into another script
    or shouting (source: the chat's text, to tell), trailing punctuation; cut to a title."""
    line = _title_line(output)
    line = _cut_at_foreign_script(line, source)
    line = _drop_trailing_noise(line, source)
    return _tidy(line)


def is_usable(title: str, source: str) -> bool:
    """Has letters, is title-sized, and shares a word with the chat (else it is invented)."""
    words = [w.lower() for w in _WORD.findall(title)]
    if not words or len(words) > MAX_WORDS or max(words.count(w) for w in words) > 2:
        return False  # nothing, a sentence, or a loop ("A: A: A: A:")
    known = {w.lower() for w in _WORD.findall(source)}
    content = [w for w in words if len(w) >= 3] or words
    return any(_same_word(w, known) for w in content)


def fallback_title(first_message: str) -> str:
    """The start of the user's first message, tidied: what a title falls back to."""
    return _tidy(_first_prose_line(first_message), ellipsis=True)


_MARKUP = re.compile(r"\*\*|__|`+|^#+\s*|^>\s*")
STAND_IN_CHARS = 60


def stand_in_title(first_message: str) -> str:
    """What a new chat is called until the model's title comes: its first line of prose
    without Markdown markup (a tab read "Explain how a **hash map** works")."""
    line = _MARKUP.sub("", _first_prose_line(first_message).strip())
    return " ".join(line.split())[:STAND_IN_CHARS].rstrip()


# ----- internals ---------------------------------------------------------------------------


def _title_line(output: str) -> str:
    """The first line that holds a title: a preface ("Here's a title:") is skipped or cut."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        line = _PREFACE.sub("", line)
        line = _LABEL.sub("", _LIST_MARK.sub("", line)).strip()
        if not line or (line.endswith(":") and i + 1 < len(lines)):
            continue  # a preface alone on its line: the title follows
        return line
    return ""


def _first_prose_line(text: str) -> str:
    """The first non-empty line outside code fences (else the first line of code)."""
    in_code, code = False, ""
    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_code = not in_code
        elif line.strip() and not in_code:
            return line
        elif line.strip() and not code:
            code = line
    return code


def _script(char: str) -> str:
    return unicodedata.name(char, "?").split(" ")[0]


def _cut_at_foreign_script(text: str, source: str) -> str:
    """A tiny model drifts into another script mid-title ("Capital of Franceとは"): cut there,
    unless the chat itself uses that script."""
    known = {_script(c) for c in source if c.isalpha()}
    for i, char in enumerate(text):
        if char.isalpha() and known and _script(char) not in known:
            return text[:i]
    return text


def _drop_trailing_noise(text: str, source: str) -> str:
    """A base model's web-page tail after the title: a shouted word ("Green Tea SUBSCRIBE")
    or a lowercase one after Title Case ("Green Tea devenue") that the chat never used."""
    words = text.split()
    known = source.lower()
    while len(words) > 1 and words[-1].lower() not in known:
        last, before = words[-1], words[-2]
        shouted = last.isupper() and len(last) >= 4
        if not (shouted or (last.islower() and before[:1].isupper())):
            break
        words.pop()
    return " ".join(words)


def _tidy(text: str, ellipsis: bool = False) -> str:
    text = " ".join(text.split())
    text = _strip_quotes(text)
    text = _LEAD_INS.sub("", _LEAD_INS.sub("", text))
    end = _SENTENCE_END.search(text)
    if end and end.start() > 0:
        text = text[: end.start()]  # one sentence: the rest is an answer or a second question
    words = text.split()
    if len(words) > MAX_WORDS or len(text) > TITLE_CHARS:
        clause = _CLAUSE.search(text)
        if clause and len(text[: clause.start()].split()) >= 2:
            text = text[: clause.start()]
    text = _strip_quotes(text).rstrip(_TRAILING + " ")
    text = _shorten(text, TITLE_CHARS, "…" if ellipsis else "")
    return text[:1].upper() + text[1:]


def _strip_quotes(text: str) -> str:
    return text.strip().strip(_QUOTES).strip()


def _shorten(text: str, limit: int, mark: str = "") -> str:
    """At most limit characters, cut at a word boundary."""
    if len(text) <= limit:
        return text
    cut = text[: limit - len(mark) + 1].rsplit(" ", 1)[0] if " " in text[:limit] else text[: limit - len(mark)]
    return cut.rstrip(_TRAILING + " ") + mark


def _same_word(word: str, known: set[str]) -> bool:
    """In the chat, or sharing its first five letters with a word of it (plural, -ing...)."""
    if word in known:
        return True
    return len(word) >= 5 and any(k[:5] == word[:5] for k in known if len(k) >= 5)
