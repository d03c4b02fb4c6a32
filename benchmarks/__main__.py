"""``python -m benchmarks`` is ``pettingllm bench``: every env by every policy."""

import sys

from pettingllm_envs.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
