"""The reasoning splitter on recorded replies: the delta sequences below are literal, as
reasoning models stream them (the tiny test models do not think). Qwen3 writes `<think>` and
`</think>` as one token each; a remote server or a tokenizer without those tokens splits
them anywhere."""

from app.chats.reasoning import (
    THINK,
    ReasoningSplitter,
    estimated_thought_s,
    split_reasoning,
    strip_reasoning,
)

# Qwen3-0.6B, "What is 2+2?", as its deltas came (one token each).
QWEN3 = ["<think>", "\n", "Okay", ",", " the", " user", " is", " asking", " what", " ", "2", "+", "2", " is",
         ".", "\n", "</think>", "\n\n", "2", " +", " ", "2", " =", " **", "4", "**", "."]
# The same reply through a server that cut its chunks by characters, splitting both tags.
SPLIT_TAGS = ["<", "thi", "nk>\nOkay, the user is asking what 2+2 is.\n</", "thi", "nk", ">\n\n2 + 2 = **4**."]


def feed_all(deltas, splitter=None):
    splitter = splitter or ReasoningSplitter()
    pieces = [splitter.feed(d, tokens=1) for d in deltas] + [splitter.finish()]
    return splitter, "".join(p.reasoning for p in pieces), "".join(p.answer for p in pieces), pieces


def test_a_qwen3_reply_splits_into_its_reasoning_and_its_answer():
    splitter, reasoning, answer, _ = feed_all(QWEN3)
    assert reasoning == "Okay, the user is asking what 2+2 is.\n"
    assert answer == "2 + 2 = **4**."
    # <think>, 15 reasoning tokens, </think> and the blank line are reasoning; 9 answer tokens.
    assert (splitter.reasoning_tokens, splitter.answer_tokens) == (18, 9)
    assert not splitter.thinking and splitter.had_reasoning


def test_tags_split_across_deltas_are_held_back_until_they_are_whole():
    splitter, reasoning, answer, pieces = feed_all(SPLIT_TAGS)
    assert (reasoning, answer) == ("Okay, the user is asking what 2+2 is.\n", "2 + 2 = **4**.")
    # Nothing of a marker ever reaches either side: "<", "thi", "</" and "thi" are held.
    assert all("<" not in p.reasoning + p.answer and "nk" not in p.reasoning for p in pieces)
    assert pieces[0] == pieces[1] == pieces[3] == pieces[4] == type(pieces[0])()


def test_an_unclosed_block_is_reasoning_while_streaming_and_when_cut():
    splitter = ReasoningSplitter()
    got = [splitter.feed(d, now=10.0 + i) for i, d in enumerate(["<think>", "Let me", " count", " the r's", " in </"])]
    assert splitter.thinking
    assert "".join(p.reasoning for p in got) == "Let me count the r's in "
    assert all(not p.answer for p in got)
    assert splitter.seconds(now=20.0) == 10.0  # open: until now
    tail = splitter.finish()  # cut at the token limit inside the block
    assert tail.reasoning == "</" and not tail.answer
    assert split_reasoning("<think>Let me count").open


def test_a_reply_without_tags_is_all_answer_and_passes_at_once():
    splitter, reasoning, answer, pieces = feed_all(["Hello", "!", " How", " can", " I", " help", "?"])
    assert (reasoning, answer) == ("", "Hello! How can I help?")
    assert pieces[0].answer == "Hello"  # not held: it cannot begin a marker
    assert not splitter.had_reasoning and splitter.reasoning_tokens == 0 and splitter.answer_tokens == 7
    assert split_reasoning("Hello!") .reasoning is None


def test_text_that_only_looks_like_a_marker_is_the_answer():
    _s, reasoning, answer, _ = feed_all(["<", "b", ">bold</b> and <think> later"])
    assert (reasoning, answer) == ("", "<b>bold</b> and <think> later")
    assert feed_all(["  ", "<th"])[2] == "  <th"  # a reply that ends on a partial marker


def test_think_tags_after_the_answer_began_are_text():
    split = split_reasoning("Use the <think> tag like this: <think>...</think>")
    assert split.reasoning is None and split.answer.startswith("Use the <think>")


def test_a_template_that_opened_the_block_in_the_prompt():
    # DeepSeek-R1-Distill: the generation prompt ends with "<think>\n"; the reply has only "</think>".
    reply = ["Okay", ", 2", "+2", " is 4", ".\n", "</think>", "\n\n", "**4**"]
    splitter, reasoning, answer, _ = feed_all(reply, ReasoningSplitter(opened=True))
    assert (reasoning, answer) == ("Okay, 2+2 is 4.\n", "**4**")
    assert splitter.reasoning_tokens == 7
    # A whole stored reply: a closing marker with no opening one.
    assert split_reasoning("".join(reply)) == type(split_reasoning(""))("Okay, 2+2 is 4.", "**4**")


def test_other_templates_markers():
    split = split_reasoning("[THINK]The user greets me.[/THINK]Hi there!")
    assert (split.reasoning, split.answer) == ("The user greets me.", "Hi there!")
    seed = split_reasoning("<seed:think>hmm</seed:think>ok")
    assert (seed.reasoning, seed.answer) == ("hmm", "ok")
    only_think = split_reasoning("[THINK]x[/THINK]y", markers=(THINK,))
    assert only_think.reasoning is None


def test_the_prompt_keeps_the_answer_alone():
    assert strip_reasoning("".join(QWEN3)) == "2 + 2 = **4**."
    assert strip_reasoning("No reasoning here.\n") == "No reasoning here.\n"  # untouched
    assert strip_reasoning("<think>cut while thinking") == ""


def test_thinking_time_from_the_clock_and_estimated_for_a_stored_reply():
    splitter = ReasoningSplitter()
    for i, d in enumerate(QWEN3):
        splitter.feed(d, tokens=1, now=100.0 + 0.5 * i)
    assert splitter.seconds() == 8.0  # "<think>" at 100.0, "</think>" (delta 16) at 108.0
    text = "<think>" + "r" * 300 + "</think>" + "a" * 100
    assert estimated_thought_s(text, completion_tokens=200, tokens_per_s=20.0) == 7.5
    assert estimated_thought_s("plain", 200, 20.0) is None
    assert estimated_thought_s(text, None, None) is None
