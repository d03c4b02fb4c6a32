"""The conformance battery: the checks every pettingllm env passes, for any env's author.

PettingZoo ships ``pettingzoo.test.api_test`` for its API; this package is the same habit
for the rest of the contract of docs/design.md §2-§3 (and the repository's own registry-wide
tests call it)::

    from pettingllm_envs.testing import check_env

    report = check_env(lambda: my_env(), policy=my_oracle, wrong=my_wrong_attempt)
    print(report)   # what passed, what was skipped and why

``check_env`` runs every check below and raises :class:`ConformanceError` (an
``AssertionError`` naming the env, the rule and what broke it) at the first failure. Each
check is also a public function, given a registered env id or a factory of fresh envs:

* API: PettingZoo's ``api_test``, ``seed_test`` and ``parallel_api_test`` (:func:`check_api`,
  :func:`check_seed`, :func:`check_parallel_api`), the env module (:func:`check_env_module`)
  and the infos of every step (:func:`check_infos`);
* junk: no model output makes ``step`` raise (:func:`check_junk_actions`), a non-string
  costs the format penalty (:func:`check_non_string_penalty`);
* copies: a deep copy and a pickle continue exactly as the original
  (:func:`check_deepcopy_continuation`, :func:`check_pickle_continuation`,
  :func:`check_parallel_pickle`) and share only what is read-only (:func:`check_deepcopy_sharing`);
* reproducibility: one seed, one episode (:func:`check_same_seed_same_episode`), disjoint
  splits (:func:`check_split_disjointness`, :func:`check_reset_repeats`), truncation at
  ``max_turns`` (:func:`check_truncation`);
* scripted play: the oracle solves every problem (:func:`check_oracle_solves`), declared
  demonstrations solve and flag their mistakes (:func:`check_demonstrations`);
* reward integrity: junk never earns more than an honest wrong attempt
  (:func:`check_junk_never_beats_wrong`).

docs/testing-your-env.md shows a whole third-party env through it. The package needs nothing
beyond the envs' own dependencies (no pytest), and imports no trainer.
"""

from pettingllm_envs.testing.api import (
    check_api,
    check_env_module,
    check_infos,
    check_parallel_api,
    check_seed,
)
from pettingllm_envs.testing.battery import ConformanceReport, check_env
from pettingllm_envs.testing.continuation import (
    check_deepcopy_continuation,
    check_deepcopy_sharing,
    check_parallel_pickle,
    check_pickle_continuation,
    continue_episode,
    mixed_policy,
    pickle_round_trip,
    snapshot,
)
from pettingllm_envs.testing.integrity import WrongAction, check_junk_never_beats_wrong
from pettingllm_envs.testing.junk import (
    JUNK_ACTIONS,
    check_junk_actions,
    check_non_string_penalty,
    random_printable,
    step_junk_actions,
)
from pettingllm_envs.testing.oracle import check_demonstrations, check_oracle_solves
from pettingllm_envs.testing.reproducibility import (
    check_reset_repeats,
    check_same_seed_same_episode,
    check_split_disjointness,
    check_truncation,
)
from pettingllm_envs.testing.specs import ConformanceError, EnvFactory, EnvSpec, NotApplicable

__all__ = [
    "JUNK_ACTIONS",
    "ConformanceError",
    "ConformanceReport",
    "EnvFactory",
    "EnvSpec",
    "NotApplicable",
    "WrongAction",
    "check_api",
    "check_deepcopy_continuation",
    "check_deepcopy_sharing",
    "check_demonstrations",
    "check_env",
    "check_env_module",
    "check_infos",
    "check_junk_actions",
    "check_junk_never_beats_wrong",
    "check_non_string_penalty",
    "check_oracle_solves",
    "check_parallel_api",
    "check_parallel_pickle",
    "check_pickle_continuation",
    "check_reset_repeats",
    "check_same_seed_same_episode",
    "check_seed",
    "check_split_disjointness",
    "check_truncation",
    "continue_episode",
    "mixed_policy",
    "pickle_round_trip",
    "random_printable",
    "snapshot",
    "step_junk_actions",
]
