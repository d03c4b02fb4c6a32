"""``python -m benchmarks.learning``: the learning-evidence experiment (:mod:`trainers.learning`).

The experiment is ``pettingllm learning`` (its code is in ``trainers/learning.py`` so that the
installed command works outside a checkout); this module runs it from the repository root
like the other benchmarks. Results go to ``benchmarks/results/learning/``.
"""

from trainers.learning import main

if __name__ == "__main__":
    raise SystemExit(main())
