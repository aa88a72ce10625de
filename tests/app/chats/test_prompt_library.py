"""Saved prompts (app/chats/prompt_library.py): variables, matching what follows "/",
tolerant reading, and why a prompt cannot be saved."""

from app.chats.prompt_library import SavedPrompt, dumped, first_variable, loaded, matching, problem

SUMMARY = SavedPrompt("summarise", "Summarise {{text}} in {{ n }} bullet points for {{text}}'s readers.")
TRANSLATE = SavedPrompt("translate", "Translate into French:\n{{text}}")
REVIEW = SavedPrompt("code review", "Review this code for bugs.")


def test_variables_are_named_once_in_order_and_the_first_is_found():
    assert SUMMARY.variables() == ["text", "n"]
    assert REVIEW.variables() == []
    assert first_variable(SUMMARY.text) == (10, 18)
    assert first_variable(REVIEW.text) is None


def test_names_starting_with_what_is_typed_come_before_names_containing_it():
    library = [SUMMARY, TRANSLATE, REVIEW]
    assert matching(library, "") == library
    assert matching(library, "Tr") == [TRANSLATE]
    assert matching(library, "re") == [REVIEW]
    assert matching(library, "e") == [SUMMARY, TRANSLATE, REVIEW]  # each contains it, none starts with it
    assert matching([TRANSLATE, SavedPrompt("e-mail", "x")], "e") == [SavedPrompt("e-mail", "x"), TRANSLATE]
    assert matching(library, "zz") == []


def test_the_library_is_read_tolerantly_and_written_back_as_it_was():
    value = [{"name": " summarise ", "text": SUMMARY.text}, {"name": "", "text": "x"}, {"name": "blank", "text": " "},
             "junk", {"name": 3, "text": "x"}]
    assert loaded(value) == [SUMMARY]
    assert loaded(dumped([SUMMARY, TRANSLATE])) == [SUMMARY, TRANSLATE]
    assert loaded("junk") == loaded(None) == []


def test_a_prompt_needs_a_name_of_its_own_and_a_text():
    assert problem(" ", "x", []) == "A prompt needs a name (typed after / in the composer)."
    assert problem("a", "  ", []) == "A prompt needs a text."
    assert problem("Summarise", "x", [SUMMARY]) == "There is already a prompt called Summarise."
    assert problem("brief", "x", [SUMMARY]) is None
