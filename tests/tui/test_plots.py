"""tui/plots.py: braille charts as text, checked cell by cell where it matters."""

from __future__ import annotations

from tui.plots import BRAILLE, Line, area_rows, line_chart


def _plain(chart) -> list[str]:  # noqa: ANN001
    return [line.plain for line in chart.lines]


def test_a_log_axis_labels_its_decades_and_marks_an_unstable_point_open() -> None:
    knee = Line("p99", [(100.0, 0.002), (400.0, 0.02), (500.0, 0.2)], "red", markers=True, unsound=[False, False, True])
    lines = _plain(line_chart([knee], 40, 7, log_y=True, y_format=lambda v: f"{v * 1000:g}"))
    # whole decades from 1 ms to 1 s, each on its row where there is room
    assert [line[:7] for line in lines[:7] if "┤" in line[:7]] == ["  1000┤", "   100┤", "    10┤", "     1┤"]
    assert "".join(lines).count("●") == 2 and "".join(lines).count("○") == 1
    at = sorted((line.index(m), row) for row, line in enumerate(lines[:7]) for m in "●○" if m in line)
    assert [row for _col, row in at] == sorted((row for _col, row in at), reverse=True)  # up and to the right
    assert lines[7].startswith("      └─")


def test_level_boundaries_are_marked_and_labelled_on_the_time_axis() -> None:
    tp = Line("infer/s", [(t, 100.0 + t) for t in range(0, 60, 2)], "green")
    lines = _plain(line_chart([tp], 50, 4, marks=[(0, "1"), (20, "4"), (40, "16")]))
    axis, labels = lines[-2], lines[-1]
    assert axis.count("┴") == 3
    assert [labels[i] for i, c in enumerate(axis) if c == "┴"] == ["1", "4", "1"]  # "16" starts at its mark
    assert any(BRAILLE < ord(c) <= BRAILLE + 0xFF for c in "".join(lines[:4]))


def test_no_data_is_said_not_drawn() -> None:
    lines = _plain(line_chart([Line("x", [])], 30, 3))
    assert "no data yet" in lines[1]


def test_area_rows_fill_from_the_bottom_newest_on_the_right() -> None:
    full, empty = chr(BRAILLE + 0xFF), " "
    top, bottom = area_rows([100.0, 100.0], 3, 2, 100.0)  # one cell of samples, at the right
    assert (top[-1], bottom[-1]) == (full, full) and top[:2] == bottom[:2] == empty * 2
    top, bottom = area_rows([50.0, 50.0], 1, 2, 100.0)
    assert (top, bottom) == (empty, full)  # half of 8 dots: the bottom row
