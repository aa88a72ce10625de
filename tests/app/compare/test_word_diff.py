from app.compare.word_diff import Op, diff_words, pieces


def test_pieces_keep_words_whole_and_rebuild_the_text():
    text = "Hello,  world!\nIt's 42 degrees."
    assert pieces(text) == ["Hello", ",  ", "world", "!\n", "It", "'", "s ", "42 ", "degrees", "."]
    assert "".join(pieces(text)) == text


def test_a_changed_word_is_one_delete_and_one_insert():
    d = diff_words("The sea is blue today.", "The sea is green today.")
    assert [(r.op, r.text) for r in d.runs] == [
        (Op.EQUAL, "The sea is "), (Op.DELETE, "blue"), (Op.INSERT, "green"), (Op.EQUAL, " today.")]
    assert d.old_text() == "The sea is blue today." and d.new_text() == "The sea is green today."
    assert 0.75 < d.similarity < 0.9  # 5 of 6 words agree


def test_identical_and_disjoint_answers():
    same = diff_words("one two three", "one two three")
    assert [r.op for r in same.runs] == [Op.EQUAL] and same.similarity == 1.0
    apart = diff_words("alpha beta", "gamma delta")
    assert [(r.op, r.text) for r in apart.runs] == [(Op.DELETE, "alpha beta"), (Op.INSERT, "gamma delta")]
    assert apart.similarity == 0.0
    assert diff_words("", "").similarity == 1.0
    assert [(r.op, r.text) for r in diff_words("", "new words").runs] == [(Op.INSERT, "new words")]


def test_whitespace_alone_does_not_change_similarity():
    d = diff_words("a b c", "a\n\nb   c")
    assert d.similarity == 1.0
    assert d.new_text() == "a\n\nb   c"


def test_repeated_common_words_still_match_in_long_answers():
    old = " ".join(f"the cat number {i} sat on the mat and the dog {i} sat by the door" for i in range(30))
    new = old.replace("mat", "rug", 1)
    d = diff_words(old, new)
    assert d.similarity > 0.99
    assert [r.text for r in d.runs if r.op is Op.INSERT] == ["rug"]


def test_spacing_changes_keep_both_texts_exact_and_words_equal():
    d = diff_words("one two\nthree", "one  two three")
    assert d.similarity == 1.0
    assert d.old_text() == "one two\nthree" and d.new_text() == "one  two three"
    assert [r.text for r in d.runs if r.op is Op.EQUAL and r.text.strip()] == ["one", "two", "three"]


def test_long_similar_answers_diff_word_for_word():
    words = [f"word{i % 97}" if i % 5 else "the" for i in range(3000)]
    old = " ".join(words)
    words[1500] = "CHANGED"
    d = diff_words(old, " ".join(words))
    assert [r.text for r in d.runs if r.op is Op.INSERT] == ["CHANGED"]
    assert [r.text for r in d.runs if r.op is Op.DELETE] == [old.split()[1500]]
    assert d.similarity > 0.999
