"""The ``pettingllm`` command line.

``list`` the envs, ``run`` scripted episodes of every env with a summary table, ``play``
an env in the terminal, write a ``tiny-model`` for offline smoke runs. Commands that
need torch (``tiny-model``, and the trainer's) import it only when they run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from typing import Any

from pettingllm_envs.episodes import play_episode
from pettingllm_envs.policies import Policy, random_policy, scripted_policy
from pettingllm_envs.registry import env_module, list_envs, make


def _cmd_list(args: argparse.Namespace) -> int:
    rows = []
    for env_id in list_envs():
        raw = env_module(env_id).raw_env
        doc = (env_module(env_id).__doc__ or "").strip().splitlines()[0]
        rows.append((env_id, ", ".join(raw.roles), doc))
    print(format_table(["env", "roles (turn order)", "description"], rows))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    env_ids = args.envs or list_envs()
    rows = []
    for env_id in env_ids:
        policy: Policy = scripted_policy(env_id) if args.policy == "scripted" else random_policy(args.seed)
        env = make(env_id, split=args.split)
        roles = env.unwrapped.possible_agents
        episodes = [play_episode(env, policy, seed=args.seed + i) for i in range(args.episodes)]
        env.close()
        rows.append((
            env_id,
            f"{sum(e.success for e in episodes) / len(episodes):.2f}",
            " ".join(f"{role}={statistics.fmean(e.total_reward(role) for e in episodes):+.2f}" for role in roles),
            f"{statistics.fmean(e.turns for e in episodes):.1f}",
            f"{1000 * statistics.fmean(e.seconds for e in episodes):.1f}",
        ))
    print(f"{args.policy} policy, {args.episodes} episodes per env, {args.split} split, seeds from {args.seed}")
    print(format_table(["env", "success", "return per role", "turns", "ms/episode"], rows))
    return 0


def _read_action(agent: str) -> str:
    print(f"[{agent}] your action (end with a line containing only '.'; EOF also ends it):")
    lines = []
    for line in sys.stdin:
        if line.rstrip("\n") == ".":
            break
        lines.append(line)
    return "".join(lines).rstrip("\n")


def _cmd_play(args: argparse.Namespace) -> int:
    env = make(args.env_id, split=args.split)
    roles = env.unwrapped.possible_agents
    human = args.role or roles[0]
    if human not in roles:
        print(f"unknown role {human!r}; roles of {args.env_id}: {', '.join(roles)}", file=sys.stderr)
        return 2
    oracle = scripted_policy(args.env_id)
    env.reset(seed=args.seed)
    for agent in env.agent_iter():
        obs, _reward, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        if agent == human:
            print("=" * 72)
            print(obs)
            action = _read_action(agent)
        else:
            action = oracle(obs, agent, info)
            print(f"--- {agent} (scripted) ---\n{action}")
        env.step(action)
        last = env.unwrapped.infos.get(agent, {}).get("last_action") or {}
        note = f" invalid: {last['invalid_reason']}" if last.get("invalid_reason") else ""
        print(f"--- {agent}: reward {last.get('reward', 0.0):+.3f} "
              f"(global {last.get('reward_global', 0.0):.3f}, local {last.get('reward_local', 0.0):+.3f}){note}")
    success = any(i.get("success") for i in env.unwrapped.infos.values()) if env.unwrapped.infos else None
    print("episode over:", "solved" if env.unwrapped.is_success(human) or success else "not solved")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from pettingllm_envs.evaluation.suite import SuiteConfig, format_markdown, run_suite

    config = SuiteConfig(
        envs=args.envs, policies=args.policy or ["scripted", "random"], modes=args.mode or ["multi"],
        episodes=args.episodes, split=args.split,
        seed=args.seed, concurrency=args.concurrency, max_tokens=args.max_tokens,
    )
    rows = run_suite(config, args.out)
    print(format_markdown(rows))
    print(f"records and report in {args.out}")
    return 0


def _cmd_tiny_model(args: argparse.Namespace) -> int:
    from trainers.tiny_model import write_tiny_model

    path = write_tiny_model(args.out_dir, seed=args.seed)
    print(f"wrote a tiny byte-level causal LM and tokenizer to {path}")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from trainers.train import main as train_main

    return train_main(args.options)


def _cmd_train_variants(args: argparse.Namespace) -> int:
    from trainers.variants import main as variants_main

    return variants_main(args.options)


def _cmd_plot(args: argparse.Namespace) -> int:
    from trainers.plot import plot_run

    for path in plot_run(args.run_dir, out=args.out):
        print(f"wrote {path}")
    return 0


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with aligned columns."""
    cells = [list(map(str, header)), *[list(map(str, row)) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pettingllm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list the registered envs and their roles")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("run", help="play scripted (or random) episodes of every env and print a summary")
    p.add_argument("envs", nargs="*", help="env ids (default: all)")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--policy", choices=["scripted", "random"], default="scripted")
    p.add_argument("--split", choices=["train", "test"], default="test")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("play", help="play one role of an env in the terminal; the others are scripted")
    p.add_argument("env_id")
    p.add_argument("--role", help="the role you play (default: the first in turn order)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", choices=["train", "test"], default="test")
    p.set_defaults(func=_cmd_play)

    p = sub.add_parser("bench", help="evaluate policies on the test split of every env; resumable")
    p.add_argument("envs", nargs="*", help="env ids (default: all)")
    p.add_argument("--policy", action="append", default=None,
                   help="scripted | random | openai:<model>@<base_url> | hf:<path> (repeatable; "
                        "default: scripted and random)")
    p.add_argument("--mode", action="append", choices=["multi", "single"], default=None,
                   help="multi-agent and/or single-agent baseline (repeatable; default multi)")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--split", choices=["train", "test"], default="test")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=4, help="episodes in flight (bounds endpoint requests)")
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--out", default="runs/bench", help="directory for records and the report")
    p.set_defaults(func=_cmd_bench)

    p = sub.add_parser("tiny-model", help="write a tiny offline byte-level causal LM + tokenizer")
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_tiny_model)

    # Every option goes to the trainer's own parser (built from its config dataclass), which is
    # imported only when the command runs; prefix_chars="+" keeps argparse from eating "--x".
    p = sub.add_parser("train", help="train LLM policies on an env with AT-GRPO (pettingllm train --help)",
                       add_help=False, prefix_chars="+")
    p.add_argument("options", nargs=argparse.REMAINDER, help="trainer options, see pettingllm train --help")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("train-variants", add_help=False, prefix_chars="+",
                       help="train the first role's first answer with K prompt variants per question "
                            "(--prompt-variants '[]': temperature-only baseline); options as train")
    p.add_argument("options", nargs=argparse.REMAINDER, help="trainer options, see pettingllm train --help")
    p.set_defaults(func=_cmd_train_variants)

    p = sub.add_parser("plot", help="draw a training run's metric curves to PNG")
    p.add_argument("run_dir")
    p.add_argument("--out", help="PNG path (default: RUN_DIR/curves.png)")
    p.set_defaults(func=_cmd_plot)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
