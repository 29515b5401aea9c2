import xml.etree.ElementTree as ET

from engine.record.svg import HEIGHT, Rule, Series, bar_chart, line_chart, log10_ticks, nice_ticks


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


SVG = "{http://www.w3.org/2000/svg}"


def test_log10_ticks_cover_the_range_in_1_2_5_steps() -> None:
    assert log10_ticks(12, 1200) == [10, 20, 50, 100, 200, 500, 1000, 2000]
    assert log10_ticks(0.5, 0.7) == [0.5, 1.0]
    assert log10_ticks(1, 1e6) == [1, 10, 100, 1000, 10000, 100000, 1000000]  # many decades: whole ones only


def test_a_log_y_axis_keeps_a_low_target_and_a_high_tail_apart() -> None:
    """A 50 ms target under a 1.2 s tail: on a linear axis both sit in the bottom 5 %; on the log
    axis the target line lies well inside the plot, between the points at 20 ms and 1200 ms."""
    svg = line_chart("p99", [Series("p99", [(1, 20.0), (2, 60.0), (3, 1200.0)], hollow=[False, True, False])],
                     "x", "ms", log_y=True, rules=[Rule(50.0, "target 50 ms", color="#d62728")])
    root = ET.fromstring(svg)
    ys = sorted(float(c.get("cy")) for c in root.iter(f"{SVG}circle"))
    [target] = [float(line.get("y1")) for line in root.iter(f"{SVG}line") if line.get("stroke") == "#d62728"
                and line.get("stroke-dasharray") == "6 3"]
    assert ys[0] < target < ys[-1] and ys[-1] - target > (ys[-1] - ys[0]) * 0.2
    assert [c.get("fill") for c in root.iter(f"{SVG}circle")] == ["#1f77b4", "white", "#1f77b4"]  # the unsound one is open
    assert "target 50 ms" in svg  # named in the legend
    assert all(0 <= y <= HEIGHT for y in ys)


def test_vertical_rules_mark_boundaries_and_widen_the_x_range() -> None:
    svg = line_chart("t", [Series("s", [(10.0, 1.0), (20.0, 2.0)])], "s", "y", continuous_x=True,
                     rules=[Rule(5.0, "1", vertical=True), Rule(15.0, "4", vertical=True)])
    root = ET.fromstring(svg)
    verticals = [line for line in root.iter(f"{SVG}line") if line.get("stroke-dasharray") == "2 3"]
    assert len(verticals) == 2
    assert float(verticals[0].get("x1")) < min(float(c.get("cx")) for c in root.iter(f"{SVG}circle"))
    assert [t.text for t in root.iter(f"{SVG}text") if t.get("font-size") == "9"] == ["1", "4"]
