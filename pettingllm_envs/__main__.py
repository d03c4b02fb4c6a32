"""``python -m pettingllm_envs`` is the ``pettingllm`` command."""

import sys

from pettingllm_envs.cli import main

sys.exit(main())
