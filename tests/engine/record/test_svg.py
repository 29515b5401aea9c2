import xml.etree.ElementTree as ET

from engine.record.svg import Series, bar_chart, line_chart, nice_ticks


def test_nice_ticks() -> None:
    assert nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(0, 0.9) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0, 1200) == [0, 250, 500, 750, 1000, 1250]
    assert nice_ticks(5, 5) == [5, 6, 7, 8, 9, 10]  # a flat series still gets an axis


def test_charts_are_well_formed_and_escaped() -> None:
    charts = [
        line_chart("a <b> & c", [Series("s<1>", [(1, 10.0), (4, 40.0), (128, 50.0)], errors=[(9, 11), (39, 41), (49, 51)])],
                   "concurrency", "images/s", log2_x=True),
        line_chart("empty", [Series("s", [])], "x", "y"),
        bar_chart("bars", ["1", "4"], [("queue", [1.0, None]), ("compute", [2.0, 3.0])], "ms", stacked=True),
        bar_chart("grouped", ["a", "b"], [("x", [1.0, 2.0]), ("y", [0.5, 4.0])], "%"),
    ]
    for svg in charts:
        root = ET.fromstring(svg)
        assert root.tag.endswith("svg")
    assert "a &lt;b&gt; &amp; c" in charts[0] and "no data" in charts[1]
    assert charts[0].count("<circle") == 3 and charts[0].count("<line") >= 3


def test_stacked_bars_stack() -> None:
    svg = bar_chart("s", ["only"], [("a", [2.0]), ("b", [2.0])], "ms", stacked=True)
    rects = ET.fromstring(svg).findall("{http://www.w3.org/2000/svg}rect")
    (y_a, h_a), (y_b, h_b) = [(float(r.get("y")), float(r.get("height"))) for r in rects]
    assert abs(h_a - h_b) < 0.2 and abs((y_b + h_b) - y_a) < 0.2  # b sits on top of a
