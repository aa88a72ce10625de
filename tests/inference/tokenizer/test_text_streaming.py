"""IncrementalDetokenizer (bytes -> text) and StopStringMatcher (text held back at stops)."""

from __future__ import annotations

import pytest

from inference.tokenizer.detokenizer import IncrementalDetokenizer
from inference.tokenizer.stop_strings import StopResult, StopStringMatcher

REPLACEMENT = "\ufffd"


def feed_all(pieces: list[bytes]) -> list[str]:
    d = IncrementalDetokenizer()
    return [d.feed(p) for p in pieces] + [d.flush()]


def push_all(stops: tuple[str, ...], pieces: list[str]) -> tuple[list[StopResult], str]:
    m = StopStringMatcher(stops)
    return [m.push(p) for p in pieces], m.flush()


# ----- detokenizer ------------------------------------------------------------------------------


def test_ascii_passes_straight_through() -> None:
    assert feed_all([b"Hello", b", ", b"world"]) == ["Hello", ", ", "world", ""]


@pytest.mark.parametrize("char", ["é", "€", "😀", "中"])
def test_multibyte_character_split_byte_by_byte(char: str) -> None:
    data = char.encode()
    assert len(data) >= 2
    out = feed_all([bytes([b]) for b in data])
    assert out[:-2] == [""] * (len(data) - 1)  # nothing until the last byte
    assert out[-2] == char
    assert out[-1] == ""


def test_characters_straddling_piece_boundaries() -> None:
    text = "naïve 😀 日本語 ok"
    data = text.encode()
    pieces = [data[i : i + 3] for i in range(0, len(data), 3)]  # cuts through characters
    out = feed_all(pieces)
    assert "".join(out) == text
    for delta in out:
        delta.encode("utf-8")  # every delta is whole characters (no lone surrogates)


def test_invalid_byte_becomes_replacement_character() -> None:
    assert "".join(feed_all([b"a", b"\xff", b"b"])) == f"a{REPLACEMENT}b"


def test_broken_sequence_followed_by_ascii() -> None:
    # a 3-byte lead with only one continuation byte, then plain text
    assert "".join(feed_all([b"\xe2\x82", b"x"])) == f"{REPLACEMENT}x"


def test_truncated_character_at_the_end_is_flushed_as_replacement() -> None:
    d = IncrementalDetokenizer()
    assert d.feed("€".encode()[:2]) == ""
    assert d.flush() == REPLACEMENT
    assert d.flush() == ""


def test_empty_piece_is_harmless() -> None:
    d = IncrementalDetokenizer()
    assert d.feed(b"") == ""
    assert d.feed(b"\xc3") == ""
    assert d.feed(b"") == ""
    assert d.feed(b"\xa9") == "é"


# ----- stop strings ------------------------------------------------------------------------------


def test_without_stops_text_passes_straight_through() -> None:
    m = StopStringMatcher(())
    assert m.push("abc") == StopResult("abc", False)
    assert m.flush() == ""


def test_empty_stop_strings_are_ignored() -> None:
    m = StopStringMatcher(("",))
    assert m.push("abc") == StopResult("abc", False)


def test_stop_inside_one_push_cuts_the_text() -> None:
    results, _ = push_all(("STOP",), ["hello STOP world"])
    assert results == [StopResult("hello ", True)]


def test_stop_string_spanning_pushes() -> None:
    results, rest = push_all(("</s>",), ["Hi <", "/", "s", ">tail"])
    assert results == [
        StopResult("Hi ", False),
        StopResult("", False),
        StopResult("", False),
        StopResult("", True),
    ]
    assert rest == ""


def test_held_text_is_released_when_it_cannot_become_a_stop() -> None:
    results, rest = push_all(("</s>",), ["a <", "/x", "y"])
    assert results == [StopResult("a ", False), StopResult("</x", False), StopResult("y", False)]
    assert rest == ""


def test_flush_releases_text_held_at_the_end() -> None:
    results, rest = push_all(("###",), ["answer #", "#"])
    assert [r.text for r in results] == ["answer ", ""]
    assert not any(r.stopped for r in results)
    assert rest == "##"


def test_longest_partial_prefix_is_held() -> None:
    m = StopStringMatcher(("aab",))
    assert m.push("xaaa") == StopResult("xa", False)  # "aa" may still become "aab"
    assert m.push("b") == StopResult("", True)


def test_partial_prefix_of_any_stop_is_held() -> None:
    m = StopStringMatcher(("END", "<eot>"))
    assert m.push("a <eo") == StopResult("a ", False)
    assert m.push("x E") == StopResult("<eox ", False)
    assert m.push("N") == StopResult("", False)
    assert m.flush() == "EN"


def test_earliest_stop_wins() -> None:
    results, _ = push_all(("world", "lo"), ["hello world"])
    assert results == [StopResult("hel", True)]
    results, _ = push_all(("lo", "world"), ["hello world"])
    assert results == [StopResult("hel", True)]


def test_the_matcher_says_which_stop_ended_the_text() -> None:
    m = StopStringMatcher(("world", "lo"))
    assert m.push("hel") == StopResult("he", False) and m.matched is None  # "l" may become "lo"
    assert m.push("lo world") == StopResult("l", True)
    assert m.matched == "lo"  # the earliest, not the first listed (Anthropic's stop_sequence)


def test_held_text_is_emitted_up_to_a_different_stop() -> None:
    # "<en" is held for "<end>", then "ZZ" completes: the held text before it comes out
    results, _ = push_all(("<end>", "ZZ"), ["a<en", "xZZ tail"])
    assert results == [StopResult("a", False), StopResult("<enx", True)]


def test_after_a_stop_nothing_stays_held() -> None:
    m = StopStringMatcher(("STOP",))
    assert m.push("ST") == StopResult("", False)
    assert m.push("OP and S") == StopResult("", True)
    assert m.flush() == ""


def test_shorter_stop_found_inside_a_held_longer_one() -> None:
    results, _ = push_all(("abcd", "bc"), ["xab", "c"])
    assert results == [StopResult("x", False), StopResult("a", True)]


def test_multibyte_text_with_stops() -> None:
    results, rest = push_all(("。",), ["日本", "語。", "残り"])
    assert [r.text for r in results[:2]] == ["日本", "語"]
    assert results[1].stopped


def test_detokenizer_and_matcher_together() -> None:
    """Bytes of '¿Qué?<|end|>' fed one at a time: text comes out whole, stop is cut."""
    d, m = IncrementalDetokenizer(), StopStringMatcher(("<|end|>",))
    emitted, stopped = "", False
    for b in "¿Qué?<|end|>ignored".encode():
        result = m.push(d.feed(bytes([b])))
        emitted += result.text
        if result.stopped:
            stopped = True
            break
    assert stopped
    assert emitted == "¿Qué?"
