"""The league's pool (trainers.league.pool): a snapshot, a scripted and a random opponent; the three
sampling rules, openskill ratings against the library's own updates, and exact resume from the run dir."""

from __future__ import annotations

import math

import pytest

openskill_models = pytest.importorskip("openskill.models")

from trainers.league.pool import LEARNER, League, LeagueError, Member, members_from_specs  # noqa: E402
from trainers.maths.opponent_sampling import loss_rate, opponent_weights  # noqa: E402


def three_member_league(rule: str, **options) -> League:
    league = League(members_from_specs(["scripted", "random"]), rule=rule, seed=3, **options)
    league.add_snapshot("step-10", "hf:runs/x/snapshots/10", step=10)
    return league


def draw_counts(league: League, draws: int) -> dict[str, int]:
    counts = {m.name: 0 for m in league.members}
    for _ in range(draws):
        counts[league.sample().name] += 1
    return counts


def within_sampling_noise(count: int, draws: int, p: float) -> bool:
    """``count`` of ``draws`` is within 5 binomial standard deviations of ``p``: a seeded draw, so this
    is a check of the weights reaching the sampler, not a flaky statistical test."""
    return abs(count - draws * p) <= 5 * math.sqrt(draws * p * (1 - p)) + 1


def test_pfsp_weights_follow_the_loss_rate_with_a_floor():
    assert opponent_weights("uniform", [0.9, 0.1, 0.5]) == pytest.approx([1 / 3] * 3)
    assert opponent_weights("latest", [0.9, 0.1, 0.5], latest=1) == [0.0, 1.0, 0.0]
    assert opponent_weights("latest", [0.9, 0.1], latest=None) == pytest.approx([0.5, 0.5])
    weights = opponent_weights("prioritised", [0.8, 0.4, 0.0], power=2, min_weight=0.01)
    raw = [0.64, 0.16, 0.01]
    assert weights == pytest.approx([w / sum(raw) for w in raw])
    assert loss_rate(losses=2, draws=2, games=8) == pytest.approx(3 / 8)
    assert loss_rate(0, 0, 0) == 0.5  # unplayed: an even match
    for bad in (("elo", [0.5]), ("uniform", [])):
        with pytest.raises(ValueError):
            opponent_weights(*bad)


def test_uniform_draws_each_member_a_third_of_the_time():
    league = three_member_league("uniform")
    counts = draw_counts(league, 3000)
    assert all(within_sampling_noise(c, 3000, 1 / 3) for c in counts.values()), counts


def test_latest_draws_only_the_newest_snapshot():
    league = three_member_league("latest")
    league.add_snapshot("step-20", "hf:runs/x/snapshots/20", step=20)
    assert set(draw_counts(league, 200)) == {"scripted", "random", "step-10", "step-20"}
    assert draw_counts(league, 200) == {"scripted": 0, "random": 0, "step-10": 0, "step-20": 200}


def test_prioritised_draws_most_the_opponent_that_still_wins():
    league = three_member_league("prioritised", window=10)
    for _ in range(10):
        league.record("scripted", "loss")  # the minimax-like opponent still beats the learner
        league.record("random", "win")
    for outcome in ("win", "loss", "draw", "win"):
        league.record("step-10", outcome)
    expected = opponent_weights("prioritised", [1.0, 0.0, 1.5 / 4])
    assert league.weights() == pytest.approx(expected)
    counts = draw_counts(league, 4000)
    for member, p in zip(league.members, expected, strict=True):
        assert within_sampling_noise(counts[member.name], 4000, p), counts
    # the window forgets: ten wins against scripted later, it is drawn at the floor
    for _ in range(10):
        league.record("scripted", "win")
    assert league.weights()[0] == pytest.approx(min(league.weights()))


def test_ratings_are_openskills_own_updates_and_a_snapshot_starts_at_the_learners():
    model = openskill_models.PlackettLuce()
    league = League(members_from_specs(["scripted", "random"]))
    learner, scripted, random_ = model.rating(), model.rating(), model.rating()
    games = [("scripted", "loss", [1, 0]), ("random", "win", [0, 1]), ("scripted", "draw", [0, 0]),
             ("random", "win", [0, 1])]
    for opponent, outcome, ranks in games:
        league.record(opponent, outcome)
        other = scripted if opponent == "scripted" else random_
        (learner,), (other,) = model.rate([[learner], [other]], ranks=ranks)
        if opponent == "scripted":
            scripted = other
        else:
            random_ = other
    for name, expected in ((LEARNER, learner), ("scripted", scripted), ("random", random_)):
        assert (league.ratings[name].mu, league.ratings[name].sigma) == pytest.approx((expected.mu, expected.sigma))
    snapshot = league.add_snapshot("step-5", "hf:dir", step=5)
    assert league.ratings[snapshot.name] == league.ratings[LEARNER]
    table = {row["name"]: row for row in league.table()}
    assert (table["scripted"]["wins"], table["scripted"]["draws"], table["scripted"]["losses"]) == (0, 1, 1)
    assert table["random"]["wins"] == 2
    assert table[LEARNER]["ordinal"] == pytest.approx(learner.mu - 3 * learner.sigma)


def test_self_play_games_are_counted_but_rate_no_one():
    league = League(members_from_specs(["current", "random"]))
    before = dict(league.ratings)
    league.record("current", "win")
    assert league.records["current"].wins == 1 and league.ratings == before


def test_a_resumed_league_draws_and_rates_as_one_that_never_stopped(tmp_path):
    def play(league: League, games: int) -> list[str]:
        drawn = []
        for k in range(games):
            opponent = league.sample()
            drawn.append(opponent.name)
            league.record(opponent.name, ("win", "loss", "draw")[k % 3])
        return drawn

    straight = three_member_league("prioritised", window=5)
    first_half = play(straight, 20)
    second_half = play(straight, 20)

    interrupted = three_member_league("prioritised", window=5)
    assert play(interrupted, 20) == first_half
    interrupted.save(tmp_path)
    resumed = League.load(tmp_path)
    assert play(resumed, 20) == second_half
    assert resumed.state_dict() == straight.state_dict()
    assert not (tmp_path / "league.json.partial").exists()


def test_bad_requests_are_refused_in_one_line(tmp_path):
    league = three_member_league("uniform")
    with pytest.raises(LeagueError, match="no league member 'minimax'"):
        league.record("minimax", "win")
    with pytest.raises(LeagueError, match="outcome 'won'"):
        league.record("random", "won")  # type: ignore[arg-type]
    with pytest.raises(LeagueError, match="is taken"):
        league.add_snapshot("random", "hf:dir", step=1)
    with pytest.raises(LeagueError, match="kind 'exploiter'"):
        League([Member("x", "random", "exploiter")])
    with pytest.raises(LeagueError, match="league rule 'elo'"):
        League([], rule="elo")
    with pytest.raises(LeagueError, match=r"league\.json is missing"):
        League.load(tmp_path)
