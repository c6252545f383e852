"""From the rounds' figures to what the runner shows: per key, each side's figure (medians over
the rounds) and its per-round ratios to Interlude's (median and range), as a plain-text table
and as the README's Markdown table; with ``--before``, Interlude now against an older tree of
its own (per key, the figures of both and now over before in each round)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Each key's title and unit, in the order shown (the keys of sides/_harness.py's PLAN).
KEYS: dict[str, tuple[str, str]] = {
    "cycle-20": ("cycle, 20 turns", "us/cycle"),
    "cycle-200": ("cycle, 200 turns", "us/cycle"),
    "cycle-1000": ("cycle, 1,000 turns", "us/cycle"),
    "journal-20": ("journaled cycle, 20 turns, SQLite", "us/cycle"),
    "journal-200": ("journaled cycle, 200 turns, SQLite", "us/cycle"),
    "journal-1000": ("journaled cycle, 1,000 turns, SQLite", "us/cycle"),
    "approval-memory": ("approval round trip, in memory", "us"),
    "approval-sqlite": ("approval round trip, SQLite, fresh agent", "ms"),
    "graph-sqlite": ("graph a -> b, interrupt, SQLite, fresh graph", "ms"),
    "resume-10": ("fresh resume after 10 messages, SQLite", "ms"),
    "resume-1000": ("fresh resume after 1,000 messages, SQLite", "ms"),
    "postgres": ("approval round trip, PostgreSQL, fresh agent", "ms"),
    "import": ("import time, net of a bare interpreter", "ms"),
}
BASE = "interlude"
BEFORE = "interlude_before"  # run.py --before: an older Interlude tree, on Interlude's side script


@dataclass(frozen=True, kw_only=True)
class Spread:
    """A median and its range over the rounds."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(median=statistics.median(values), low=min(values), high=max(values))

    def ratio_text(self) -> str:
        return f"{_ratio(self.median)}x ({_ratio(self.low)}-{_ratio(self.high)})"


def _ratio(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One side on one key: its figures and ratios, or why it has none."""

    side: str
    wall: Spread | None = None
    cpu: Spread | None = None
    wall_ratio: Spread | None = None
    cpu_ratio: Spread | None = None
    api: str = ""
    missing: str = ""  # "n/a: ..." or "error: ..."


@dataclass(frozen=True, kw_only=True)
class KeySummary:
    key: str
    cells: list[Cell] = field(default_factory=list)


Rounds = Sequence[Mapping[str, Mapping[str, Mapping[str, Any]]]]  # [{side: {key: result}}]


def summarize(rounds: Rounds, sides: Sequence[str]) -> list[KeySummary]:
    """Per key (in KEYS order, those any round has), each side's cell. A ratio is taken in
    each round where both the side and Interlude have a figure; its median and range are
    over those rounds."""
    present = {key for found in rounds for results in found.values() for key in results}
    out = []
    for key in [k for k in KEYS if k in present]:
        out.append(KeySummary(key=key, cells=[_cell(rounds, side, key) for side in sides]))
    return out


def _cell(rounds: Rounds, side: str, key: str) -> Cell:
    figures = [r.get(side, {}).get(key) for r in rounds]
    measured = [f for f in figures if f is not None and "wall" in f]
    if not measured:
        first = next((f for f in figures if f is not None), None)
        if first is None:
            return Cell(side=side, missing="not run")
        if "na" in first:
            reason = f"n/a: {first['na']}"
        elif "over" in first:
            reason = f"over budget: {first['over']}"
        else:
            reason = f"error: {first.get('error', '?')}"
        return Cell(side=side, missing=reason)
    pairs = [
        (f, r.get(BASE, {}).get(key))
        for r, f in zip(rounds, figures, strict=True)
        if f is not None and "wall" in f
    ]
    ratios = [(f["wall"] / b["wall"], f["cpu"] / b["cpu"]) for f, b in pairs if b and "wall" in b]
    return Cell(
        side=side,
        wall=Spread.of([f["wall"] for f in measured]),
        cpu=Spread.of([f["cpu"] for f in measured]),
        wall_ratio=Spread.of([w for w, _ in ratios]) if ratios else None,
        cpu_ratio=Spread.of([c for _, c in ratios]) if ratios else None,
        api=str(measured[0].get("api", "")),
    )


@dataclass(frozen=True, kw_only=True)
class Change:
    """One key on Interlude before (``--before``) and now: each side's cell, and now over
    before, wall and CPU, in each round where both have a figure (round numbers from 1)."""

    key: str
    before: Cell
    now: Cell
    rounds: list[int] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def spread_text(self, values: Sequence[float]) -> str:
        return Spread.of(values).ratio_text() if values else "-"

    def line(self) -> str:
        """The ratios, one line: for under the key's table."""
        if not self.rounds:
            why = self.before.missing or self.now.missing or "no round with both"
            return f"now over before: - ({why})"
        each = [
            f"{what} {self.spread_text(values)}, per round " + ", ".join(f"{v:.2f}" for v in values)
            for what, values in (("wall", self.wall), ("CPU", self.cpu))
        ]
        return "now over before: " + "; ".join(each)

    def as_json(self) -> dict[str, Any]:
        def side(cell: Cell) -> dict[str, Any]:
            if cell.wall is None or cell.cpu is None:
                return {"missing": cell.missing}
            return {"wall": asdict(cell.wall), "cpu": asdict(cell.cpu), "api": cell.api}

        ratios = [
            {"round": n, "wall": w, "cpu": c}
            for n, w, c in zip(self.rounds, self.wall, self.cpu, strict=True)
        ]
        return {
            "key": self.key,
            "unit": KEYS[self.key][1],
            "before": side(self.before),
            "now": side(self.now),
            "now_over_before": ratios,
            "wall_ratio": asdict(Spread.of(self.wall)) if self.wall else None,
            "cpu_ratio": asdict(Spread.of(self.cpu)) if self.cpu else None,
        }


def changes(rounds: Rounds, before: str = BEFORE) -> list[Change]:
    """Per key (in KEYS order, those any round has), Interlude now over ``before``."""
    present = {key for found in rounds for results in found.values() for key in results}
    out = []
    for key in [k for k in KEYS if k in present]:
        numbers: list[int] = []
        walls: list[float] = []
        cpus: list[float] = []
        for number, found in enumerate(rounds, start=1):
            old = found.get(before, {}).get(key)
            new = found.get(BASE, {}).get(key)
            if old and new and "wall" in old and "wall" in new:
                numbers.append(number)
                walls.append(new["wall"] / old["wall"])
                cpus.append(new["cpu"] / old["cpu"])
        out.append(
            Change(
                key=key,
                before=_cell(rounds, before, key),
                now=_cell(rounds, BASE, key),
                rounds=numbers,
                wall=walls,
                cpu=cpus,
            )
        )
    return out


def change_table(found: Sequence[Change]) -> list[str]:
    """Before and now side by side, as a Markdown table (for a note on a change)."""
    head = [
        "workload",
        "before, wall / CPU",
        "now, wall / CPU",
        "now / before, wall",
        "now / before, CPU",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for change in found:
        title, unit = KEYS[change.key]

        def figures(cell: Cell, unit: str = unit) -> str:
            if cell.wall is None or cell.cpu is None:
                return _short(cell.missing) if cell.missing else "-"
            return f"{_num(cell.wall.median)} / {_num(cell.cpu.median)} {unit}"

        row = [
            title,
            figures(change.before),
            figures(change.now),
            change.spread_text(change.wall),
            change.spread_text(change.cpu),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _num(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def text_tables(
    summaries: Sequence[KeySummary],
    labels: Mapping[str, str],
    changes: Sequence[Change] = (),
) -> str:
    """The console report: one small table per key (and under it, given ``changes``, now
    over before)."""
    by_key = {c.key: c for c in changes}
    lines = []
    for summary in summaries:
        title, unit = KEYS[summary.key]
        lines.append(f"\n{summary.key}: {title} ({unit}; wall / CPU medians over the rounds)")
        head = ["side", "wall", "CPU", "wall ratio (range)", "CPU ratio (range)", "API"]
        body = []
        for cell in summary.cells:
            label = labels.get(cell.side, cell.side)
            if cell.wall is None or cell.cpu is None:
                body.append([label, "", "", cell.missing, "", ""])
                continue
            wall_r = cell.wall_ratio.ratio_text() if cell.wall_ratio else "-"
            cpu_r = cell.cpu_ratio.ratio_text() if cell.cpu_ratio else "-"
            if cell.side == BASE:
                wall_r = cpu_r = "1"
            body.append(
                [label, _num(cell.wall.median), _num(cell.cpu.median), wall_r, cpu_r, cell.api]
            )
        lines.extend(_grid(head, body, right={1, 2, 3, 4}))
        if summary.key in by_key:
            lines.append(by_key[summary.key].line())
    return "\n".join(lines)


def _grid(head: list[str], body: list[list[str]], right: set[int]) -> list[str]:
    # n/a and error texts span the columns after the first: they do not set the widths
    sized = [row for row in [head, *body] if row[1] or row is head]
    widths = [max(len(row[i]) for row in sized) for i in range(len(head))]

    def fmt(row: list[str]) -> str:
        if not row[1] and row is not head:
            return f"{row[0].ljust(widths[0])}  {row[3]}"
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [fmt(head), "  ".join("-" * w for w in widths), *(fmt(row) for row in body)]


def markdown_table(summaries: Sequence[KeySummary], labels: Mapping[str, str]) -> list[str]:
    """The README's table: Interlude's figures, then each peer's ratios (wall, CPU)."""
    sides = [c.side for c in summaries[0].cells] if summaries else []
    peers = [s for s in sides if s != BASE]
    head = ["workload", "Interlude, wall / CPU", *(labels.get(p, p) for p in peers)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for summary in summaries:
        title, unit = KEYS[summary.key]
        by_side = {c.side: c for c in summary.cells}
        base = by_side.get(BASE)
        ours = (
            f"{_num(base.wall.median)} / {_num(base.cpu.median)} {unit}"
            if base is not None and base.wall is not None and base.cpu is not None
            else (base.missing if base is not None else "not run")
        )
        row = [title, ours]
        for peer in peers:
            cell = by_side[peer]
            if cell.wall_ratio is None or cell.cpu_ratio is None:
                row.append(_short(cell.missing) if cell.missing else "-")
            else:
                row.append(f"{cell.wall_ratio.ratio_text()} / {cell.cpu_ratio.ratio_text()}")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _short(missing: str) -> str:
    return "n/a" if missing.startswith("n/a") else missing.split(":")[0]


def replace_between(text: str, start: str, end: str, inner: str) -> str:
    """``text`` with what lies between the ``start`` and ``end`` marker lines replaced."""
    head, found, rest = text.partition(start)
    if not found:
        raise ValueError(f"marker {start!r} not found")
    _, found, tail = rest.partition(end)
    if not found:
        raise ValueError(f"marker {end!r} not found after {start!r}")
    return f"{head}{start}\n{inner.strip()}\n{end}{tail}"


# --- Temporal runs per second (bench/peers/temporal_runs.py) -------------------------------------

PARTS = ("workers", "client", "server")  # whose CPU a Temporal turn counts, besides "all"


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One side's turn on Temporal: N runs after a warm-up, on worker processes of its own."""

    side: str
    round: int
    load: tuple[float, float, float]  # the load average (1/5/15 min) as the turn started
    runs_per_s: float
    cpu_ms: dict[str, float]  # CPU ms per run of each of PARTS, and "all"
    not_once: list[str]  # runs whose tool did not run exactly once
    per_worker: list[int]  # tool runs per worker process
    history: str  # what one run's workflow history holds

    def line(self, label: str) -> str:
        cpu = ", ".join(f"{part} {self.cpu_ms[part]:.1f}" for part in (*PARTS, "all"))
        once = "yes" if not self.not_once else f"NO: {self.not_once[:5]}"
        return (
            f"round {self.round}, {label:<11}  load {self.load[0]:5.2f}  "
            f"{self.runs_per_s:6.1f} runs/s  CPU ms/run: {cpu}  "
            f"every tool ran exactly once: {once}  tool runs per worker {self.per_worker}"
        )


def temporal_report(turns: Sequence[Turn], labels: Mapping[str, str]) -> list[str]:
    """Per side, runs/s (median and range over the rounds) and the median CPU ms per run; per
    peer, Interlude's runs/s over the peer's and the peer's CPU per run over Interlude's, in
    each round where both had a turn (median and range); the load at each turn; the
    exactly-once check."""
    sides = list(dict.fromkeys(t.side for t in turns))
    head = ["side", "runs/s (range)", *(f"CPU {p}" for p in PARTS), "CPU all", "one run"]
    body = []
    for side in sides:
        mine = [t for t in turns if t.side == side]
        rps = Spread.of([t.runs_per_s for t in mine])
        cpu = [statistics.median(t.cpu_ms[k] for t in mine) for k in (*PARTS, "all")]
        history = mine[0].history.removeprefix("one run's history: ")
        spread = f"{rps.median:.1f} ({rps.low:.1f}-{rps.high:.1f})"
        body.append([labels.get(side, side), spread, *(f"{c:.1f}" for c in cpu), history])
    lines = _grid(head, body, right={1, 2, 3, 4, 5})
    ours = {t.round: t for t in turns if t.side == BASE}
    for peer in (s for s in sides if s != BASE):
        pairs = [(ours[t.round], t) for t in turns if t.side == peer and t.round in ours]
        if not pairs:
            continue
        label = labels.get(peer, peer)
        for what, ratios in (
            (f"Interlude's runs/s over {label}'s", [b.runs_per_s / p.runs_per_s for b, p in pairs]),
            (
                f"{label}'s CPU per run over Interlude's",
                [p.cpu_ms["all"] / b.cpu_ms["all"] for b, p in pairs],
            ),
        ):
            each = ", ".join(f"{r:.2f}" for r in ratios)
            lines.append(f"{what}, per round: {each}; median {Spread.of(ratios).ratio_text()}")
    loads = ", ".join(f"{labels.get(t.side, t.side)} {t.round}: {t.load[0]:.2f}" for t in turns)
    lines.append(f"Load average (1 min) at the start of each turn: {loads}")
    wrong = [f"{labels.get(t.side, t.side)} {t.round}" for t in turns if t.not_once]
    lines.append(
        "Exactly once: every tool of every measured run ran exactly once, on every side"
        if not wrong
        else f"Exactly once: NOT in {', '.join(wrong)}"
    )
    return lines
