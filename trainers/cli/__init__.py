"""The ``pettingllm`` subcommands the trainers add (``train``, ``train-variants``, ``train-mgrpo``,
``self-consistency``, ``train-ray``, ``serve``, ``plot``, ``tiny-model``): argument parsing and nothing else."""
