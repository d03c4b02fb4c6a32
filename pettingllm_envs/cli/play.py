"""``pettingllm play``: a person plays one role of an env in the terminal, seats the others.

The other roles are played by the env's oracle, or by the seat ``--seat ROLE=SPEC`` names
(:mod:`pettingllm_envs.cli.seat_options`: a model behind an endpoint, a local model, random
text, another person at the same terminal).

The default role is the one a person plays naturally: the env's ``human_role`` when it
declares one (the planner of the tool/planner envs, not the tool agent that writes
Python), else the first role. Before every move of the person the env's current view is
shown (the role's instructions once, then its task view). A move is one line; a move that
starts with a code fence (```) continues until the closing fence or a line holding only
``.``. When the episode ends the final state is shown and the outcome worded from the
person's side: won / lost / draw for games, solved / not solved for tasks.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from pettingllm_envs.cli.env_support import env_roles, oracle, require_text_actions, split_config
from pettingllm_envs.cli.seat_options import seat_specs
from pettingllm_envs.commandline.checks import check_env_config, parse_env_kwargs
from pettingllm_envs.commandline.errors import UsageError, did_you_mean
from pettingllm_envs.registry import env_module, make
from pettingllm_envs.seats import HumanSeat, make_seat
from pettingllm_envs.terminal import RULE


def default_role(env_id: str) -> str:
    """The role a person plays by default: the env's ``human_role``, else its first role."""
    return getattr(getattr(env_module(env_id), "raw_env", None), "human_role", None) or env_roles(env_id)[0]


def outcome_words(info: dict[str, Any], solved: bool) -> str:
    """The outcome from the person's side: won / lost / draw when the env reports a game
    outcome (``info["game"]["outcome"]``: +1, -1, 0), else solved / not solved."""
    game = info.get("game") if isinstance(info.get("game"), dict) else None
    if game is not None and "outcome" in game:
        outcome = game["outcome"] or 0.0  # None: the game was cut at max_turns, which scores as a draw
        return "you won" if outcome > 0 else "you lost" if outcome < 0 else "draw"
    return "solved" if solved else "not solved"


def play(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    """Play one episode of ``args.env_id`` with the person as ``args.role`` (see the module docstring)."""
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    check_env_config(args.env_id, env_kwargs)
    roles = env_roles(args.env_id)
    human = args.role or default_role(args.env_id)
    if human not in roles:
        raise UsageError(f"{args.env_id} has no role {human!r}{did_you_mean(human, roles)} (roles: {', '.join(roles)})")
    env = make(args.env_id, **split_config(args.env_id, args.split), **env_kwargs)
    require_text_actions(args.env_id, env, "play")  # a move is a line the person types
    specs = {r: "scripted" for r in roles if r != human}
    specs.update(seat_specs(args.seat, roles, env_id=args.env_id, taken={human: f"you play {human} (--role)"}))
    if "scripted" in specs.values():
        oracle(args.env_id, "play (for the roles you do not play)")  # a one-line error when the env has none
    try:
        seats = {r: HumanSeat(stdin, out) if spec == "human" else make_seat(spec, args.env_id, seed=args.seed)
                 for r, spec in specs.items()}
    except ValueError as error:
        raise UsageError(f"--seat: {error}") from None
    seats[human] = HumanSeat(stdin, out)
    env.reset(seed=args.seed)
    others = ", ".join(f"{'the scripted oracle' if spec == 'scripted' else spec} plays {r}"
                       for r, spec in specs.items()) or "nobody else plays"
    print(f"You play {human} in {args.env_id} (problem {args.seed} of the {args.split} split); {others}.", file=out)
    print("A move is one line; start it with ``` for a code block and end that with ``` or a line '.'.", file=out)
    final_info: dict[str, Any] = {}
    cut_short = False
    for agent in env.agent_iter():
        observation, _reward, terminated, truncated, info = env.last()
        if terminated or truncated:
            if agent == human:  # the agent's infos are gone once it steps out
                final_info, cut_short = info, truncated and not terminated
            env.step(None)
            continue
        try:
            action = seats[agent](observation, agent, info)
        except EOFError:  # a person's input ended (the player's or a human seat's)
            print("input ended before the episode did: stopped", file=out)
            env.close()
            return 0
        if agent != human:
            print(f"--- {agent} ({specs[agent]}) ---\n{action}", file=out)
        env.step(action)
        last = env.infos.get(agent, {}).get("last_action")
        if not last:  # an env that does not explain its rewards: the AEC reward is all there is
            print(f"--- {agent}: reward {env.rewards.get(agent, 0.0):+.3f}", file=out)
            continue
        note = f"  invalid: {last['invalid_reason']}" if last.get("invalid_reason") else ""
        print(f"--- {agent}: reward {last.get('reward', 0.0):+.3f} (global {last.get('reward_global', 0.0):.3f}, "
              f"local {last.get('reward_local', 0.0):+.3f}){note}", file=out)
    print(RULE, file=out)
    if hasattr(env.unwrapped, "render_state"):
        print(env.unwrapped.render_state(), file=out)
    ended = "turn limit reached" if cut_short else "episode over"
    print(f"{ended}: {outcome_words(final_info, bool(final_info.get('success')))} (you played {human})", file=out)
    env.close()
    return 0
