"""Scale-out of the AT-GRPO trainer on Ray and torch.distributed (docs/scaling.md).

The single-process :class:`trainers.algorithms.atgrpo.train.Trainer` stays the default; this package runs the
same algorithm with its parts on Ray actors:

* :mod:`~trainers.distributed.config`: the layout (how many of each actor, their resources);
* :mod:`~trainers.distributed.cluster`: Ray init or cluster join, placement groups, bounded waits;
* :mod:`~trainers.distributed.rollout`: tree rollouts whose envs live on rollout workers;
* :mod:`~trainers.distributed.engine`: generation engines (transformers or vLLM) per policy;
* :mod:`~trainers.distributed.data_parallel`: one policy's update on N ranks, DDP or FSDP2 (docs/fsdp.md);
* :mod:`~trainers.distributed.train_worker`: the training ranks as Ray actors;
* :mod:`~trainers.distributed.torchrun_train`: the same training under ``torchrun``, rank 0 the trainer;
* :mod:`~trainers.distributed.trainer`: the trainer that puts them together;
* :mod:`~trainers.distributed.faults`: a dead rollout worker or engine costs a retried step;
* :mod:`~trainers.cli.train_ray`: ``pettingllm train-ray``.
"""
