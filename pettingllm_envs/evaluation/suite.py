"""The evaluation suite: every env by every policy, seeded, resumable, reported.

Each finished episode is appended as one JSON line to ``<out_dir>/episodes.jsonl``
(flushed and fsynced), so an interrupted run loses at most the episodes in flight and a
rerun with the same arguments skips what is already recorded (and says how many it
reused; ``fresh=True`` replays them). An episode is identified by (env, policy, mode,
split, seed, env config): records of other settings in the same file are kept but never
mixed in. The report (console table, ``summary.json``, ``summary.csv``, ``summary.md`` and
``success.png``) covers exactly the episodes asked for.

A record holds the outcome (``success``, ``return`` per role, ``turns``), the share of
actions the env accepted (``valid_action_rate``), sizes and time, and the raw ``replies``
in order (``{"agent", "text"}``, each cut to :data:`REPLY_CHARS` characters with a marker
saying how many were dropped): the first things to read when a real model scores zero.

Policies are named by a seat spec string (parsed by :func:`pettingllm_envs.seats.build_policy`):

=============================  =====================================================
``scripted``                   the env's oracle (``scripted_policy(env_id)``)
``random``                     random printable text
``openai:<model>@<base_url>``  any OpenAI-compatible chat endpoint (vLLM, llama.cpp)
``hf:<path>``                  a local Hugging Face causal LM (needs the train extra)
=============================  =====================================================

``mode="single"`` runs the single-agent baseline (one reply for every role) with the
same model; for the scripted and random policies it is not defined.

``seats`` (role -> seat spec, the same language) puts some roles in fixed seats: the policy
under test plays the others (a model coder against the scripted tester). The seats are part
of each record and of its identity, and every role's return is reported, the seated ones too.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pettingllm_envs.episodes import play_episode
from pettingllm_envs.extras import extra_hint
from pettingllm_envs.policies import NAMED_POLICIES
from pettingllm_envs.progress import progress_bar
from pettingllm_envs.registry import env_module, list_envs, make
from pettingllm_envs.seats import build_policy

RECORDS = "episodes.jsonl"
#: Characters of each raw reply kept in a record; the rest is replaced by a marker.
REPLY_CHARS = 2000


@dataclass(frozen=True)
class SuiteConfig:
    """What to evaluate."""

    envs: Sequence[str] = ()
    """Env ids; empty means every registered env."""
    policies: Sequence[str] = NAMED_POLICIES
    """Policy specs (see the module docstring)."""
    modes: Sequence[str] = ("multi",)
    """``multi`` (one call per role) and/or ``single`` (one reply for all roles)."""
    episodes: int = 20
    """Episodes per (env, policy, mode); episode ``i`` is problem ``seed + i`` of the split."""
    split: str = "test"
    seed: int = 0
    concurrency: int = 4
    """Episodes played at once: bounds the requests in flight to an endpoint."""
    max_tokens: int = 1024
    """Completion budget for model policies."""
    env_config: dict[str, Any] = field(default_factory=dict)
    """Extra config for every env (e.g. ``{"max_turns": 2}``)."""
    seats: dict[str, str] = field(default_factory=dict)
    """Role -> seat spec of the roles the policies under test do not play (``multi`` mode only)."""


def _config_key(env_config: dict[str, Any]) -> str:
    return json.dumps(env_config, sort_keys=True)


def _record_key(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record["env"], record["policy"], record["mode"], record["split"], record["seed"],
            _config_key(record.get("env_config") or {}), _config_key(record.get("seats") or {}))


def truncate_reply(text: Any, limit: int = REPLY_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how many were dropped."""
    text = text if isinstance(text, str) else repr(text)
    if len(text) <= limit:
        return text
    return text[:limit] + f"[... {len(text) - limit} more characters]"


def load_records(out_dir: Path) -> list[dict[str, Any]]:
    """Every complete record in ``out_dir``; a line cut by a crash is ignored."""
    path = out_dir / RECORDS
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def _drop_partial_line(path: Path) -> None:
    """Cut a last line left unfinished by a crash, so new records start on a fresh line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def requested_keys(config: SuiteConfig) -> list[tuple[Any, ...]]:
    """The record key of every episode ``config`` asks for, in job order."""
    env_ids = list(config.envs) or list_envs()
    return [(env_id, spec, mode, config.split, config.seed + i, _config_key(config.env_config),
             _config_key(config.seats))
            for env_id in env_ids for spec in config.policies for mode in config.modes
            for i in range(config.episodes)]


def _drop_records(path: Path, keys: set[tuple[Any, ...]]) -> None:
    """Rewrite the record file without the records whose key is in ``keys`` (atomically)."""
    if not path.exists():
        return
    kept = [json.dumps(r) + "\n" for r in load_records(path.parent) if _record_key(r) not in keys]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    os.replace(tmp, path)


def run_suite(config: SuiteConfig, out_dir: str | Path, *, progress: bool = True,
              fresh: bool = False) -> list[dict[str, Any]]:
    """Play every requested episode not yet recorded in ``out_dir`` (all of them with
    ``fresh``), append its record, and return the summary rows of the requested episodes."""
    out = Path(out_dir)
    env_ids = list(config.envs) or list_envs()
    for env_id in env_ids:
        env_module(env_id)  # fail fast on unknown ids
    if config.episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {config.episodes}")
    _check_seats(config, env_ids)
    wanted = requested_keys(config)
    done = set() if fresh else {_record_key(r) for r in load_records(out)}  # read-only: a cut last line is skipped
    jobs = [(*key[:3], key[4]) for key in wanted if key not in done]
    reused = len(wanted) - len(jobs)
    for env_id, spec, mode in dict.fromkeys(job[:3] for job in jobs):  # bad specs fail before anything is written
        build_policy(spec, env_id, mode, config.max_tokens, config.seed)
        for seat in config.seats.values():
            build_policy(seat, env_id, "multi", config.max_tokens, config.seed)
    out.mkdir(parents=True, exist_ok=True)
    _drop_partial_line(out / RECORDS)
    if fresh:
        _drop_records(out / RECORDS, set(wanted))
    if progress and reused:
        print(f"reusing {reused} of {len(wanted)} episodes already recorded in {out / RECORDS} "
              "(--fresh replays them)", file=sys.stderr)
    write_lock = threading.Lock()

    def play(job: tuple[str, str, str, int]) -> None:
        env_id, spec, mode, seed = job
        env = make(env_id, split=config.split, **config.env_config)
        if mode == "single":
            env.reset(seed=seed)  # the prompt's instructions are this episode's (play_episode resets it alike)
        policy, usage = build_policy(spec, env_id, mode, config.max_tokens, config.seed,
                                     episode_env=env if mode == "single" else None)
        seats = {role: build_policy(seat, env_id, "multi", config.max_tokens, config.seed)[0]
                 for role, seat in config.seats.items()}
        players = {role: seats.get(role, policy) for role in env.unwrapped.possible_agents}
        episode = play_episode(env, players, seed=seed)
        env.close()
        roles = env.unwrapped.possible_agents
        record = {
            "env": env_id, "policy": spec, "mode": mode, "split": config.split, "seed": seed,
            "env_config": config.env_config, "seats": config.seats,
            "success": episode.success, "turns": episode.turns, "seconds": round(episode.seconds, 4),
            "return": {role: episode.total_reward(role) for role in roles},
            "valid_action_rate": episode.valid_action_rate,
            "actions": len(episode.actions),
            "action_chars": sum(len(a) if isinstance(a, str) else 0 for _, a in episode.actions),
            "completion_tokens": usage.get("completion_tokens"),
            "replies": [{"agent": agent, "text": truncate_reply(text)} for agent, text in episode.actions],
        }
        with write_lock, open(out / RECORDS, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    bar = progress_bar(len(jobs), "bench", "episodes") if progress and jobs else None
    with ThreadPoolExecutor(max_workers=max(1, config.concurrency)) as pool:
        futures = [pool.submit(play, job) for job in jobs]
        for future in as_completed(futures):
            future.result()
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    wanted_keys = set(wanted)
    rows = summarise(r for r in load_records(out) if _record_key(r) in wanted_keys)
    write_report(rows, out)
    return rows


def _check_seats(config: SuiteConfig, env_ids: Sequence[str]) -> None:
    """Seats go with ``multi`` mode only, name roles of every env and leave one to the policies
    under test; raises ``ValueError`` (one line) before anything is played."""
    if not config.seats:
        return
    if "single" in config.modes:
        raise ValueError("seats need mode multi: mode single plays every role with one reply")
    for env_id in env_ids:
        roles = list(make(env_id, **config.env_config).possible_agents)
        unknown = [role for role in config.seats if role not in roles]
        if unknown:
            raise ValueError(f"seats {unknown}: {env_id} has no such role (roles: {', '.join(roles)})")
        if all(role in config.seats for role in roles):
            raise ValueError(f"seats: every role of {env_id} is seated, so the policies under test play nothing")


def summarise(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (env, policy, mode): success rate, mean return per role, valid-action rate,
    turns, action size (characters, and completion tokens for model policies), time."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[record["env"], record["policy"], record["mode"]].append(record)
    rows = []
    for (env_id, spec, mode), group in sorted(groups.items()):
        roles = list(group[0]["return"])
        rows.append({
            "env": env_id, "policy": spec, "mode": mode, "episodes": len(group),
            "seats": " ".join(f"{role}={seat}" for role, seat in (group[0].get("seats") or {}).items()),
            "success_rate": round(statistics.fmean(r["success"] for r in group), 4),
            "return_per_role": {role: round(statistics.fmean(r["return"][role] for r in group), 4) for role in roles},
            "valid_action_rate": _mean_or_none([r.get("valid_action_rate") for r in group], digits=3),
            "turns": round(statistics.fmean(r["turns"] for r in group), 2),
            "action_chars": round(statistics.fmean(r["action_chars"] for r in group), 1),
            "completion_tokens": _mean_or_none([r.get("completion_tokens") for r in group]),
            "seconds_per_episode": round(statistics.fmean(r["seconds"] for r in group), 4),
        })
    return rows


def _mean_or_none(values: Sequence[float | None], digits: int = 1) -> float | None:
    """Mean of the known values (tokens are only known for model policies, validity only for
    envs that report it)."""
    known = [v for v in values if v is not None]
    return round(statistics.fmean(known), digits) if known else None


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    flat = {k: v for k, v in row.items() if k != "return_per_role"}
    flat["return_per_role"] = " ".join(f"{k}={v:+.3f}" for k, v in row["return_per_role"].items())
    return flat


#: What the report's columns mean, printed under the console table.
LEGEND = ("success_rate: share of episodes the env reports solved (games: a player won; tictactoe_v0's "
          "scripted X converts its forced win); return_per_role: mean episode reward of each role "
          "(sum of alpha*global + local); valid_action_rate: share of actions the env could parse and apply")


def format_markdown(rows: Sequence[dict[str, Any]]) -> str:
    header = ["env", "policy", "mode", "episodes", "success_rate", "return_per_role", "valid_action_rate",
              "turns", "action_chars", "completion_tokens", "seconds_per_episode"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in map(_flat, rows):
        lines.append("| " + " | ".join(str(row[h]) for h in header) + " |")
    return "\n".join(lines)


def write_report(rows: Sequence[dict[str, Any]], out: Path) -> None:
    """``summary.json``, ``summary.csv``, ``summary.md`` and, with matplotlib, ``success.png``."""
    (out / "summary.json").write_text(json.dumps(list(rows), indent=2), encoding="utf-8")
    if rows:
        with open(out / "summary.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(_flat(rows[0])))
            writer.writeheader()
            writer.writerows(map(_flat, rows))
    (out / "summary.md").write_text(format_markdown(rows) + "\n", encoding="utf-8")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"success.png not written: the plot needs matplotlib, which comes with {extra_hint('train')}",
              file=sys.stderr)
        return
    labels = sorted({(r["policy"], r["mode"]) for r in rows})
    envs = sorted({r["env"] for r in rows})
    width = 0.8 / max(1, len(labels))
    figure, axis = plt.subplots(figsize=(max(6, 1.4 * len(envs)) + 2.5, 4))
    for i, (spec, mode) in enumerate(labels):
        rates = {r["env"]: r["success_rate"] for r in rows if (r["policy"], r["mode"]) == (spec, mode)}
        axis.bar([e + i * width for e in range(len(envs))], [rates.get(env, 0.0) for env in envs], width,
                 label=f"{spec} ({mode})")
    axis.set_xticks([e + width * (len(labels) - 1) / 2 for e in range(len(envs))], envs, rotation=20)
    axis.set_ylabel("success rate")
    axis.set_ylim(0, 1.05)
    # Outside the axes, so that it never hides a bar (a success rate of 1.0 reaches the top).
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="policy (mode)")
    figure.tight_layout()
    figure.savefig(out / "success.png", dpi=120)
    plt.close(figure)
