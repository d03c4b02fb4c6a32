"""M-GRPO maths: trajectory alignment invariants, hierarchical advantages, batches from real rollouts."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

import pettingllm_envs
from pettingllm_envs.capabilities import Delegation, capability
from pettingllm_envs.research.oracle import scripted_policy
from trainers.algorithms.mgrpo.alignment import (
    align_batch,
    align_rollout,
    main_advantages,
    main_batch,
    single_agent_batch,
    sub_advantages,
    sub_batch,
)
from trainers.algorithms.mgrpo.rollout import Outcome, hierarchical_rollout, served_delegations


@pytest.mark.parametrize("trim", ["random", "last"])
def test_every_rollout_yields_exactly_d_max_slots_from_itself(trim):
    rng = random.Random(1)
    for _ in range(200):
        counts = {(q, r): rng.randrange(0, 7) for q in range(3) for r in range(4)}
        d_max = rng.randrange(1, 6)
        slots = align_batch(counts, d_max, trim=trim, seed=rng.randrange(100))
        assert len(slots) == d_max * len(counts)
        for key, count in counts.items():
            mine = [s for s in slots if (s.question, s.rollout) == key]
            assert [s.position for s in mine] == list(range(d_max))
            if count == 0:  # nothing to duplicate without mixing rollouts: empty, never padded
                assert all(s.empty and not s.padded for s in mine)
                continue
            assert all(0 <= s.source < count for s in mine)  # no cross-rollout mixing
            originals = [s.source for s in mine if not s.padded]
            assert len(originals) == len(set(originals)) == min(count, d_max)
            assert originals == sorted(originals)
            assert sum(s.padded for s in mine) == max(0, d_max - count)
            if count < d_max:
                assert originals == list(range(count))


def test_trim_last_keeps_the_first_and_random_is_seeded():
    rng = random.Random(0)
    assert [s.source for s in align_rollout("q", 0, 5, 3, trim="last", rng=rng)] == [0, 1, 2]
    draws = {tuple(s.source for s in align_batch({("q", 0): 6}, 3, trim="random", seed=seed)) for seed in range(30)}
    assert len(draws) > 3  # really random across seeds
    assert align_batch({("q", 0): 6}, 3, seed=4) == align_batch({("q", 0): 6}, 3, seed=4)
    # a rollout's alignment does not depend on the other rollouts in the batch
    alone = align_batch({("q", 1): 1}, 4, seed=9)
    together = [s for s in align_batch({("q", 0): 2, ("q", 1): 1}, 4, seed=9) if s.rollout == 1]
    assert alone == together


def test_align_rejects_bad_arguments():
    rng = random.Random(0)
    with pytest.raises(ValueError, match="d_max"):
        align_rollout("q", 0, 1, 0, rng=rng)
    with pytest.raises(ValueError, match="trim"):
        align_rollout("q", 0, 3, 2, trim="first", rng=rng)  # type: ignore[arg-type]


def test_main_advantages_are_per_question():
    rewards = {(0, 0): 1.2, (0, 1): 0.2, (1, 0): 0.0, (1, 1): 0.0, (2, 0): -0.5, (2, 1): 0.5, (2, 2): 0.5}
    adv, degenerate, stats = main_advantages(rewards, normalize="mean")
    assert degenerate == {(1, 0), (1, 1)}
    assert adv[0, 0] == pytest.approx(0.5) and adv[0, 1] == pytest.approx(-0.5)
    assert adv[1, 0] == adv[1, 1] == 0.0  # degenerate: counted, zero
    assert adv[2, 0] == pytest.approx(-0.5 - 1 / 6) and adv[2, 1] == pytest.approx(0.5 - 1 / 6)
    assert (stats.groups, stats.degenerate) == (3, 1)
    adv, _, _ = main_advantages({(0, 0): 1.0, (0, 1): 0.0})
    assert adv[0, 0] == pytest.approx(1.0, abs=1e-5) and adv[0, 1] == pytest.approx(-1.0, abs=1e-5)


def test_sub_advantages_group_aligned_slots_per_question_including_pads():
    counts = {(0, 0): 1, (0, 1): 2, (0, 2): 0, (1, 0): 3}
    slots = align_batch(counts, 2, trim="last", seed=0)
    rewards = {(0, 0, 0): 1.0, (0, 1, 0): 0.0, (0, 1, 1): 0.5, (1, 0, 0): 2.0, (1, 0, 1): 2.0, (1, 0, 2): -9.0}
    adv, degenerate, stats = sub_advantages(slots, rewards, normalize="mean")
    by = {(s.question, s.rollout, s.position): a for s, a in zip(slots, adv, strict=True)}
    assert [s.question == 1 for s in slots] == degenerate  # question 0's empty slots are in no group
    # question 0: slots (rollout 0: 1.0 and its pad 1.0), (rollout 1: 0.0, 0.5); mean 0.625
    assert by[0, 0, 0] == by[0, 0, 1] == pytest.approx(0.375)
    assert by[0, 1, 0] == pytest.approx(-0.625) and by[0, 1, 1] == pytest.approx(-0.125)
    assert by[0, 2, 0] == by[0, 2, 1] == 0.0  # empty slots
    assert by[1, 0, 0] == by[1, 0, 1] == 0.0  # trimmed -9.0 never enters: the group is degenerate
    assert (stats.groups, stats.degenerate) == (2, 1)


@dataclass
class Text:
    text: str


def scripted_sampler(answer_now: set[tuple[int, int]]):
    """The env's oracle, except that the rollouts in ``answer_now`` answer at once (wrongly)."""
    def sample(agent, prompts, keys):
        out = []
        for messages, key in zip(prompts, keys, strict=True):
            if agent == "main" and key in answer_now:
                out.append(Text("ANSWER: nobody"))
            else:
                out.append(Text(scripted_policy(messages[-1]["content"], agent, {})))
        return out
    return sample


def test_hierarchical_rollout_and_batches_on_research_v0():
    """Real research_v0 episodes: the oracle solves rollouts 0-1 of each question with one
    delegation per hop; rollout 2 answers at once. Rewards, links and batches must agree."""
    sampler = scripted_sampler({(q, 2) for q in range(2)})
    result = hierarchical_rollout(lambda: pettingllm_envs.make("research_v0"), [0, 1], 3,
                                  {"main": sampler, "sub": sampler},
                                  delegation=capability("research_v0", Delegation))
    for (_, r), o in result.outcomes.items():
        if r == 2:
            assert not o.correct and o.main_reward == pytest.approx(0.2) and o.delegation_rewards == []
        else:
            assert o.correct and o.main_reward == pytest.approx(1.2)
            assert len(o.delegation_rewards) in (2, 3)  # one per hop
            assert all(rw == pytest.approx(0.05 + 0.5 + 0.5) for rw in o.delegation_rewards)  # lookup, report, outcome
            assert o.sub_delegations == sorted(o.sub_delegations) and set(o.sub_delegations) == set(
                range(len(o.delegation_rewards)))
    batch, stats = main_batch(result.turns, result.outcomes)
    assert stats.groups == 2 and stats.degenerate == 0
    assert all(s.advantage > 0 for s in batch if s.completion.text.startswith("DELEGATE")) and len(batch) == sum(
        t.agent == "main" for t in result.turns)
    assert not any(s.degenerate for s in batch)
    subs: dict = {}
    for t in result.turns:
        if t.agent == "sub":
            subs.setdefault((t.question, t.rollout), []).append(t.completion)
    sbatch, sstats = sub_batch(subs, result.outcomes, 2, trim="last")
    assert sstats.slots == 2 * 3 * 2 and sstats.empty == 2 * 2  # rollout 2 of each question
    assert sstats.degenerate == 2  # every sub-trajectory earned the same: no signal, honestly zero
    assert all(s.degenerate and s.advantage == 0 for s in sbatch)
    assert len(sbatch) == 2 * 2 * 2 * 2  # 2 questions x 2 rollouts x 2 slots x (LOOKUP, REPORT)
    single, _ = single_agent_batch(result.turns, result.outcomes)
    assert len(single) == len(result.turns)
    with pytest.raises(ValueError, match="sub completions"):
        sub_batch({k: v[:-1] for k, v in subs.items()}, result.outcomes, 2)


def test_a_delegation_the_sub_never_served_is_no_sub_trajectory():
    """research_v0 with max_main_steps=2: the oracle delegates hop 1, the sub serves it, then the
    main's last step delegates hop 2 and the episode ends before the sub acts. That unserved
    delegation (reward 0) must not become an alignment slot: it has no sample, and its 0 would
    shift the sub group's mean."""
    sampler = scripted_sampler(set())
    result = hierarchical_rollout(lambda: pettingllm_envs.make("research_v0", max_main_steps=2, hops=2), [0], 2,
                                  {"main": sampler, "sub": sampler}, delegation=capability("research_v0", Delegation))
    assert [t.completion.text.split(":")[0] for t in result.turns if t.rollout == 0] == [
        "DELEGATE", "LOOKUP", "REPORT", "DELEGATE"]
    for outcome in result.outcomes.values():
        assert outcome.delegation_rewards == [pytest.approx(0.55)] and outcome.sub_delegations == [0, 0]
    subs: dict = {}
    for t in result.turns:
        if t.delegation is not None:
            subs.setdefault((t.question, t.rollout), []).append(t.completion)
    sbatch, sstats = sub_batch(subs, result.outcomes, 2, trim="last")
    assert (sstats.slots, sstats.padded, sstats.empty) == (4, 2, 0)
    assert len(sbatch) == 2 * 2 * 2  # 2 rollouts x 2 slots (one a pad) x (LOOKUP, REPORT)
    assert served_delegations([1.0, 0.5, 0.0], [0, 0, 2]) == ([1.0, 0.0], [0, 0, 1])


def test_outcome_json_round_trip():
    o = Outcome(1.2, True, [1.05, -0.5], [0, 0, 1])
    assert Outcome.from_json(o.to_json()) == o
