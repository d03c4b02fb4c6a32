"""The learning-evidence experiment and its tools (not part of the library): the warm start's
demonstrations (:mod:`.demonstrations`), supervised fine-tuning on them (:mod:`.sft`,
``python -m benchmarks.learning.sft``) and the AT-GRPO comparison (:mod:`.experiment`,
``python -m benchmarks.learning``). Run from the repository root."""
