"""The policy's fast paths against the plain computation they replace, on the tiny model.

``PolicySet.token_logprobs`` encodes each distinct prompt once and scores the completions
on the expanded KV cache; the in-process sampler (``transformers_backend.generate``) does the
same for sampling. Both must give
what a plain forward over ``prompt + completion`` of each row on its own gives: the same
log-probs and, through the shared prompt, the same gradients. Also: float32 master weights
under bf16 compute, stop tokens from the generation config, the exact sampler on a real
vocabulary size, middle truncation of long prompts, chunked scoring and gradient checkpointing.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from sampler_stats import chi_square_p_value, draw_many, float32_unreachable, poisson_bounds

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.generation.sampling import sample_categorical
from trainers.generation.transformers_backend import generate
from trainers.models.policy_set import PolicySet
from trainers.models.prompts import TRUNCATION_MARKER, stop_token_ids
from trainers.models.spec import ModelSpec


def plain_logprobs(policies: PolicySet, model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """One row, no padding, no cache: log-probs of ``completion`` after ``prompt``."""
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1]
    logp = F.log_softmax(logits.float() / policies.spec.temperature, dim=-1)
    return logp.gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def rows() -> tuple[list[list[int]], list[list[int]]]:
    """Two groups sharing prompts, a prompt of another length, completions of lengths 1 to 5."""
    a, b, c = list(range(3, 20)), list(range(30, 40)), list(range(50, 73))
    prompts = [a, a, a, b, b, c]
    completions = [[5, 6, 7, 8, 9], [10, 11], [12], [13, 14, 15], [16, 17, 18, 19, 20], [21, 22]]
    return prompts, completions


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_shared_prompt_scoring_equals_plain_per_row_scoring(tiny_model_dir, lora):
    config = TrainConfig.from_flat(model=str(tiny_model_dir), temperature=0.7, lora=lora)
    policies = PolicySet(config.model, config.policy_for_roles(["first"]))
    params = policies.parameters("shared")
    prompts, completions = rows()
    advantages = torch.linspace(-1.0, 1.0, len(prompts))
    with policies.active("shared") as model:
        logp, mask = policies.token_logprobs(model, prompts, completions)
        assert logp.shape == mask.shape == (len(prompts), 5)
        assert mask.sum(dim=1).tolist() == [len(c) for c in completions]
        fast = ((logp * mask).sum(dim=1) * advantages).sum()
        fast_grads = torch.autograd.grad(fast, params)
        expected = [plain_logprobs(policies, model, p, c) for p, c in zip(prompts, completions, strict=True)]
        plain = sum(e.sum() * a for e, a in zip(expected, advantages, strict=True))
        plain_grads = torch.autograd.grad(plain, params)
    for row, e in enumerate(expected):
        assert torch.allclose(logp[row, :len(e)], e, atol=1e-5)
    for fast_grad, plain_grad in zip(fast_grads, plain_grads, strict=True):
        assert torch.allclose(fast_grad, plain_grad, atol=1e-5, rtol=1e-4)


def test_generation_logprobs_match_plain_scoring_and_are_seeded(tiny_model_dir):
    config = TrainConfig.from_flat(model=str(tiny_model_dir), max_new_tokens=6)
    policies = PolicySet(config.model, config.policy_for_roles(["first"]))
    prompts = [list(range(3, 20)), list(range(30, 40))]  # different lengths: the padded path
    torch.manual_seed(1)
    generations = generate(policies, "shared", prompts, 3)
    torch.manual_seed(1)
    again = generate(policies, "shared", prompts, 3)
    assert [g.completion_ids for g in generations] == [g.completion_ids for g in again]
    assert [g.prompt_ids for g in generations] == [p for p in prompts for _ in range(3)]
    with torch.no_grad(), policies.active("shared") as model:
        for g in generations:
            expected = plain_logprobs(policies, model, g.prompt_ids, g.completion_ids)
            assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-5)


def test_inverse_cdf_sampling_draws_from_the_distribution():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0]]).expand(40_000, -1)
    generator_state = torch.get_rng_state()
    torch.manual_seed(0)
    draws = sample_categorical(probs)
    torch.set_rng_state(generator_state)
    counts = torch.bincount(draws, minlength=6).float() / len(draws)
    assert counts[[0, 2, 5]].sum() == 0  # zero-probability tokens, including the last, never come up
    assert torch.allclose(counts, probs[0], atol=0.01)


# ------------------------------------------------------------------ the sampler on a real vocabulary size
def zipf_with_a_tail(vocab: int, head: int, tail_prob: float) -> torch.Tensor:
    """A Zipf head on the first ``head`` ids (as BPE vocabularies put frequent tokens first)
    and a flat tail of ``tail_prob`` per token, the shape of an LM's next-token distribution."""
    probs = torch.full((vocab,), tail_prob, dtype=torch.float64)
    zipf = 1.0 / torch.arange(1, head + 1, dtype=torch.float64) ** 1.1
    probs[:head] = zipf / zipf.sum() * (1.0 - tail_prob * (vocab - head))
    return probs.float()


def test_sampler_is_exact_on_a_152k_vocabulary_including_the_tail_float32_cannot_reach():
    torch.manual_seed(0)
    probs = zipf_with_a_tail(151_936, head=2_000, tail_prob=3e-8)  # half a float32 ulp near 1
    unreachable = float32_unreachable(probs)
    assert unreachable.sum() > 50_000  # the old sampler could never draw any of these
    draws = draw_many(probs, 16_384)
    counts = torch.bincount(draws, minlength=len(probs))
    low, high = poisson_bounds(len(draws) * float(probs[unreachable].double().sum()))
    assert low <= counts[unreachable].sum() <= high
    assert chi_square_p_value(counts, probs) > 1e-4


def test_sampler_never_draws_zero_probability_tokens_on_large_vocabularies():
    torch.manual_seed(0)
    probs = torch.zeros(151_936)
    probs[[3, 255, 256, 70_000, 151_935]] = torch.tensor([0.1, 0.2, 0.3, 1e-9, 0.4])
    draws = draw_many(probs, 4_096)
    assert set(draws.tolist()) <= {3, 255, 256, 70_000, 151_935}
    counts = torch.bincount(draws, minlength=len(probs)).float() / len(draws)
    assert torch.allclose(counts[[3, 255, 256, 151_935]], probs[[3, 255, 256, 151_935]], atol=0.03)


# --------------------------------------------------------------------------- stop tokens
def test_stop_token_ids_are_the_union_of_tokenizer_and_generation_config():
    from types import SimpleNamespace

    tokenizer = SimpleNamespace(eos_token_id=2)
    assert stop_token_ids(tokenizer, SimpleNamespace(eos_token_id=[7, 2, 9])) == [2, 7, 9]
    assert stop_token_ids(tokenizer, SimpleNamespace(eos_token_id=5)) == [2, 5]
    assert stop_token_ids(tokenizer, None) == [2]
    with pytest.raises(ValueError, match="eos"):
        stop_token_ids(SimpleNamespace(eos_token_id=None), SimpleNamespace(eos_token_id=None))


def test_generation_stops_and_masks_on_the_generation_configs_end_of_turn_ids(tmp_path):
    from trainers.models.tiny_model import write_tiny_model

    end_of_turn = list(range(100, 164))  # a quarter of the byte vocabulary: most completions stop early
    model_dir = write_tiny_model(tmp_path / "model", extra_eos_ids=end_of_turn)
    policies = PolicySet(ModelSpec(model=str(model_dir), max_new_tokens=24), {"first": "shared"})
    assert policies.eos_ids == [policies.tokenizer.eos_token_id, *end_of_turn]
    torch.manual_seed(0)
    generations = generate(policies, "shared", [list(range(3, 20))], 8)
    stops = set(policies.eos_ids)
    ended = [g for g in generations if g.completion_ids[-1] in stops]
    assert len(ended) >= 6  # P(24 tokens without a stop) is about 0.75^24
    for g in generations:
        assert not stops & set(g.completion_ids[:-1])  # nothing after the end of the turn
        assert len(g.logprobs) == len(g.completion_ids)
        assert g.completion_ids[-1] in stops or len(g.completion_ids) == 24


# ------------------------------------------------------------------ master weights under bf16 compute
def one_step(model_dir, dtype: str, lora: bool) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], PolicySet]:
    """Weights before and after one AdamW step (lr 1e-6) of a policy-gradient loss."""
    config = TrainConfig.from_flat(model=str(model_dir), dtype=dtype, lora=lora, lr=1e-6, device="cpu",
                                   lora_r=4, lora_alpha=8)
    policies = PolicySet(config.model, config.policy_for_roles(["first"]))
    if lora:  # PEFT starts B at 0: give the adapters a non-trivial starting point, the same in both runs
        generator = torch.Generator().manual_seed(0)
        for p in policies.parameters("shared"):
            p.data = torch.randn(p.shape, generator=generator) * 0.02
    before = policies.snapshot("shared")
    prompts, completions = rows()
    advantages = torch.linspace(-1.0, 1.0, len(prompts))
    with policies.active("shared") as model:
        logp, mask = policies.token_logprobs(model, prompts, completions)
        (-(logp * mask).sum(dim=1) @ advantages).backward()
    policies.optimizers["shared"].step()
    return before, policies.snapshot("shared"), policies


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_bf16_compute_keeps_float32_master_weights_and_the_whole_update(tiny_model_dir, lora):
    before32, after32, _ = one_step(tiny_model_dir, "float32", lora)
    before16, after16, policies = one_step(tiny_model_dir, "bfloat16", lora)
    params = policies.parameters("shared")
    assert all(p.dtype == torch.float32 for p in params)
    state = policies.optimizers["shared"].state
    assert all(state[p]["exp_avg"].dtype == state[p]["exp_avg_sq"].dtype == torch.float32 for p in params)
    delta32 = torch.cat([(after32[k] - before32[k]).flatten() for k in before32])
    delta16 = torch.cat([(after16[k] - before16[k]).flatten() for k in before16])
    changed32, changed16 = (delta32 != 0).float().mean(), (delta16 != 0).float().mean()
    assert changed32 > 0.9 and changed16 >= 0.95 * changed32  # bf16 storage kept ~2 % of a 1e-6 step
    # Adam's first step is lr * sign(gradient): bf16 compute flips only tiny gradients' signs
    assert F.cosine_similarity(delta16, delta32, dim=0) > 0.9
    assert torch.allclose(delta16.abs().max(), torch.tensor(1e-6), rtol=0.01)


# ---------------------------------------------------------------------------- long prompts
def test_over_long_prompt_keeps_the_system_message_and_latest_turn_and_cuts_the_middle(tiny_model_dir):
    policies = PolicySet(ModelSpec(model=str(tiny_model_dir), max_prompt_tokens=300), {"first": "shared"})
    system = {"role": "system", "content": "You are the planner. Answer with one move: U, D, L or R."}
    short = [system, {"role": "user", "content": "Board: S..G\nYour move:"}]
    encoding = policies.encode_prompt(short)
    assert not encoding.truncated and encoding.text == policies.render(short)
    history = "".join(f"turn {t}: moved R, reward 0.1\n" for t in range(40))
    user = {"role": "user", "content": "Task: reach G.\n" + history + "Board now: S..G\nYour move:"}
    encoding = policies.encode_prompt([system, user])
    assert encoding.truncated and len(encoding.ids) <= 300
    assert encoding.text.startswith("<|system|>" + system["content"])  # the head stays
    assert encoding.text.endswith("Board now: S..G\nYour move:\n<|assistant|>")  # so does the end
    assert "Task: reach G." in encoding.text and TRUNCATION_MARKER in encoding.text
    assert "turn 0:" in encoding.text and "turn 39:" in encoding.text and "turn 20:" not in encoding.text
    assert policies.tokenizer.decode(encoding.ids) == encoding.text
    # multi-turn chats lose whole middle messages first, oldest first
    chat = [system, *({"role": r, "content": f"{r} message {i} " + "x" * 60} for i in range(6)
                      for r in ("user", "assistant")), {"role": "user", "content": "latest question"}]
    encoding = policies.encode_prompt(chat)
    assert encoding.truncated and len(encoding.ids) <= 300
    assert encoding.text.startswith("<|system|>") and encoding.text.endswith("latest question\n<|assistant|>")
    assert "message 5" in encoding.text and "message 0" not in encoding.text and TRUNCATION_MARKER not in encoding.text
    assert encoding.text.startswith("<|system|>" + system["content"] + "\n<|user|>")  # whole exchanges went
    # a system message alone over the budget: both ends of the tokens stay
    encoding = policies.encode_prompt([{"role": "system", "content": "s" * 1000}, {"role": "user", "content": "go"}])
    assert encoding.truncated and len(encoding.ids) == 300 and TRUNCATION_MARKER in encoding.text
    assert encoding.text.startswith("<|system|>") and encoding.text.endswith("go\n<|assistant|>")


# ------------------------------------------------------------------ chunked scoring, checkpointing
def score_with_probes(config: TrainConfig) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], list[int], tuple[int, int]]:
    """Log-probs and gradients of :func:`rows`, the row counts of every LM-head output, and how
    often the first decoder layer ran in the forward and again in the backward (recomputation)."""
    prompts, completions = rows()
    advantages = torch.linspace(-1.0, 1.0, len(prompts))
    torch.manual_seed(0)  # the same LoRA initialisation in every run
    policies = PolicySet(config.model, config.policy_for_roles(["first"]))
    head_rows: list[int] = []
    layer_calls: list[int] = []
    with policies.active("shared") as model:
        head = model.get_output_embeddings().register_forward_hook(
            lambda _m, _i, out: head_rows.append(out.shape[:-1].numel()))
        # (module hooks do not fire in a checkpoint's recomputation; a wrapped forward does)
        mlp = model.get_decoder().layers[0].mlp
        mlp_forward = mlp.forward
        mlp.forward = lambda *args, **kwargs: layer_calls.append(1) or mlp_forward(*args, **kwargs)
        logp, mask = policies.token_logprobs(model, prompts, completions)
        forward_calls = len(layer_calls)
        grads = torch.autograd.grad(((logp * mask).sum(dim=1) * advantages).sum(), policies.parameters("shared"))
        head.remove()
    return logp, grads, head_rows, (forward_calls, len(layer_calls) - forward_calls)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("checkpointing", [False, True], ids=["cached", "checkpointed"])
def test_chunked_scoring_equals_full_scoring_and_never_holds_all_logits(tiny_model_dir, lora, checkpointing):
    base = {"model": str(tiny_model_dir), "temperature": 0.7, "lora": lora}
    full, full_grads, _, full_calls = score_with_probes(TrainConfig.from_flat(**base, logprob_chunk_size=0))
    chunked, chunked_grads, head_rows, calls = score_with_probes(
        TrainConfig.from_flat(**base, logprob_chunk_size=3, gradient_checkpointing=checkpointing))
    assert torch.allclose(chunked, full, atol=1e-5)
    for a, b in zip(chunked_grads, full_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    assert max(head_rows) <= 3  # no [tokens, vocab] tensor beyond one chunk, forward or backward
    assert full_calls == (2, 0)  # (forwards, backward recomputations) of a layer: prompts, then completions
    assert calls == ((1, 1) if checkpointing else (2, 0))  # checkpointed: one uncached pass, replayed once


def test_trainer_marks_and_dumps_the_samples_whose_prompt_was_cut(tiny_model_dir, tmp_path):
    import json

    from trainers.algorithms.atgrpo.train import Trainer

    def run(max_prompt_tokens: int, run_dir) -> list[dict]:
        config = TrainConfig.from_flat(env="plan_path_v0", model=str(tiny_model_dir), run_dir=str(run_dir), steps=1,
                                       max_prompt_tokens=max_prompt_tokens, max_new_tokens=2, problems_per_step=1,
                                       n_samples=2, env_kwargs={"max_turns": 1},
                                       dump_samples=str(run_dir / "samples.jsonl"), eval_every=0,
                                       progress=False, tensorboard=False, checkpoint_every=0)
        Trainer(config).train()
        return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]

    cut = run(700, tmp_path / "cut")  # the byte-level prompt of plan_path is ~760 tokens, its system message ~530
    assert cut and all(s["prompt_truncated"] for s in cut)
    assert all(TRUNCATION_MARKER in s["prompt"] and s["prompt"].endswith("<|assistant|>") for s in cut)
    whole = run(4096, tmp_path / "whole")
    assert whole and not any(s["prompt_truncated"] for s in whole)
