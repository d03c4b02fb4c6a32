"""GRPO through TRL's environment_factory on a pettingllm env served by OpenEnv.

    pip install -e '.[openenv-trl]'        # its own environment: openenv cannot share one with verifiers
    python examples/openenv/trl_grpo_openenv.py                         # tiny offline model, math_v0 reasoner
    python examples/openenv/trl_grpo_openenv.py --model Qwen/Qwen3-0.6B --steps 200 --gpu

The env runs in an OpenEnv server (``openenv_app``, uvicorn on 127.0.0.1, stopped at the end);
every rollout opens its own WebSocket session through OpenEnv's client, plays the role
``--role`` by calling the tool ``act(action)`` while the server's seats play the other roles,
and is paid the role's episode return. Before paying, an episode the model left early is played
out with empty actions (each costs the env's format penalty), so that not acting never earns
more than acting. Without ``--model`` a tiny random model is written whose replies are tool calls
with one of a few fixed answers. Prints, per step, TRL's logged reward next to the mean of the
returns the server paid for that step's rollouts: they are equal.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import uvicorn
from trl import GRPOConfig, GRPOTrainer

from pettingllm_envs.commandline.commands import quiet_model_libraries
from pettingllm_envs.integrations.openenv_env import PettingLLMAction, PettingLLMClient, openenv_app
from trainers.integrations.tiny_tool_model import write_tiny_tool_model
from trainers.integrations.trl_env import episode_dataset

#: The tiny model's candidate answers: right for train problems 0 and 1 of math_v0, and a wrong one.
TINY_ANSWERS = ["\\boxed{1200}", "\\boxed{4}", "\\boxed{7}"]
#: Bound on the actions one episode can take (the env's max_turns is far below it).
MAX_ACTIONS = 64


def openenv_role(base_url: str, role: str, returns: list[float]) -> type:
    """An environment_factory class: one OpenEnv session per rollout, ``role`` acting through ``act``."""

    class OpenEnvRole:
        def __init__(self) -> None:
            self.client = PettingLLMClient(base_url=base_url).sync()
            self.client.connect()
            self.total, self.done = 0.0, True

        def reset(self, **row: Any) -> str:
            result = self.client.reset(seed=int(row["index"]), learners=[role])
            self.total, self.done = float(result.reward or 0.0), result.done
            return result.observation.prompt

        def act(self, action: str) -> str:
            """Take your turn in the episode.

            Args:
                action: Your move, written as the task asks.

            Returns:
                What you see next, or a notice that the episode is over.
            """
            if self.done:
                return "The episode is over."
            result = self.client.step(PettingLLMAction(text=action))
            self.total += float(result.reward or 0.0)
            self.done = result.done
            return "The episode is over." if result.done else result.observation.prompt

        def get_reward(self) -> float:
            for _ in range(MAX_ACTIONS):
                if self.done:
                    break
                self.act("")
            returns.append(self.total)
            return self.total

    return OpenEnvRole


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model id or path whose chat template TRL knows (default: a tiny model)")
    parser.add_argument("--env", default="math_v0")
    parser.add_argument("--role", default="reasoner")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--gpu", action="store_true")
    args = parser.parse_args()
    quiet_model_libraries()

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(openenv_app(args.env, max_concurrent_envs=256, max_turns=args.max_turns),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise SystemExit("the OpenEnv server did not start")
        time.sleep(0.05)
    returns: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            generation: dict[str, Any] | None = None
            model = args.model
            if model is None:
                model = str(Path(scratch) / "tiny")
                generation = write_tiny_tool_model(model, "act", "action", TINY_ANSWERS)
            batch = args.generations * max(1, args.problems // args.steps)
            trainer = GRPOTrainer(
                model=model,
                environment_factory=openenv_role(f"http://127.0.0.1:{port}", args.role, returns),
                train_dataset=episode_dataset(range(args.problems)),
                args=GRPOConfig(
                    output_dir=str(Path(scratch) / "run"), max_steps=args.steps, per_device_train_batch_size=batch,
                    num_generations=args.generations, max_completion_length=2000, max_tool_calling_iterations=4,
                    generation_kwargs=generation, learning_rate=1e-2 if args.model is None else 1e-6,
                    logging_steps=1, save_strategy="no", report_to="none", use_cpu=not args.gpu, bf16=False, seed=0,
                    disable_tqdm=True,
                ),
            )
            trainer.train()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    for step, entry in enumerate(logs):
        paid = returns[step * batch:(step + 1) * batch]
        print(f"step {step + 1}: reward {entry['reward']:.3f} (env returns {sum(paid) / len(paid):.3f}), "
              f"tool calls per rollout {entry['tools/call_frequency']:.2f}")


if __name__ == "__main__":
    main()
