"""``python -m benchmarks.learning``: the learning-evidence experiment (:mod:`benchmarks.learning.experiment`).
Results go to ``benchmarks/results/learning/``."""

from benchmarks.learning.experiment import main

raise SystemExit(main())
