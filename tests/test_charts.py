"""The SVG charts: values land where they should, labels say units and zone, text is escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tickwork._daemon.web.charts import MAX_BARS, outcome_bar, rate_chart, sparkline, time_bars

T0 = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC
DAY = 86400.0
# The plot's frame in SVG units (charts._LEFT, _TOP, _PW, _PH).
LEFT, TOP, PW, PH = 64.0, 10.0, 644.0, 128.0


def parse(svg: str) -> ET.Element:
    """The SVG as XML: well-formed, accessible by its title and role."""
    root = ET.fromstring(svg)
    assert root.tag == "svg" and root.get("role") == "img"
    title = root.find("title")
    assert title is not None and title.text and root.get("aria-label") == title.text
    return root


def bars(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter("rect") if "bar" in (r.get("class") or "")]


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter("text")]


def test_a_duration_maps_to_its_bucket_and_height_with_units_and_zone() -> None:
    points = [(T0 + DAY / 2, 10.0, "ok"), (T0 + DAY / 2 + 30, 4.0, "failed"), (T0 + 60, 5.0, "ok")]
    root = parse(
        time_bars(
            points, start=T0, end=T0 + DAY, zone="Europe/Berlin", what="run duration", bars=144
        )
    )
    drawn = {float(r.get("x", "")): r for r in bars(root)}
    assert len(drawn) == 2  # the two slots at noon share a bucket: one bar
    noon = drawn[LEFT + 72 * PW / 144]
    assert float(noon.get("y", "")) == TOP and float(noon.get("height", "")) == PH  # 10 s: the top
    assert noon.get("class") == "bar failed"  # the worst outcome in the bucket colours it
    assert (noon.findtext("title") or "") == "Fri 21:00: 2 slots, largest 10 s, worst failed"
    first = drawn[LEFT]
    assert float(first.get("height", "")) == pytest.approx(PH / 2, abs=0.1)  # 5 s of 10
    labels = texts(root)
    assert "run duration (s)" in labels and "slot due time (Europe/Berlin)" in labels
    assert "09:00" in labels  # 08:00 UTC is 09:00 in Berlin in January: ticks in the zone
    assert "Europe/Berlin" in (root.findtext("title") or "")
    assert "3 slots in 144 buckets of 10 min" in (root.findtext("desc") or "")


def test_long_values_read_in_minutes_and_a_week_is_at_most_200_bars() -> None:
    week = 7 * DAY
    points = [(T0 + i * 30.0, 600.0 + i % 7, "ok") for i in range(int(week // 30))]
    svg = time_bars(points, start=T0, end=T0 + week, zone="UTC", what="lateness", bars=10_000)
    root = parse(svg)
    assert len(bars(root)) == MAX_BARS
    assert "lateness (min)" in texts(root) and "Sat 16" in texts(root)  # day ticks
    assert len(svg) < 50_000  # 20,160 slots, a bounded page


def test_chart_text_is_escaped() -> None:
    svg = time_bars([(T0, 1.0, "ok")], start=T0, end=T0 + 60, zone="<b>z</b>", what="<i>x</i>")
    assert "<b>" not in svg and "<i>" not in svg and "&lt;i&gt;x&lt;/i&gt; (s)" in svg
    parse(svg)


def test_an_empty_or_reversed_axis() -> None:
    root = parse(time_bars([], start=T0, end=T0 + DAY, zone="UTC", what="lateness"))
    assert bars(root) == [] and root.findtext("desc") == "No slot with a lateness in this time."
    with pytest.raises(ValueError, match=r"end must be after start, got start=1800000000.0, end="):
        time_bars([], start=T0, end=T0, zone="UTC", what="lateness")
    with pytest.raises(ValueError, match="end must be after start"):
        rate_chart([], start=T0, end=T0 - 1, zone="UTC")


def test_runs_per_minute_stack_by_outcome() -> None:
    points = [(T0 + 5, "ok"), (T0 + 6, "ok"), (T0 + 7, "failed"), (T0 + 200, "ok")]
    root = parse(rate_chart(points, start=T0, end=T0 + 3600, zone="UTC", note="All of them."))
    first = [r for r in bars(root) if float(r.get("x", "")) == LEFT]
    ok, failed = (next(r for r in first if r.get("class") == f"bar {o}") for o in ("ok", "failed"))
    # 3 runs in the first minute: the scale tops at 5; ok (2) at the bottom, failed on it.
    assert float(ok.get("height", "")) == pytest.approx(PH * 2 / 5, abs=0.1)
    assert float(failed.get("height", "")) == pytest.approx(PH / 5, abs=0.1)
    assert float(ok.get("y", "")) == pytest.approx(TOP + PH * 3 / 5, abs=0.1)
    assert float(failed.get("y", "")) == pytest.approx(TOP + PH * 2 / 5, abs=0.1)
    assert len(bars(root)) == 3
    assert "runs / min" in texts(root) and "run end time (UTC)" in texts(root)
    assert root.findtext("desc") == "1 failed, 3 ok. All of them."


def test_the_success_rate_bar_counts_runs_and_shows_given_up_slots() -> None:
    root = parse(outcome_bar({"ok": 47, "failed": 3, "missed": 10}, when="last day"))
    assert root.findtext("title") == "success rate, last day: 94% of 50 runs ok"
    widths = {r.get("class"): float(r.get("width", "")) for r in bars(root)}
    assert widths["bar ok"] == pytest.approx(720 * 47 / 60, abs=0.1)
    assert widths["bar missed"] == pytest.approx(720 * 10 / 60, abs=0.1)
    assert parse(outcome_bar({"ok": 1}, when="last day")).findtext("title") == (
        "success rate, last day: 100% of 1 run ok"
    )
    assert "no runs" in (parse(outcome_bar({}, when="x")).findtext("title") or "")


def test_a_sparkline_puts_the_oldest_left_and_the_largest_at_the_top() -> None:
    root = parse(sparkline([1.0, 4.0, 2.0]))
    line = root.find("polyline")
    assert line is not None
    points = [tuple(float(v) for v in p.split(",")) for p in (line.get("points") or "").split()]
    assert points == [(2, 17), (60, 2), (118, 12)]  # 1 of 4, 4 (the top), 2 of 4
    assert "newest 2.00 s, largest 4.00 s" in (root.findtext("title") or "")
    assert sparkline([]) == ""
