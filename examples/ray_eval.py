"""Play episodes and run sandbox batches on Ray actors, and check them against the local path.

    pip install -e '.[ray]'
    python examples/ray_eval.py                          # a local Ray on this machine
    python examples/ray_eval.py --address auto           # on a node of a running cluster
    python examples/ray_eval.py --policy openai:MODEL@http://HOST:8000/v1 --no-check

Each actor builds the policy from its spec itself, so with an ``openai:`` spec every actor
sends its requests to the (shared) server directly.
"""

from __future__ import annotations

import argparse
import time

from pettingllm_envs import make
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.evaluation.suite import build_policy
from pettingllm_envs.integrations.ray_backend import RayBackend
from pettingllm_envs.sandbox import execute_many


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", default=["plan_path_v0", "code_v0"])
    parser.add_argument("--policy", default="scripted", help="scripted | random | openai:<model>@<base_url>")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--address", default=None, help="Ray address: None (local), auto, ray://host:10001")
    parser.add_argument("--workers", type=int, default=None, help="actors (default: one per CPU)")
    parser.add_argument("--no-check", action="store_true", help="skip replaying the episodes locally")
    args = parser.parse_args()

    with RayBackend(args.workers, address=args.address) as backend:
        print(f"{len(backend.workers)} actors")
        for env_id in args.envs:
            start = time.perf_counter()
            episodes = backend.play_episodes(env_id, args.policy, range(args.episodes), split="test")
            seconds = time.perf_counter() - start
            success = sum(e.success for e in episodes) / len(episodes)
            line = f"{env_id}: {len(episodes)} episodes on Ray in {seconds:.2f}s, success {success:.2f}"
            if not args.no_check and args.policy == "scripted":
                start = time.perf_counter()
                policy, _usage = build_policy("scripted", env_id, "multi", 1024, 0)
                local = [play_episode(make(env_id, split="test"), policy, seed=s) for s in range(args.episodes)]
                same = all((r.actions, r.rewards, r.final_infos) == (lo.actions, lo.rewards, lo.final_infos)
                           for r, lo in zip(episodes, local, strict=True))
                line += f"; locally in {time.perf_counter() - start:.2f}s, identical: {same}"
            print(line)

        programs = [f"print(sum(range({n})))" for n in range(40)] + ["while True: pass"]
        start = time.perf_counter()
        remote = backend.execute_many(programs, timeout=1.0)
        seconds = time.perf_counter() - start
        local = execute_many(programs, timeout=1.0)
        same = [(r.passed, r.stdout) for r in remote] == [(r.passed, r.stdout) for r in local]
        print(f"sandbox: {len(programs)} programs on Ray in {seconds:.2f}s, "
              f"{sum(r.passed for r in remote)} passed, same verdicts as local: {same}")


if __name__ == "__main__":
    main()
