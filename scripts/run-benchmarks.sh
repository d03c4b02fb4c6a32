#!/usr/bin/env bash
# Every committed benchmark figure from a fresh clone, then the results page rendered from them
# (docs/benchmarks.md). Each benchmark writes its file under benchmarks/results/; the run takes hours on 2 cores.
#
#   scripts/run-benchmarks.sh [--dry-run] [--no-install] [--with-learning]
#
#   --dry-run        print the commands instead of running them
#   --no-install     skip the pip install (the environment already has the project with the `all` extras)
#   --with-learning  also rerun the learning experiment (five conditions x three seeds: about a day on 2 cores)
#
# vllm_rollout needs vLLM, which pins torch and transformers, so it runs with .venv-vllm's interpreter
# (made as scripts/run-tests.sh makes it); without that environment it is skipped with the commands to make it.
set -euo pipefail
cd "$(dirname "$0")/.."

dry=0 install=1 learning=0
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry=1 ;;
        --no-install) install=0 ;;
        --with-learning) learning=1 ;;
        -h | --help) sed -n '2,12p' "$0" | cut -c3-; exit 0 ;;
        *) echo "unknown argument: $arg (see --help)" >&2; exit 2 ;;
    esac
done

run() {
    echo "+ $*"
    if [ "$dry" = 0 ]; then "$@"; fi
}

if [ "$install" = 1 ]; then
    run pip install "torch==2.13.0" -e ".[all]"
fi

run python -m benchmarks.perf_envs
run python -m benchmarks.textarena_bridge
run python -m benchmarks.reasoning_gym_bridge
run python -m benchmarks.sandbox_humaneval
run python benchmarks/trainer_step.py
run python benchmarks/multiturn_vs_trl.py
run python benchmarks/trainer_memory.py
run python -m benchmarks.scaling_curves
run python -m benchmarks.weight_sync
run python -m benchmarks.rollout_scaling
run python benchmarks/mgrpo_comparison.py
run python -m benchmarks.degenerate_groups
if [ -x .venv-vllm/bin/python ]; then
    # The engine on 2 cores with a small KV cache, as scripts/run-tests.sh runs vLLM's tests.
    run env VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-0-1}" \
        VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" .venv-vllm/bin/python -m benchmarks.vllm_rollout
else
    echo "skipped: python -m benchmarks.vllm_rollout needs .venv-vllm; make it with" >&2
    echo "  python -m venv --system-site-packages .venv-vllm" >&2
    echo "  PATH=\"\$PWD/.venv-vllm/bin:\$PATH\" TORCH_INDEX=\"\" scripts/install-vllm-cpu.sh" >&2
    echo "and run this script again (or .venv-vllm/bin/python -m benchmarks.vllm_rollout)." >&2
fi
if [ "$learning" = 1 ]; then
    run python -m benchmarks.learning
fi
run python -m benchmarks.results_page
