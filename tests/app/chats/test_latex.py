"""Finding LaTeX math in a reply's Markdown and rendering it with matplotlib's mathtext."""

import threading

import numpy as np

from app.chats import latex
from app.chats.latex import math_spans, render


def sources(text: str) -> list[tuple[str, bool]]:
    return [(s.source, s.display) for s in math_spans(text)]


def test_the_four_delimiters():
    text = r"Inline $e^{i\pi}+1=0$ and \(a^2+b^2=c^2\); display $$\int_0^1 x\,dx$$ and \[\sum_{k=1}^n k\]."
    assert sources(text) == [(r"e^{i\pi}+1=0", False), ("a^2+b^2=c^2", False), (r"\int_0^1 x\,dx", True),
                             (r"\sum_{k=1}^n k", True)]
    spans = math_spans(text)
    assert text[spans[0].start:spans[0].end] == r"$e^{i\pi}+1=0$"


def test_display_math_over_several_lines():
    text = "The sum:\n\n$$\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n$$\n\nso 55 for n = 10."
    assert sources(text) == [(r"\sum_{k=1}^{n} k = \frac{n(n+1)}{2}", True)]


def test_prices_are_not_math():
    assert sources("It costs $5 and $10, or $20 in all.") == []
    assert sources("From $5 to $10; $3.50 each") == []
    assert sources("$x$5 and $y$") == [("y", False)]  # a closing $ is never followed by a digit
    assert sources("US$ 3 and $ x $") == []  # a space after the opening or before the closing $
    assert sources(r"An escaped \$x\$ stays text") == []
    assert sources("$x$ but $$ $$") == [("x", False)]


def test_no_math_inside_code():
    text = "Use `$HOME/$USER` or\n\n```sh\necho $PATH $x$\n```\n\nbut $y$ is math."
    assert sources(text) == [("y", False)]
    assert sources("Run `a$b$c` now") == []


def test_a_dollar_inside_a_paragraph_does_not_reach_across_a_blank_line():
    assert sources("cost $a\n\nand b$ here") == []


def test_rendered_as_a_coverage_mask_with_its_depth_and_cached():
    mask = render(r"\frac{a}{b} + x_i^2", 16.0)
    assert mask is not None and mask.alpha.dtype == np.uint8
    assert mask.height > 16 and mask.width > 30 and 0 < mask.depth < mask.height  # a fraction reaches below
    assert mask.alpha.max() == 255 and mask.alpha.min() == 0
    assert render(r"\frac{a}{b} + x_i^2", 16.0) is mask  # cached
    bigger = render(r"\frac{a}{b} + x_i^2", 16.0, scale=2.0)
    assert bigger is not None and abs(bigger.width - 2 * mask.width) <= 2  # a 2x screen: twice the pixels
    assert render(r"\notacommand{x}", 16.0) is None  # the view shows the source


def test_warm_up_runs_once_off_the_calling_thread():
    done = threading.Event()
    threads = []
    latex._state.update(started=False)

    def finished():
        threads.append(threading.current_thread())
        done.set()

    latex.warm_up(finished)
    latex.warm_up(finished)  # a second call does nothing
    assert done.wait(30)
    assert latex.ready() and threads == [threads[0]] and threads[0] is not threading.main_thread()
