"""bench/peers/run.py without the peers' venvs: the Interlude side of every workload at a tiny
size through the runner's own subprocess call, and the ratio table from two made-up sides."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

PEERS = Path(__file__).resolve().parents[2] / "bench" / "peers"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


runner = _load("peers_run", PEERS / "run.py")
report = sys.modules["report"]
harness = sys.modules["_harness"]


def test_interlude_side_prints_every_key_of_its_workloads() -> None:
    workloads = [w for w in harness.WORKLOADS if w != "postgres"]  # no server needed here
    found = runner.run_side("interlude", workloads, "tiny")
    expected = [key for w in workloads for key in harness.PLAN[w]]
    assert list(found) == expected
    for key, result in found.items():
        assert "error" not in result and "na" not in result, result
        assert result["wall"] > 0 and result["cpu"] >= 0, result
        assert result["unit"] == report.KEYS[key][1].split("/")[0], result
        per, reps = harness.PLAN[_workload_of(key)][key]["tiny"]
        assert result["reps"] >= reps and result["api"], result
        if key.startswith(("cycle-", "journal-")):
            assert result["per"] == per  # per cycle
        else:
            assert result["per"] == 1  # per round trip, resume or import


def _workload_of(key: str) -> str:
    return next(w for w, keys in harness.PLAN.items() if key in keys)


def test_a_failing_side_reports_an_error_for_each_key() -> None:
    found = runner.run_side("interlude", ["resume"], "tiny", python=Path("/bin/false"))
    assert set(found) == {"resume-10", "resume-1000"}
    assert all("error" in r for r in found.values())


def _figure(key: str, wall: float, cpu: float) -> dict[str, object]:
    return {"key": key, "unit": "us", "wall": wall, "cpu": cpu, "api": "x", "per": 1, "reps": 1}


def test_ratios_per_round_their_median_and_range() -> None:
    rounds = [
        {
            "interlude": {"cycle-20": _figure("cycle-20", 100.0, 80.0)},
            "fake": {"cycle-20": _figure("cycle-20", 300.0, 160.0)},
            "none": {"cycle-20": {"key": "cycle-20", "na": "no such thing"}},
        },
        {
            "interlude": {"cycle-20": _figure("cycle-20", 200.0, 100.0)},
            "fake": {"cycle-20": _figure("cycle-20", 500.0, 400.0)},
            "none": {"cycle-20": {"key": "cycle-20", "na": "no such thing"}},
        },
        {
            "interlude": {"cycle-20": _figure("cycle-20", 100.0, 100.0)},
            "fake": {"cycle-20": {"key": "cycle-20", "error": "boom"}},  # left out of the ratios
            "none": {"cycle-20": {"key": "cycle-20", "na": "no such thing"}},
        },
    ]
    (summary,) = report.summarize(rounds, ["interlude", "fake", "none"])
    base, fake, none = summary.cells
    assert base.wall == report.Spread(median=100.0, low=100.0, high=200.0)
    assert fake.wall_ratio == report.Spread(median=2.75, low=2.5, high=3.0)
    assert fake.cpu_ratio == report.Spread(median=3.0, low=2.0, high=4.0)
    assert fake.wall == report.Spread(median=400.0, low=300.0, high=500.0)
    assert none.missing == "n/a: no such thing" and none.wall_ratio is None

    text = report.text_tables([summary], {"fake": "Fake"})
    assert "2.75x (2.50-3.00)" in text and "3.00x (2.00-4.00)" in text
    assert "n/a: no such thing" in text

    table = report.markdown_table([summary], {"interlude": "Interlude", "fake": "Fake"})
    assert table[0] == "| workload | Interlude, wall / CPU | Fake | none |"
    assert table[2] == (
        "| cycle, 20 turns | 100.0 / 100.0 us/cycle | 2.75x (2.50-3.00) / 3.00x (2.00-4.00) | n/a |"
    )


def test_the_readme_table_is_replaced_between_its_markers_only() -> None:
    start, end = runner.MARKERS
    text = f"# Title\nbefore\n{start}\nold table\n{end}\nafter\n"
    new = report.replace_between(text, start, end, "\n| new | table |\n")
    assert new == f"# Title\nbefore\n{start}\n| new | table |\n{end}\nafter\n"
    assert report.replace_between(new, start, end, "| new | table |") == new


def _turn(side: str, number: int, runs_per_s: float, cpu_all: float, **more: object) -> Any:
    cpu = {"workers": cpu_all / 2, "client": cpu_all / 4, "server": cpu_all / 4, "all": cpu_all}
    fields: dict[str, object] = {
        "side": side,
        "round": number,
        "load": (float(number), 0.0, 0.0),
        "runs_per_s": runs_per_s,
        "cpu_ms": cpu,
        "not_once": [],
        "per_worker": [2, 2, 2],
        "history": "one run's history: 24 events",
        **more,
    }
    return report.Turn(**fields)


def test_temporal_report_ratios_per_round_and_the_exactly_once_check() -> None:
    turns = [
        _turn("interlude", 1, 40.0, 30.0),
        _turn("pydantic_ai", 1, 20.0, 60.0),
        _turn("interlude", 2, 30.0, 40.0),
        _turn("pydantic_ai", 2, 20.0, 60.0),
        _turn("interlude", 3, 50.0, 20.0),
        _turn("pydantic_ai", 3, 20.0, 50.0),
    ]
    labels = {"interlude": "Interlude", "pydantic_ai": "Pydantic AI"}
    lines = report.temporal_report(turns, labels)
    head = ["side", "runs/s (range)", "CPU workers", "CPU client", "CPU server", "CPU all"]
    assert [c.strip() for c in lines[0].split("  ") if c.strip()] == [*head, "one run"]
    assert lines[2].split()[:6] == ["Interlude", "40.0", "(30.0-50.0)", "15.0", "7.5", "7.5"]
    assert lines[2].endswith("30.0  24 events")
    assert lines[3].startswith("Pydantic AI") and "20.0 (20.0-20.0)" in lines[3]
    assert lines[4] == (
        "Interlude's runs/s over Pydantic AI's, per round: 2.00, 1.50, 2.50; "
        "median 2.00x (1.50-2.50)"
    )
    assert lines[5] == (
        "Pydantic AI's CPU per run over Interlude's, per round: 2.00, 1.50, 2.50; "
        "median 2.00x (1.50-2.50)"
    )
    assert lines[6].endswith(
        "Interlude 1: 1.00, Pydantic AI 1: 1.00, Interlude 2: 2.00, "
        "Pydantic AI 2: 2.00, Interlude 3: 3.00, Pydantic AI 3: 3.00"
    )
    assert lines[7].startswith("Exactly once: every tool")
    assert "exactly once: yes" in turns[0].line("Interlude")

    turns[3] = _turn("pydantic_ai", 2, 20.0, 60.0, not_once=["pai2-r0-4 x2"])
    lines = report.temporal_report(turns, labels)
    assert lines[-1] == "Exactly once: NOT in Pydantic AI 2"
    assert "NO: ['pai2-r0-4 x2']" in turns[3].line("Pydantic AI")


def test_pydantic_ais_venv_holds_its_temporal_extra_at_interludes_temporalio() -> None:
    venvs = sys.modules["venvs"]
    peer = venvs.SIDES_BY_NAME["pydantic_ai"]
    assert peer.top == ("pydantic-ai-slim[temporal]",) and peer.match == ("temporalio",)
    head, *lines = peer.requirements.read_text().splitlines()
    pins = dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))
    assert {"pydantic-ai-slim", "temporalio"} <= set(pins)
    assert f"temporalio=={pins['temporalio']}" in head  # pinned at the .venv's, by --repin


def test_the_temporal_driver_loads_and_shows_its_options() -> None:
    import subprocess

    script = PEERS / "temporal_runs.py"
    done = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "--rounds" in done.stdout and "--quick" in done.stdout and "-n N" in done.stdout
