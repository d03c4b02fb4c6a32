"""The trainer's layers, as the folder names show them, each importing only from layers below it.

``trainers/`` reads from the bottom up:

=================  ======================================================================
``profiling``      the step profile's phase timer: exclusive wall-clock phases, counters
``maths``          advantages, the loss, importance weights, statistics, seeds: pure functions
``models``         load, LoRA, chat encoding, scoring, saving
``generation``     one protocol and its backends (in-process sampler, transformers, vLLM, an
                   OpenAI-compatible endpoint) and the server
``rollout``        episodes played through a generator, credit to samples
``league``         the opponents of a competitive env's learner: the pool, its sampling, ratings
``learning``       one policy-gradient update and its metrics
``harness``        run dir, atomic checkpoints and resume, config history, logs, progress
``algorithms``     AT-GRPO, the prompt-conditioned variants, self-consistency, M-GRPO
``distributed``    the same algorithms with their parts on Ray actors
``integrations``   other RL libraries driving our envs (TRL)
``cli``            the ``pettingllm`` subcommands
=================  ======================================================================

A module may import from its own layer and the layers below; an import upwards means a lower layer
cannot be used, read or tested without a higher one (a model loader that needs the AT-GRPO config,
say), which is what this test exists to stop. The graph is the one :mod:`tests.test_import_graph`
builds: every import at any depth, ``TYPE_CHECKING`` ones included.
"""

from __future__ import annotations

from repo_paths import REPO as ROOT
from test_import_graph import import_graph

LAYERS = ("profiling", "maths", "models", "generation", "rollout", "league", "learning", "harness", "algorithms",
          "distributed", "integrations", "cli")


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of a ``trainers`` module; the package ``trainers`` itself is below all."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    if parts[1] not in LAYERS:
        raise AssertionError(f"{module} is in no layer: trainers/ holds only the folders {', '.join(LAYERS)}")
    return LAYERS.index(parts[1])


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{importer} ({LAYERS[layer_of(importer)]}) -> {imported} ({LAYERS[layer_of(imported)]})"
                  for importer, targets in graph.items() if importer.startswith("trainers")
                  for imported in targets
                  if imported.startswith("trainers") and layer_of(imported) > layer_of(importer))


def test_every_trainer_module_is_in_a_layer():
    for module in import_graph(ROOT, ("trainers",)):
        layer_of(module)


def test_no_trainer_layer_imports_from_a_layer_above_it():
    found = upward_imports(import_graph(ROOT, ("trainers",)))
    assert not found, "imports upwards:\n" + "\n".join(found)


def test_the_trainers_import_no_command_line_of_the_env_package():
    """The trainers stand on the env package's public API; what both command lines need (one-line
    errors, options from dataclasses, checks, the plug-in ``Command``) is in
    ``pettingllm_envs.commandline``, below both (docs/design.md §7)."""
    graph = import_graph(ROOT, ("pettingllm_envs", "trainers"))
    found = sorted(f"{importer} -> {imported}" for importer, targets in graph.items()
                   if importer.startswith("trainers") for imported in targets
                   if imported == "pettingllm_envs.cli" or imported.startswith("pettingllm_envs.cli."))
    assert not found, "trainer modules importing the env command line:\n" + "\n".join(found)


def test_the_command_line_building_blocks_import_no_command_line():
    graph = import_graph(ROOT, ("pettingllm_envs", "trainers"))
    found = sorted(f"{importer} -> {imported}" for importer, targets in graph.items()
                   if importer.startswith("pettingllm_envs.commandline") for imported in targets
                   if imported.startswith(("pettingllm_envs.cli", "trainers")))
    assert not found, found


def test_the_check_sees_an_upward_import(tmp_path):
    (tmp_path / "trainers" / "models").mkdir(parents=True)
    (tmp_path / "trainers" / "algorithms").mkdir()
    for init in ("trainers", "trainers/models", "trainers/algorithms"):
        (tmp_path / init / "__init__.py").write_text("")
    (tmp_path / "trainers" / "algorithms" / "config.py").write_text("")
    (tmp_path / "trainers" / "models" / "loader.py").write_text("from trainers.algorithms.config import X\n")
    assert upward_imports(import_graph(tmp_path, ("trainers",))) == [
        "trainers.models.loader (models) -> trainers.algorithms.config (algorithms)"]
