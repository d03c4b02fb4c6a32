"""Self-consistency evaluation (Wang et al. 2023): sample G chains, majority-vote the answer.

The baseline that prompt-conditioned training must beat (docs/design.md §5). For the first role's
first action of every test problem it reports

* ``single``: the accuracy of one sampled chain (the mean over the G chains, an unbiased
  estimate with less variance than drawing one);
* ``majority``: the accuracy of the answer most of the G chains agree on;
* ``greedy``: the accuracy of the argmax decode (the policy's "own" answer);
* ``ensemble``: greedy decoding with the next-token log-probs averaged over the K variant
  prompts (:func:`trainers.algorithms.variants.ensemble_generate`), when variants are given.

Run it on the initial and on a trained model (``--model RUN/checkpoints/step_K/policies/shared``)
to compare against the trained policy.

**What counts as one vote** is the env's to say: its module declares a
:class:`~pettingllm_envs.capabilities.Voting` capability (the answer each action gives, and
when two answers are one), and an env that declares none is refused when the command starts.
``math_v0`` votes on the answer under :func:`pettingllm_envs.math.verify` (``1/2`` and ``0.5``
are one vote); ``code_v0`` on a program's behaviour on the problem's public examples
(:mod:`pettingllm_envs.code.voting`; hidden tests are never consulted); ``research_v0`` on the
command and its normalised argument; ``reasoning_gym_v0`` on the whitespace-normalised answer.

A chain whose answer cannot be extracted casts no vote; a problem where nobody votes is
scored as a failure. The winning bucket's first chain is the one the env scores, so any env
with a final answer works unchanged: accuracy is the env's own ``success`` after that action.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pettingzoo import AECEnv

import pettingllm_envs
from pettingllm_envs.capabilities import Voting, capability
from trainers.algorithms.atgrpo.config import DEFAULT_PROMPT_VARIANTS, TrainConfig
from trainers.algorithms.generation_setup import build_generator
from trainers.algorithms.variants import condition, ensemble_generate
from trainers.generation import Generator
from trainers.generation.transformers_backend import TransformersGenerator
from trainers.harness.profile import NO_PROFILE, TOKENS_GENERATED, StepProfile, env_phase
from trainers.maths.seeding import seed_everything
from trainers.models.policy_set import PolicySet
from trainers.profiling.phases import count, phase
from trainers.rollout.episodes import agent_prompt, episode_success

# ------------------------------------------------------------------ voting (pure)


def vote_buckets(answers: Sequence[Any | None], same: Callable[[Any, Any], bool]) -> list[list[int]]:
    """Indices of ``answers`` grouped into buckets of equal answers, in order of first
    appearance. An answer joins the first bucket whose *first* member it equals (``same`` need
    not be transitive, as numeric tolerance is not); ``None`` (no answer) joins nothing."""
    buckets: list[list[int]] = []
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        for bucket in buckets:
            if same(answer, answers[bucket[0]]):
                bucket.append(i)
                break
        else:
            buckets.append([i])
    return buckets


def majority_vote(answers: Sequence[Any | None], same: Callable[[Any, Any], bool]) -> int | None:
    """Index of the chain that represents the largest bucket (its first member); ties go to
    the bucket that appeared first, so the result is deterministic. None when nobody voted."""
    buckets = vote_buckets(answers, same)
    if not buckets:
        return None
    return max(buckets, key=len)[0]  # max keeps the first of equal lengths


# ------------------------------------------------------------------- evaluation


@dataclass
class SelfConsistencyReport:
    """Accuracies over the evaluated problems and the per-problem record behind them."""

    g: int
    problems: int
    single: float
    majority: float
    greedy: float
    ensemble: float | None
    voted: float
    """Share of problems where at least one chain cast a vote."""
    records: list[dict[str, Any]] = field(default_factory=list)


def scores(env: AECEnv, agent: str, texts: Sequence[str]) -> list[bool]:
    """The env's ``success`` after each text, each applied to its own deep copy of ``env``."""
    out = []
    for text in texts:
        branch = copy.deepcopy(env)
        branch.step(text)
        out.append(episode_success(branch))
    return out


def evaluate_self_consistency(
    policies: PolicySet, name: str, env_fn: Callable[[], AECEnv], problems: Sequence[int], g: int, *,
    voting: Voting, split: str = "test", variants: Sequence[str] = (), generator: Generator | None = None,
    profile: StepProfile = NO_PROFILE,
) -> SelfConsistencyReport:
    """Self-consistency, single-sample, greedy and (with ``variants``) ensemble accuracy of
    policy ``name`` on the first role's first action of ``problems`` (see the module docstring);
    ``voting`` is the env's (``capability(env_id, Voting)``). ``generator`` samples the ``g``
    chains (default: the in-process backend on ``policies``); the greedy and ensemble decodes
    read ``policies``' weights directly. With a ``profile`` each problem is one profiled step."""
    generator = generator or TransformersGenerator(policies)
    records = []
    for index, p in enumerate(problems):
        with profile.step(index + 1):
            with env_phase():
                env = env_fn()
                env.reset(seed=p, options={"split": split})
                agent = env.agent_selection
                messages = agent_prompt(env, agent)
            with phase("generation"):
                ids = policies.encode_prompt(messages)[1]
                generations = generator.generate(name, [ids], g)
                greedy = ensemble_generate(policies, name, [[ids]], greedy=True)[0]
                decoded = [*generations, greedy]
                if variants:
                    variant_ids = [policies.encode_prompt(condition(messages, v))[1] for v in variants]
                    decoded.append(ensemble_generate(policies, name, [variant_ids], greedy=True)[0])
            count(TOKENS_GENERATED, sum(len(d.completion_ids) for d in decoded))
            texts = [d.text for d in generations]
            with env_phase():
                answers = voting.keys(env, agent, texts)
                winner = majority_vote(answers, voting.same)
                judged = scores(env, agent, [d.text for d in decoded])
            sampled = judged[:g]
            records.append({
                "problem": p, "answers": [a if a is None or isinstance(a, str) else repr(a) for a in answers],
                "successes": sampled, "winner": winner, "majority": winner is not None and sampled[winner],
                "greedy": judged[g], "ensemble": judged[g + 1] if variants else None, "greedy_text": greedy.text,
            })
    profile.finish("self-consistency profile")
    return SelfConsistencyReport(
        g=g, problems=len(records),
        single=statistics.fmean(statistics.fmean(r["successes"]) for r in records),
        majority=statistics.fmean(r["majority"] for r in records),
        greedy=statistics.fmean(r["greedy"] for r in records),
        ensemble=statistics.fmean(r["ensemble"] for r in records) if variants else None,
        voted=statistics.fmean(r["winner"] is not None for r in records),
        records=records,
    )


def build_parser(prog: str = "pettingllm self-consistency") -> argparse.ArgumentParser:
    """The options of ``pettingllm self-consistency``."""
    from pettingllm_envs.commandline.checks import ENV_KWARGS_HELP
    from pettingllm_envs.commandline.errors import ArgumentParser

    parser = ArgumentParser(prog=prog, description=__doc__.splitlines()[0] + " (docs/design.md §5)")
    parser.add_argument("--model", required=True,
                        help="a local causal LM folder, e.g. a checkpoint's RUN/checkpoints/step_K/policies/shared "
                             "(required)")
    parser.add_argument("--env", default="math_v0", help="env id; the first role's first action is evaluated")
    parser.add_argument("--env-kwargs", default="{}", help=ENV_KWARGS_HELP)
    parser.add_argument("--g", type=int, default=8, help="chains sampled per problem (G)")
    parser.add_argument("--problems", type=int, default=20, help="test problems 0..N-1")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the G chains")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="completion budget per chain")
    parser.add_argument("--variants", default=None,
                        help="JSON (or YAML) list of instruction variants for the ensemble "
                             "(default: the trainer's four; '[]': no ensemble)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampling (python, numpy and torch)")
    parser.add_argument("--out", help="write the report with every problem's record as JSON here (default: none)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    parser.add_argument("--profile", choices=("off", "on", "trace"), default="off",
                        help="time every problem's phases into --profile-dir (docs/training.md \"Step profile\")")
    parser.add_argument("--profile-dir", help="folder for profile.jsonl and profile_summary.json (required with "
                                              "--profile on|trace)")
    return parser


def _variant_list(text: str | None) -> list[str]:
    """``--variants``: None gives the trainer's defaults; otherwise a list of strings."""
    import yaml

    from pettingllm_envs.commandline.errors import UsageError

    if text is None:
        return list(DEFAULT_PROMPT_VARIANTS)
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        value = text
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise UsageError(f"--variants must be a list of non-empty strings like '[\"work backwards\"]', got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm self-consistency --model DIR [--env math_v0] [--g 8] ...``"""
    from pettingllm_envs.commandline.checks import check_at_least, check_env_config, check_model, parse_env_kwargs
    from pettingllm_envs.commandline.errors import UsageError

    args = build_parser().parse_args(argv)
    check_model(args.model)
    if args.out and Path(args.out).exists() and not args.overwrite:  # an earlier report is kept, as a run dir is
        raise UsageError(f"--out {args.out!r} already exists: pass --overwrite to replace it or choose another file")
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    check_env_config(args.env, env_kwargs)
    voting = capability(args.env, Voting)  # before any model is loaded: an env without it is one line
    for option, value in (("--g", args.g), ("--problems", args.problems), ("--max-new-tokens", args.max_new_tokens)):
        check_at_least(option, value, 1)
    variants = _variant_list(args.variants)
    if args.profile != "off" and not args.profile_dir:
        raise UsageError(f"--profile {args.profile} needs --profile-dir DIR: the folder its files are written to")
    profile = StepProfile(args.profile_dir, args.profile) if args.profile != "off" else NO_PROFILE
    seed_everything(args.seed)  # python's, numpy's and torch's generators, as every trainer seeds them
    config = TrainConfig.from_flat(model=args.model, env=args.env, temperature=args.temperature,
                                   max_new_tokens=args.max_new_tokens)
    config.validate()  # a bad temperature is one line (ConfigError), like train's
    probe = pettingllm_envs.make(args.env, **env_kwargs)
    policies = PolicySet(config.model, config.policy_for_roles(probe.possible_agents))
    report = evaluate_self_consistency(policies, "shared", lambda: pettingllm_envs.make(args.env, **env_kwargs),
                                       range(args.problems), args.g, voting=voting, variants=variants,
                                       generator=build_generator(config, policies), profile=profile)
    summary = {k: v for k, v in asdict(report).items() if k != "records"}
    print(json.dumps(summary, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(asdict(report), indent=2))
    return 0

