"""The conformance battery (``pettingllm_envs.testing``) on an env written here as a third-party
author would write it, outside the package and unregistered; and on variants of it broken on
purpose, each caught with a message that names the rule it broke.

The guessing game: the scout sees a secret number and sends a hint, the guesser sees only
the hint and guesses. Its oracle reads the observations alone; its honest wrong attempt is
the right format with a wrong number.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from pettingllm_envs.capabilities import Demonstrations
from pettingllm_envs.core import ActionResult, TextAECEnv, TextEnvConfig, wrap_env
from pettingllm_envs.testing import (
    ConformanceError,
    check_deepcopy_continuation,
    check_demonstrations,
    check_env,
    check_junk_actions,
    check_junk_never_beats_wrong,
    check_pickle_continuation,
    check_split_disjointness,
    check_truncation,
)

#: A number the regular expression reads: at most 9 digits (a longer run is not a number to it).
NUMBER = r"(-?\d{1,9})(?!\d)"


@dataclass
class GuessConfig(TextEnvConfig):
    """The guessing game's options."""

    max_turns: int = 3
    largest: int = 1000
    """The secret is drawn from 1..largest."""


class GuessingGame(TextAECEnv[int]):
    """Two roles: the scout sees the secret and replies ``HINT: n``; the guesser sees the hint
    and replies ``GUESS: n``. Solved when the guess is the secret. Local rewards: 0.2 for a
    right hint, 1 for a right guess; a reply without its command costs the format penalty."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "ansi"], "name": "guessing_v0",
                                          "is_parallelizable": False}
    roles = ("scout", "guesser")
    config_class = GuessConfig
    config: GuessConfig

    def generate_instance(self, rng: Any) -> int:
        return rng.randint(1, self.config.largest)

    def instance_key(self, instance: int) -> str:
        return str(instance)

    def start_episode(self, instance: int) -> None:
        self.hint: int | None = None
        self.guess: int | None = None

    def before_action(self, agent: str) -> None:
        if agent == "scout":
            self.hint = None  # junk withdraws the hint: it must not be a safe fallback
        else:
            self.guess = None

    def apply_action(self, agent: str, text: str) -> ActionResult:
        command = "HINT" if agent == "scout" else "GUESS"
        found = re.findall(rf"{command}:\s*{NUMBER}", text)
        if not found:
            return ActionResult(-self.config.format_penalty, valid=False,
                                invalid_reason=f"no '{command}: <number>' line")
        number = int(found[-1])
        right = number == self.instance
        if agent == "scout":
            self.hint = number
            return ActionResult(0.2 if right else 0.0, parsed=number)
        self.guess = number
        return ActionResult(1.0 if right else 0.0, parsed=number)

    def global_reward(self) -> float:
        return 1.0 if self.guess == self.instance else 0.0

    def is_success(self, agent: str | None = None) -> bool:
        return self.guess == self.instance

    def role_instructions(self, agent: str) -> str:
        if agent == "scout":
            return "You are the scout. Tell the guesser the secret number: reply 'HINT: <number>'."
        return "You are the guesser. Guess the secret number from the scout's hint: reply 'GUESS: <number>'."

    def task_view(self, agent: str) -> str:
        if agent == "scout":
            return f"Turn {self.turn}. The secret number is {self.instance}."
        return f"Turn {self.turn}. Hint: {self.hint if self.hint is not None else 'none'}."

    def render_state(self) -> str:
        return f"secret {self.instance}, hint {self.hint}, guess {self.guess}"


def guessing_env(**config: Any) -> Any:
    return wrap_env(GuessingGame(**config))


def oracle(observation: str, agent: str, info: dict[str, Any]) -> str:
    """Reads the number the observation shows (the secret, or the hint) and passes it on."""
    shown = re.findall(r"(?:secret number is|Hint:) (\d+)", observation)
    number = shown[-1] if shown else "1"
    return f"HINT: {number}" if agent == "scout" else f"GUESS: {number}"


def wrong_attempt(env: Any, agent: str) -> str:
    """The right format with a wrong number."""
    wrong = env.instance % env.config.largest + 1
    return f"HINT: {wrong}" if agent == "scout" else f"GUESS: {wrong}"


def demonstrated(env: Any, agent: str, rng: random.Random, mistake_rate: float) -> tuple[str, bool]:
    """The Demonstrations capability's act: the oracle's reply, or with ``mistake_rate`` the wrong attempt."""
    if rng.random() < mistake_rate:
        return wrong_attempt(env.unwrapped, agent), True
    return oracle(str(env.observe(agent)), agent, env.infos[agent]), False


DEMONSTRATIONS = Demonstrations(act=demonstrated, partner=lambda env, agent: oracle(str(env.observe(agent)), agent,
                                                                                    env.infos[agent]))


def test_the_battery_passes_a_third_party_env_and_says_what_it_skipped():
    report = check_env(guessing_env, policy=oracle, wrong=wrong_attempt, demonstrations=DEMONSTRATIONS)
    assert report.env == "guessing_v0"
    assert set(report.skipped) == {"env module"}, report.skipped
    assert {"PettingZoo api_test", "PettingZoo seed_test", "PettingZoo parallel_api_test", "junk actions",
            "deepcopy continuation", "pickle continuation", "splits", "truncation", "oracle solves",
            "junk never beats a wrong attempt", "demonstrations"} <= set(report.passed)
    assert "skipped  env module: the env is not registered" in str(report)
    check_truncation(guessing_env(), by_truncation=True)  # its idle replies never end the task


def test_without_an_oracle_the_oracle_checks_are_skipped_and_say_why():
    report = check_env(guessing_env)
    assert "policy=" in report.skipped["oracle solves"]
    assert "wrong=" in report.skipped["junk never beats a wrong attempt"]
    assert "deepcopy continuation" in report.passed  # played with random text instead
    with pytest.raises(TypeError, match="pass a factory"):
        check_env(guessing_env())  # one env cannot serve checks that need several


# ----------------------------------------------------------------- broken on purpose
class CrashesOnJunk(GuessingGame):
    """Reads the number after the colon without checking there is one."""

    def apply_action(self, agent: str, text: str) -> ActionResult:
        number = int(text.split(":", 1)[1])
        self.guess = number
        return ActionResult(1.0 if number == self.instance else 0.0, parsed=number)


class CopiesShareGuesses(GuessingGame):
    """Keeps every guess in a list it declares shared, so deep copies append to one list."""

    shared_attributes = GuessingGame.shared_attributes | {"guesses"}

    def start_episode(self, instance: int) -> None:
        super().start_episode(instance)
        self.guesses: list[str] = []

    def apply_action(self, agent: str, text: str) -> ActionResult:
        self.guesses.append(text[:20])
        return super().apply_action(agent, text)

    def task_view(self, agent: str) -> str:
        return super().task_view(agent) + f" Replies so far: {self.guesses}"


class WrongCostsMoreThanJunk(GuessingGame):
    """Charges a wrong guess 1, more than the 0.5 format penalty: junk becomes the safe reply."""

    def apply_action(self, agent: str, text: str) -> ActionResult:
        result = super().apply_action(agent, text)
        if result.valid and agent == "guesser" and result.local_reward == 0.0:
            return ActionResult(-1.0, parsed=result.parsed)
        return result


class IgnoresTheSplit(GuessingGame):
    """Loads problem ``index`` whatever the split asked for: train and test are one set of problems."""

    def load_instance(self, index: int, split: Any) -> int:
        return index + 1


def test_an_env_that_crashes_on_junk_is_caught_naming_the_action():
    with pytest.raises(ConformanceError, match=r"guessing_v0 breaks 'junk never raises.*step\(''\) by 'scout' "
                                               r"raised IndexError"):
        check_junk_actions(lambda: wrap_env(CrashesOnJunk()))
    with pytest.raises(ConformanceError, match="fails PettingZoo's api_test: the env raised"):
        check_env(lambda: wrap_env(CrashesOnJunk()), policy=oracle)


def test_copies_that_share_state_are_caught_naming_the_first_difference():
    broken = lambda: wrap_env(CopiesShareGuesses())  # noqa: E731
    with pytest.raises(ConformanceError, match=r"a deep copy continues exactly as the original.*at step 0 the "
                                               r"observations differ: \['scout'\] from character \d+: original "
                                               r"\.\.\.\" so far: \['not a valid action'\]\", copy \.\.\.\" so far: "
                                               r"\['not a valid action', 'GUESS: 1'"):
        check_deepcopy_continuation(broken, policy=oracle)
    check_pickle_continuation(broken, policy=oracle)  # a pickle has its own list: only deep copies share it
    check_deepcopy_continuation(guessing_env, policy=oracle)


def test_junk_that_beats_a_wrong_attempt_is_caught_with_both_rewards():
    with pytest.raises(ConformanceError, match=r"junk earns no more than an honest wrong attempt': seed 0, "
                                               r"'guesser' at turn 0: the empty reply pays -0.500 for the step, "
                                               r"the wrong attempt 'GUESS: \d+' -1.000"):
        check_junk_never_beats_wrong(lambda: wrap_env(WrongCostsMoreThanJunk()), wrong_attempt, policy=oracle)


def test_demonstrations_that_never_flag_a_mistake_are_caught():
    unflagged = Demonstrations(act=lambda env, agent, rng, rate: (demonstrated(env, agent, rng, rate)[0], False),
                               partner=DEMONSTRATIONS.partner)
    with pytest.raises(ConformanceError, match=r"at mistake rate 1 every demonstration is flagged a mistake': "
                                               r"problem 0: act\(\) gave 'HINT: \d+' of 'scout' unflagged"):
        check_demonstrations(guessing_env, unflagged)


def test_splits_that_share_problems_are_caught():
    with pytest.raises(ConformanceError, match=r"an instance lies in the split its content hashes into': instance "
                                               r"\d+ of train has key '\d+', which hashes into test"):
        check_split_disjointness(wrap_env(IgnoresTheSplit()), 50)
    assert len(check_split_disjointness(guessing_env(), 50)["test"]) > 40


def test_the_battery_runs_without_pytest_or_pygame():
    """An author's script or CI need only the package: PettingZoo's test helpers import pytest
    and pygame only when installed, and the battery imports neither."""
    code = ("import sys\n"
            "sys.modules['pytest'] = sys.modules['pygame'] = None  # not installed\n"
            "from pettingllm_envs.testing import check_api, check_junk_actions\n"
            "check_api('tictactoe_v0', num_cycles=20)\n"
            "check_junk_actions('tictactoe_v0', rounds=1)\n"
            "print('passed')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "passed", done.stderr[-2000:]
