"""The head's own sweep speaks of its share of a level; its lines are read as the level's."""

from engine.multihost.head import share_words


def test_a_line_about_the_share_names_the_level_and_the_share() -> None:
    line = "level 2: the server's statistics came too late to stand for a window's edges"
    assert share_words(line, 4.0, 2.0) == ("level 4 (host 0's share: 2): the server's statistics came too late to "
                                           "stand for a window's edges")
    assert share_words("level 2 failed: every request in a window failed", 4.0, 2.0).startswith(
        "level 4 (host 0's share: 2) failed:")


def test_other_lines_are_left_as_they_are() -> None:
    assert share_words("level 25: x", 50.0, 2.0) == "level 25: x"  # another level's number that starts alike
    assert share_words("load generator failed: gone", 4.0, 2.0) == "load generator failed: gone"
