"""Tree rollouts on rollout-worker actors and generation on engine actors (trainers/distributed):
the local path's samples for the same seeds, and failed workers replaced or reported, never a hang."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import pytest

ray = pytest.importorskip("ray")

from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.distributed.cluster import ActorFailed, Pools  # noqa: E402
from trainers.distributed.config import DistributedConfig  # noqa: E402
from trainers.distributed.engine import RayGenerator  # noqa: E402
from trainers.distributed.rollout import EnvFactory, RolloutPool  # noqa: E402
from trainers.maths.seeding import RequestSeeds  # noqa: E402
from trainers.rollout.episodes import drive_tree, tree_rollout  # noqa: E402

pytestmark = pytest.mark.slow

TOY, STALLING = "toy_bytes_v0", "stalling_toy_v0"


@dataclass
class Text:
    text: str


def table_sampler(agent, prompts, n):
    """A deterministic policy: the N texts are a pure function of the agent and the prompt."""
    out = []
    for messages in prompts:
        rng = random.Random(f"{agent}|{messages[-1]['content']}")
        out.append([Text(rng.choice("0a1b2cZ!")) for _ in range(n)])
    return out


def sample_key(s):
    return s.problem, s.branch, s.agent, s.turn, s.messages, s.text, s.reward, s.reward_global, s.selected


def make_pool(config: DistributedConfig, env_id: str = TOY, **env_kwargs):
    config.validate()
    pools = Pools(config, [])
    return pools, RolloutPool(config, pools.rollout, EnvFactory.of(env_id, env_kwargs))


@pytest.mark.parametrize("selection", ["greedy", "random"])
def test_tree_rollout_on_two_workers_equals_the_local_one(ray_cluster, selection):
    pools, pool = make_pool(DistributedConfig(rollout_workers=2), max_turns=2)
    try:
        problems = [3, 4, 5, 6, 7]  # an odd count: unequal shares
        remote = drive_tree(pool.tree(problems, "train"), 4, table_sampler, selection=selection,
                            rng=random.Random(11))
        local = tree_rollout(EnvFactory.of(TOY, {"max_turns": 2}), problems, 4, table_sampler, selection=selection,
                             rng=random.Random(11))
        assert [sample_key(s) for s in remote.samples] == [sample_key(s) for s in local.samples]
        assert remote.successes == local.successes and len(remote.samples) == 5 * 2 * 2 * 4
        # both workers held problems
        assert len({ray.get(w.pid.remote()) for w in pool.workers}) == 2
    finally:
        pool.shutdown()
        pools.remove()


def test_a_killed_rollout_worker_is_replaced_and_the_rollout_is_unchanged(ray_cluster):
    pools, pool = make_pool(DistributedConfig(rollout_workers=2, max_worker_restarts=2), max_turns=3)
    calls = []

    def killing_sampler(agent, prompts, n):
        calls.append(agent)
        if len(calls) == 3:  # mid-rollout, after two agent steps: worker 0 dies with its envs
            ray.kill(pool.workers[0], no_restart=True)
        return table_sampler(agent, prompts, n)

    try:
        problems = [0, 1, 2, 3]
        victim = pool.workers[0]
        remote = drive_tree(pool.tree(problems, "train"), 3, killing_sampler)
        local = tree_rollout(EnvFactory.of(TOY, {"max_turns": 3}), problems, 3, table_sampler)
        assert pool.workers[0] is not victim and pool.restarts == 1
        assert [sample_key(s) for s in remote.samples] == [sample_key(s) for s in local.samples]
        assert remote.successes == local.successes
    finally:
        pool.shutdown()
        pools.remove()


def test_without_restarts_left_a_dead_worker_is_a_clear_error(ray_cluster):
    pools, pool = make_pool(DistributedConfig(rollout_workers=2, max_worker_restarts=0))
    try:
        ray.kill(pool.workers[1], no_restart=True)
        with pytest.raises(ActorFailed, match=r"rollout worker 1 \(start\) died.*max_worker_restarts=0"):
            drive_tree(pool.tree([0, 1], "train"), 2, table_sampler)
    finally:
        pool.shutdown()
        pools.remove()


def test_a_hung_worker_times_out_and_is_replaced(ray_cluster, tmp_path):
    """A worker stuck in an env step (60 s) is given up after call_timeout_s, killed and replaced;
    the replacement replays without the stall and the rollout equals the local one."""
    stall = tmp_path / "stall"
    stall.touch()
    config = DistributedConfig(rollout_workers=2, call_timeout_s=4, max_worker_restarts=1)
    pools, pool = make_pool(config, STALLING, max_turns=2, stall_file=str(stall))
    try:
        start = time.monotonic()
        remote = drive_tree(pool.tree([0, 1], "train"), 2, table_sampler)
        assert time.monotonic() - start < 30 and pool.restarts == 1 and not stall.exists()
        local = tree_rollout(EnvFactory.of(STALLING, {"max_turns": 2}), [0, 1], 2, table_sampler)
        assert [sample_key(s) for s in remote.samples] == [sample_key(s) for s in local.samples]
    finally:
        pool.shutdown()
        pools.remove()


def test_engine_actors_sample_what_the_in_process_sampler_samples(ray_cluster, tiny_model_dir):
    """Two transformers engine actors, one call's prompts split between them, give the
    in-process PolicySet's completions for the same request seeds (same ids; log-probs within
    float tolerance), after a weight push they sample the pushed weights, and a dead engine is
    an error naming the policy's engines."""
    import torch

    from trainers.generation.transformers_backend import generate
    from trainers.models.policy_set import PolicySet

    config = TrainConfig.from_flat(model=str(tiny_model_dir), max_new_tokens=6, env=TOY, device="cpu")
    roles = ["first", "second"]
    dist = DistributedConfig(engines_per_policy=2, rollout_workers=1)
    dist.validate()
    pools = Pools(dist, ["shared"])
    generator = RayGenerator(config, dist, roles, pools.engines)
    try:
        local = PolicySet(config.model, config.policy_for_roles(roles))
        prompts = [local.encode_prompt([{"role": "user", "content": f"problem {i}"}]).ids for i in range(3)]
        seeds = RequestSeeds(5)
        seeds.begin("train", 0)
        call = seeds.next_call(len(prompts), 4)
        remote = generator.generate("shared", prompts, 4, seeds=call)
        here = generate(local, "shared", prompts, 4, seeds=call)
        assert [g.completion_ids for g in remote] == [g.completion_ids for g in here]
        assert all(torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)
                   for a, b in zip(remote, here, strict=True))
        with torch.no_grad():  # new weights: the engines must follow them
            for p in local.parameters("shared"):
                p.add_(0.5 * torch.randn_like(p))
        with local.active("shared") as model:
            generator.sync("shared", model)
        after = generator.generate("shared", prompts, 4, seeds=call)
        assert [g.completion_ids for g in after] == [g.completion_ids for g in generate(
            local, "shared", prompts, 4, seeds=call)]
        assert [g.completion_ids for g in after] != [g.completion_ids for g in here]
        ray.kill(generator.engines["shared"][1], no_restart=True)  # a dead engine fails the call, with its name
        with pytest.raises(ActorFailed, match=r"the generation engines of 'shared' died"):
            generator.generate("shared", prompts, 4, seeds=call)
    finally:
        generator.close()
        pools.remove()


def test_a_lora_engine_follows_the_pushed_adapter(ray_cluster, tiny_model_dir):
    """Under LoRA only the adapter travels (its state dict), and the engine then samples what
    the trainer's own model samples."""
    import torch

    from trainers.generation.transformers_backend import generate
    from trainers.models.policy_set import PolicySet

    config = TrainConfig.from_flat(model=str(tiny_model_dir), max_new_tokens=6, env=TOY, device="cpu", lora=True,
                                   regime="per_role")
    dist = DistributedConfig(rollout_workers=1)
    dist.validate()
    pools = Pools(dist, ["second"])
    generator = RayGenerator(config, dist, ["first", "second"], pools.engines)
    try:
        local = PolicySet(config.model, config.policy_for_roles(["second"]))
        prompts = [local.encode_prompt([{"role": "user", "content": f"problem {i}"}]).ids for i in range(2)]
        seeds = list(range(100, 106))
        before = [g.completion_ids for g in generate(local, "second", prompts, 3, seeds=seeds)]
        with torch.no_grad():
            for p in local.parameters("second"):
                p.add_(torch.randn_like(p))
        with local.active("second") as model:
            generator.sync("second", model)
        after = [g.completion_ids for g in generate(local, "second", prompts, 3, seeds=seeds)]
        assert after != before
        assert [g.completion_ids for g in generator.generate("second", prompts, 3, seeds=seeds)] == after
    finally:
        generator.close()
        pools.remove()
