"""code_v0's judge: one verdict per (code, test) pair, from sandboxed runs.

The whole path from a program an agent wrote to its reward, in order (``code`` is
:mod:`pettingllm_envs.code`, ``judge`` this package):

1. **Extract the code.** The coder's action is parsed by
   :func:`pettingllm_envs.core.parsing.find_code_block` (the last ```` ```python ```` block),
   the tester's by :func:`code.tester_tests.parse_tests` (one test per top-level statement
   holding an ``assert``). ``code.code_env.raw_env.run`` then asks for verdicts.
2. **Judge each pair once.** :class:`code.verdict_cache.OutcomeCache` answers the (problem,
   code, test, perturbed, limits) pairs an env family has judged before and sends the rest to
   :func:`judge.scheduler.judge_jobs`. Every program of an env runs under one
   :class:`judge.limits.JudgeLimits` (time, memory, parallelism, reason length).
3. **Group the tests into runs** (:mod:`judge.scheduler`). A stdio problem's program runs once
   per test, its input on stdin, and :mod:`judge.stdio` compares the output token by token. A
   function-style problem's tests form :class:`judge.suite.Suite` objects: the hidden tests
   of one code share a run; every tester test runs alone.
4. **Run them in the sandbox** (:func:`pettingllm_envs.sandbox.execute_many`, in rounds of
   one batch each). Sources are compiled once on the host (:mod:`judge.sources`); each run's
   program is made from the modules of :mod:`judge.sandboxed`, shipped whole from their files
   (:mod:`judge.programs`). Two kinds of run:

   * a *one-process run* (:mod:`judge.one_process`), for the hidden tests whose calls the
     host recorded in advance (:mod:`judge.recording`): the code only answers those calls
     (:mod:`judge.sandboxed.answer`; calls in and replies out as in :mod:`judge.replies`),
     and never holds a test or an expected value;
   * a *driver run* (stdin from :mod:`judge.driver_runs`), for every other test: the trusted
     driver (:mod:`judge.sandboxed.driver`) forks the code's process
     (:mod:`judge.sandboxed.candidate`) before it reads the tests, runs the tests itself and
     calls the function through a socket (:mod:`judge.sandboxed.channel`), in a data-only
     codec (:mod:`judge.sandboxed.wire`), so nothing the code can call, patch, hook, exit
     through or return can make a test pass.

5. **Read the verdicts** (a :class:`judge.suite.Outcome` per pair). A driver run's verdicts
   are its last line, prefixed with a random token that only the driver's (non-dumpable)
   process holds (:func:`judge.driver_runs.read_verdicts`); a one-process run's replies are
   decoded as plain data and the host decides each test on them
   (:func:`judge.one_process.record_replies`, :mod:`judge.host_checks`). A test that crashes,
   hangs or breaks the code's process fails alone; the tests after it, and those a
   one-process run did not answer, go to a driver run in the next round.
6. **Hidden and shown tests** (:mod:`code.code_env`). The hidden tests' verdicts make the team
   state (the hidden pass rate) and never reach an observation. A tester test is *valid* when
   the reference passes it and fails it with every result perturbed (``perturb=True``:
   :func:`judge.sandboxed.wire.perturb`); the verdicts of valid tests on the coder's code, with
   their clipped reasons, are what the coder is shown.
7. **Mutants** (:mod:`code.mutants`). A valid test's worth is the share of the reference's
   plausible mutants it kills (:func:`code.mutants.tests_worth`), under the reference's time
   limit, each kill confirmed on the mutant with its crashes repaired; mutants are screened
   with one-process runs. Every program is compiled as ``ast.unparse`` prints it
   (:func:`judge.sources.printed`) and no message carries a line number.
8. **Reward** (``code.code_env.raw_env.local_state`` and ``global_reward``). The coder's
   potential is its pass rate on the valid tests, the tester's its tests' worth plus bug
   credit; the base class :class:`pettingllm_envs.core.TextAECEnv` pays each step the changes
   of the potentials and of the team state.
"""
