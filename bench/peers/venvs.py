"""The peers' venvs: one per peer, built from its pinned requirements file, cached outside the
repository under ``$INTERLUDE_BENCH_CACHE`` (default ``~/.cache/interlude-bench``) as
``<peer>-<hash>``, the hash covering the pins and the Python version; a venv is built once and
built again when its pins change. ``--repin`` rewrites the pins from the newest releases."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements"
SIDES = HERE / "sides"
INTERLUDE_PYTHON = HERE.parents[1] / ".venv" / "bin" / "python"


@dataclass(frozen=True, kw_only=True)
class Peer:
    """A side of the comparison: its name, what to install (``--repin``), its label."""

    name: str
    label: str
    top: tuple[str, ...]  # the packages asked for; the pins hold them and their dependencies
    # packages pinned to the release in Interlude's venv (both sides of a comparison on one)
    match: tuple[str, ...] = ()

    @property
    def requirements(self) -> Path:
        return REQUIREMENTS / f"{self.name}.txt"

    @property
    def script(self) -> Path:
        return SIDES / f"{self.name}_side.py"


INTERLUDE = Peer(name="interlude", label="Interlude", top=())
PEERS = (
    Peer(
        name="langgraph",
        label="LangGraph",
        top=(
            "langgraph",
            "langgraph-checkpoint-sqlite",
            "langgraph-checkpoint-postgres",
            "psycopg[binary]",
        ),
    ),
    Peer(name="strands", label="Strands Agents", top=("strands-agents",)),
    Peer(
        name="pydantic_ai",
        label="Pydantic AI",
        top=("pydantic-ai-slim[temporal]",),  # [temporal]: for bench/peers/temporal_runs.py
        match=("temporalio",),
    ),
    Peer(name="openai_agents", label="OpenAI Agents SDK", top=("openai-agents",)),
)
SIDES_BY_NAME = {p.name: p for p in (INTERLUDE, *PEERS)}


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "interlude-bench"
    return Path(os.environ.get("INTERLUDE_BENCH_CACHE", default))


def venv_path(peer: Peer) -> Path:
    digest = hashlib.sha256(peer.requirements.read_bytes())
    digest.update(platform.python_version().encode())
    return cache_dir() / f"{peer.name}-{digest.hexdigest()[:12]}"


def python_of(peer: Peer, *, build: bool = True) -> Path:
    """The interpreter a side runs with: Interlude's own venv, or the peer's cached venv
    (built first when missing, unless ``build`` is false)."""
    if peer is INTERLUDE:
        return INTERLUDE_PYTHON
    path = venv_path(peer)
    if not (path / ".complete").exists():
        if not build:
            raise FileNotFoundError(f"no venv for {peer.name!r} at {path}")
        _build(peer, path)
    return path / "bin" / "python"


def _base_python() -> str:
    """The interpreter the venvs are made from: this one's base installation."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}")


def _build(peer: Peer, path: Path) -> None:
    """A fresh venv at ``path`` from the pins; marked complete only once everything is in."""
    print(f"building the {peer.name} venv at {path} ...", file=sys.stderr, flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f"{peer.name}-*"):  # the same peer with other pins, or half built
        shutil.rmtree(stale, ignore_errors=True)
    python = str(path / "bin" / "python")
    _quiet([_base_python(), "-m", "venv", str(path)])
    _quiet([python, "-m", "pip", "install", "-q", "--no-deps", "-r", str(peer.requirements)])
    _quiet([python, "-m", "pip", "check"])
    (path / ".complete").write_text(peer.requirements.read_text())


def _quiet(command: list[str]) -> None:
    """Run ``command``; its output is shown only when it fails."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")


def interlude_version(package: str) -> str:
    """The release of ``package`` installed in Interlude's venv."""
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run([str(INTERLUDE_PYTHON), "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{package!r} is not installed in {INTERLUDE_PYTHON}")
    return done.stdout.strip()


def repin(peers: tuple[Peer, ...]) -> None:
    """Install each peer's packages, unpinned (the newest releases, but those it ``match``es
    at Interlude's), in a scratch venv and write what got installed as its requirements file."""
    for peer in peers:
        same = [f"{name}=={interlude_version(name)}" for name in peer.match]
        with tempfile.TemporaryDirectory(prefix=f"repin-{peer.name}-") as tmp:
            subprocess.run([_base_python(), "-m", "venv", tmp], check=True)
            python = str(Path(tmp) / "bin" / "python")
            install = [python, "-m", "pip", "install", "-q", *peer.top, *same]
            subprocess.run(install, check=True)
            frozen = subprocess.run(
                [python, "-m", "pip", "freeze", "--exclude-editable"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        head = (
            f"# {peer.label}: {' '.join((*peer.top, *same))} and their dependencies, pinned by\n"
            f"# `bench/peers/run.py --repin` (Python {platform.python_version()}).\n"
        )
        peer.requirements.write_text(head + frozen)
        print(f"pinned {peer.requirements}", file=sys.stderr)
