"""The ``pettingllm`` command line: envs, evaluation and training in one place.

``list`` the envs, ``run`` scripted episodes with a summary table, ``play`` an env in
the terminal and ``bench`` policies on the test splits. Every other command (the trainer's
``train``, ``train-variants``, ``train-mgrpo``, ``self-consistency``, ``tiny-model`` and
``plot``, and any third-party one) is a plug-in that its package declares in the entry-point
group ``pettingllm.commands`` (:mod:`pettingllm_envs.cli.plugins`): this package imports no
trainer code, and ``pettingllm list`` never loads torch (docs/design.md §7).

A mistake in what the user typed is one line on stderr and exit status 2
(:mod:`pettingllm_envs.commandline.errors`); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence

from pettingllm_envs.capabilities import Capability, MissingCapability, declared_capabilities
from pettingllm_envs.cli.env_support import (
    AnyPolicy,
    env_description,
    env_roles,
    oracle,
    random_actions,
    require_text_actions,
    split_config,
)
from pettingllm_envs.cli.output import format_table
from pettingllm_envs.cli.plugins import add_plugin_commands
from pettingllm_envs.cli.seat_options import add_seat_option, seat_specs
from pettingllm_envs.commandline.checks import ENV_KWARGS_HELP, check_at_least, check_env_config, parse_env_kwargs
from pettingllm_envs.commandline.errors import ArgumentParser, UsageError, terminal_text
from pettingllm_envs.core.instances import SPLITS
from pettingllm_envs.episodes import Episode, play_episode
from pettingllm_envs.extras import extra_hint
from pettingllm_envs.policies import NAMED_POLICIES
from pettingllm_envs.progress import progress_bar
from pettingllm_envs.registry import list_envs, make, missing_optional_envs

__all__ = ["UsageError", "build_parser", "format_table", "main"]

RUN_LEGEND = ("success: share of episodes the env reports solved (games: a player won; in tictactoe_v0 that is "
              "the scripted X converting its forced win). return per role: mean episode reward of each role, "
              "all it was paid: alpha * the change of the team state after every action, plus its own local "
              "rewards. turns: mean turns played. n/a: the env does not report it (infos 'success', 'turn').")


def _cmd_list(args: argparse.Namespace) -> int:
    rows = []
    for env_id in list_envs():
        capabilities = ", ".join(declared_capabilities(env_id)) or "-"
        rows.append((env_id, ", ".join(env_roles(env_id)), capabilities, env_description(env_id)))
    legend = "capabilities (declared by the env for tools beyond the AEC API): " + "; ".join(
        f"{kind.attribute}: {kind.purpose}" for kind in Capability.__subclasses__())
    print(format_table(["env", "roles (turn order)", "capabilities", "description"], rows, legend=legend))
    for env_id, extra in sorted(missing_optional_envs().items()):
        print(f"not installed: {env_id}, which needs {extra_hint(extra)}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    check_at_least("--episodes", args.episodes, 1)
    env_ids = args.envs or list_envs()
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    for env_id in env_ids:
        check_env_config(env_id, env_kwargs)
        if args.policy == "scripted":
            oracle(env_id, "run --policy scripted")
    rows = []
    with progress_bar(len(env_ids) * args.episodes, "run", "episodes") as bar:
        for env_id in env_ids:
            env = make(env_id, **split_config(env_id, args.split), **env_kwargs)
            policy: AnyPolicy = oracle(env_id, "run --policy scripted") if args.policy == "scripted" \
                else random_actions(env, args.seed)
            roles = env.possible_agents
            episodes = []
            for i in range(args.episodes):
                episodes.append(play_episode(env, policy, seed=args.seed + i))
                bar.update(1)
            env.close()
            rows.append((
                env_id,
                _reported(episodes, "success", lambda e: e.success, "{:.2f}"),
                " ".join(f"{role}={statistics.fmean(e.total_reward(role) for e in episodes):+.2f}" for role in roles),
                _reported(episodes, "turn", lambda e: e.turns, "{:.1f}"),
                f"{1000 * statistics.fmean(e.seconds for e in episodes):.1f}",
            ))
    print(f"{args.policy} policy, {args.episodes} episodes per env, {args.split} split, seeds from {args.seed}")
    print(format_table(["env", "success", "return per role", "turns", "ms/episode"], rows, legend=RUN_LEGEND))
    return 0


def _reported(episodes: Sequence[Episode], key: str, value: Callable[[Episode], float], spec: str) -> str:
    """The mean of ``value`` over ``episodes`` when the env reports ``infos[agent][key]``, else n/a
    (an env registered from outside need not report success or turns)."""
    if not any(key in info for e in episodes for info in e.final_infos.values()):
        return "n/a"
    return spec.format(statistics.fmean(value(e) for e in episodes))


def _cmd_play(args: argparse.Namespace) -> int:
    from pettingllm_envs.cli.play import play

    return play(args, sys.stdin, sys.stdout)


def _cmd_bench(args: argparse.Namespace) -> int:
    from pettingllm_envs.evaluation.suite import LEGEND, SuiteConfig, format_markdown, run_suite

    check_at_least("--episodes", args.episodes, 1)
    check_at_least("--concurrency", args.concurrency, 1)
    check_at_least("--max-tokens", args.max_tokens, 1)
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    policies = args.policy or list(NAMED_POLICIES)
    _check_policy_specs(policies)
    seats = seat_specs(args.seat, forms=("scripted", "random", "openai", "hf"))  # the roles: per env, in run_suite
    for env_id in args.envs or list_envs():
        check_env_config(env_id, env_kwargs)
        env = make(env_id, **env_kwargs)
        require_text_actions(env_id, env, "bench")  # its policies read and write text
        env.close()
        if "scripted" in policies:
            oracle(env_id, "bench --policy scripted")
        if "scripted" in seats.values():
            oracle(env_id, "bench --seat ROLE=scripted")
    if any(spec.startswith("hf:") for spec in policies):
        from pettingllm_envs.commandline.commands import quiet_model_libraries

        quiet_model_libraries()
    config = SuiteConfig(
        envs=args.envs, policies=policies, modes=args.mode or ["multi"],
        episodes=args.episodes, split=args.split, seed=args.seed, concurrency=args.concurrency,
        max_tokens=args.max_tokens, env_config=env_kwargs, seats=seats,
    )
    try:
        rows = run_suite(config, args.out, fresh=args.fresh)
    except ValueError as error:  # a policy spec and mode that do not go together, seats for roles an env lacks
        raise UsageError(str(error)) from error
    print(format_markdown(rows))
    print(LEGEND)
    if seats:
        print("seats (the policies played the other roles): " + ", ".join(f"{r}={s}" for r, s in seats.items()))
    print(f"records and report in {args.out}")
    return 0


def _check_policy_specs(specs: Sequence[str]) -> None:
    """Every ``--policy`` spec is one the suite knows, and ``hf:`` paths are model folders."""
    from pettingllm_envs.commandline.checks import check_model
    from pettingllm_envs.commandline.errors import did_you_mean

    for spec in specs:
        if spec in NAMED_POLICIES:
            continue
        if spec.startswith("hf:"):
            check_model(spec[3:], option="--policy hf:")
        elif spec.startswith("openai:"):
            model, _, base_url = spec[len("openai:"):].partition("@")
            if not model or not base_url.startswith(("http://", "https://")):
                raise UsageError(f"--policy {spec!r}: write openai:<model>@<base_url>, "
                                 "e.g. openai:qwen@http://127.0.0.1:8000/v1")
        else:
            hint = did_you_mean(spec, NAMED_POLICIES)
            raise UsageError(f"unknown --policy {spec!r}{hint} (allowed: {', '.join(NAMED_POLICIES)}, "
                             "openai:<model>@<base_url>, hf:<model folder>)")


def _add_problem_options(parser: ArgumentParser, *, seed_help: str,
                         split_help: str = "split the problems come from") -> None:
    """The options that choose the problems and configure the env: --split, --seed, --env-kwargs."""
    parser.add_argument("--split", choices=SPLITS, default="test", help=split_help)
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    parser.add_argument("--env-kwargs", default="{}", help=ENV_KWARGS_HELP)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="pettingllm", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error instead of one line (may also follow the command)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list the registered envs and their roles", description="List the registered "
                       "envs, their roles in turn order and what each is.")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("run", help="play scripted (or random) episodes of every env and print a summary",
                       description="Play scripted (or random) episodes of every env (or the ones named) and print "
                                   "success, return per role, turns and time per env.")
    p.add_argument("envs", nargs="*", help="env ids (default: all; see pettingllm list)")
    p.add_argument("--episodes", type=int, default=20, help="episodes per env; episode i plays problem seed+i")
    p.add_argument("--policy", choices=NAMED_POLICIES, default="scripted",
                   help="scripted: the env's oracle; random: random printable text")
    _add_problem_options(p, seed_help="first problem index (and the random policy's seed)")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("play", help="play one role of an env in the terminal; seats (default: scripted) the others",
                       description="Play one role of an env in the terminal against the env's scripted oracle, or "
                                   "the seats --seat names. "
                                   "A move is one line; a move that starts with ``` (a code block) goes on until "
                                   "the closing ``` or a line '.'. Ctrl-C or end of input stops.")
    p.add_argument("env_id", help="env id (see pettingllm list)")
    p.add_argument("--role", help="the role you play (default: the env's human_role, e.g. the planner, else "
                                  "the first role in turn order)")
    add_seat_option(p, "a role you do not play, played by SPEC instead of the scripted oracle")
    _add_problem_options(p, seed_help="problem index", split_help="split the problem comes from")
    p.set_defaults(func=_cmd_play)

    p = sub.add_parser("bench", help="evaluate policies on the test split of every env; resumable",
                       description="Evaluate policies on every env (or the ones named). Each episode is recorded "
                                   "in OUT/episodes.jsonl at once; a rerun reuses the recorded episodes of the same "
                                   "settings (and says so) unless --fresh.")
    p.add_argument("envs", nargs="*", help="env ids (default: all)")
    p.add_argument("--policy", action="append", default=None,
                   help="scripted | random | openai:<model>@<base_url> | hf:<model folder> (repeatable; "
                        "default: scripted and random)")
    p.add_argument("--mode", action="append", choices=["multi", "single"], default=None,
                   help="multi: one call per role; single: the single-agent baseline, one reply for every role "
                        "(repeatable; model policies only; default: multi)")
    p.add_argument("--episodes", type=int, default=20, help="episodes per env, policy and mode")
    add_seat_option(p, "a role the benchmarked policies do not play, played by SPEC (not human) in every episode; "
                       "multi mode only")
    _add_problem_options(p, seed_help="first problem index")
    p.add_argument("--concurrency", type=int, default=4, help="episodes in flight (bounds endpoint requests)")
    p.add_argument("--max-tokens", type=int, default=1024, help="completion budget per reply of model policies")
    p.add_argument("--out", default="runs/bench", help="directory for the records and the report")
    p.add_argument("--fresh", action="store_true",
                   help="replay the requested episodes even when OUT already records them")
    p.set_defaults(func=_cmd_bench)

    add_plugin_commands(sub, reserved=list(sub.choices))
    return parser


def _split_debug(argv: Sequence[str]) -> tuple[list[str], bool]:
    """``argv`` without ``--debug`` and whether it was there: the flag may follow any command,
    including the trainer commands whose options are parsed by their own parsers."""
    rest = [a for a in argv if a != "--debug"]
    return rest, len(rest) != len(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; user errors are one line on stderr and exit status 2."""
    args_list, debug = _split_debug(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(args_list)
        return int(args.func(args) or 0)
    except (UsageError, MissingCapability) as error:  # an env without what the command needs is a usage error
        if debug:
            raise
        print(f"pettingllm: error: {terminal_text(' '.join(str(error).split()))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print("\npettingllm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
