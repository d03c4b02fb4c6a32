"""The Ray trainer with FSDP2 training groups (``data_parallel: fsdp``): the same worker code as the
torchrun entry, on 2-rank gloo groups, one policy per role. Two steps give the single-process run's
samples and weights; the checkpoint, gathered from the shards, resumes on 1 rank."""

from __future__ import annotations

import pytest
from test_distributed_training import assert_close_weights, config, layout

from trainers.algorithms.atgrpo.train import Trainer
from trainers.distributed.trainer import DistributedTrainer

pytestmark = pytest.mark.slow

#: Sharded ranks score through the model's own forward (the shared-prefix path takes no DTensor), so
#: every run here takes that path: what is compared is the distribution, not two kernels' float
#: summation orders as well (which Adam amplifies, test_distributed_training.WEIGHT_ATOL).
REFERENCE_PATH = {"shared_prefix": False}


def test_fsdp_groups_on_ray_equal_the_single_process_run_and_resume_on_one_rank(
        ray_cluster, tiny_model_dir, tmp_path):
    local = Trainer(config(tiny_model_dir, tmp_path / "local", steps=3, regime="per_role", checkpoint_every=2,
                          **REFERENCE_PATH))
    local.train()
    run = tmp_path / "remote"
    with DistributedTrainer(config(tiny_model_dir, run, steps=2, regime="per_role", checkpoint_every=2,
                                   **REFERENCE_PATH),
                            layout(data_parallel="fsdp")) as first:
        first.train()
        assert first.dist.data_parallel == "fsdp"
    with DistributedTrainer(config(tiny_model_dir, run, steps=3, regime="per_role", checkpoint_every=2, resume=True,
                                   **REFERENCE_PATH),
                            layout(rollout_workers=1, train_workers_per_policy=1)) as resumed:
        assert resumed.step == 2
        resumed.train()
        assert (run / "samples.jsonl").read_text() == (tmp_path / "local" / "samples.jsonl").read_text()
        assert_close_weights(local, resumed)
