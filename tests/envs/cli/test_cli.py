"""The ``pettingllm`` command line, run as a newcomer would: tables, play, one-line errors, help."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pettingllm_envs
from pettingllm_envs.cli import build_parser, main
from pettingllm_envs.cli.plugins import command_parser, discover
from pettingllm_envs.commandline.errors import DefaultsHelpFormatter, UsageError
from pettingllm_envs.extras import wheel_name
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.progress import PlainBar
from pettingllm_envs.terminal import read_move

#: A Sphinx double-backtick literal (a code fence ``` is three backticks, and allowed).
RST_LITERAL = re.compile(r"(?<!`)``(?!`)")


def run_cli(*args: str, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pettingllm_envs", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


def one_line_error(capsys, argv: list[str]) -> str:
    """Run ``pettingllm argv``; assert exit status 2 and exactly one line on stderr; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pettingllm: error: ") and "\n" not in err, err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------- tables
def test_list_shows_every_env_with_roles_and_capabilities(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: [cell.strip() for cell in line.split("  ") if cell.strip()]
            for line in out.splitlines()[2:-1]}
    assert rows["plan_path_v0"][1:3] == ["tool, planner", "demonstrations"]
    assert rows["tictactoe_v0"][2] == "-"  # an env that declares none
    assert rows["math_v0"][2] == "voting"
    assert out.splitlines()[-1].startswith("capabilities (declared by the env") and "voting: self-consistency" in out


def test_run_prints_a_summary_table_with_a_legend(capsys):
    assert main(["run", "plan_path_v0", "tictactoe_v0", "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert "plan_path_v0  1.00" in out and "tictactoe_v0  1.00" in out
    legend = out.strip().splitlines()[-1]
    assert "return per role" in legend and "tictactoe_v0" in legend and "X" in legend


def test_run_with_random_policy_fails_the_task(capsys):
    assert main(["run", "plan_path_v0", "--episodes", "3", "--policy", "random"]) == 0
    assert "plan_path_v0  0.00" in capsys.readouterr().out


def test_run_passes_env_kwargs(capsys):
    assert main(["run", "plan_path_v0", "--episodes", "2", "--env-kwargs", '{"max_turns": 1, "rows": 5}']) == 0
    assert "plan_path_v0" in capsys.readouterr().out


# ------------------------------------------------------------ one-line errors
def test_unknown_env_id_is_one_line_with_a_close_match(capsys):
    err = one_line_error(capsys, ["run", "plan_pth_v0"])
    assert "unknown env 'plan_pth_v0'" in err and "did you mean 'plan_path_v0'" in err


def test_unknown_env_kwargs_key_names_the_valid_fields(capsys):
    err = one_line_error(capsys, ["run", "plan_path_v0", "--env-kwargs", '{"max_turn": 2}'])
    assert "no config field 'max_turn'" in err and "did you mean 'max_turns'" in err and "obstacle_density" in err


def test_env_kwargs_of_the_wrong_type_or_range(capsys):
    err = one_line_error(capsys, ["run", "plan_path_v0", "--env-kwargs", '{"max_turns": "two"}'])
    assert "'max_turns' must be int" in err
    err = one_line_error(capsys, ["run", "plan_path_v0", "--env-kwargs", '{"max_turns": 0}'])
    assert "max_turns must be >= 1" in err


def test_a_dataset_path_that_does_not_exist(capsys, tmp_path):
    typo = json.dumps({"dataset": str(tmp_path / "gsm8k.jsnl")})
    err = one_line_error(capsys, ["run", "math_v0", "--env-kwargs", typo])
    assert "math_v0 config" in err and "gsm8k.jsnl" in err


def test_env_kwargs_that_are_not_a_mapping(capsys):
    err = one_line_error(capsys, ["play", "plan_path_v0", "--env-kwargs", "[1, 2]"])
    assert "--env-kwargs must be a mapping" in err


def test_zero_episodes_is_refused_not_divided_by(capsys):
    assert "--episodes must be >= 1, got 0" in one_line_error(capsys, ["run", "plan_path_v0", "--episodes", "0"])


def test_an_unknown_choice_lists_the_allowed_values(capsys):
    err = one_line_error(capsys, ["run", "--policy", "gpt4"])
    assert "invalid choice 'gpt4'" in err and "scripted, random" in err
    err = one_line_error(capsys, ["bench", "--policy", "gpt4", "--out", "unused"])
    assert "unknown --policy 'gpt4'" in err and "openai:<model>@<base_url>" in err
    assert not Path("unused").exists()


def test_an_unknown_command_or_option_gets_a_close_match(capsys):
    assert "did you mean 'train'" in one_line_error(capsys, ["trian"])
    assert "did you mean '--episodes'" in one_line_error(capsys, ["run", "--episodez", "3"])


def test_play_rejects_an_unknown_role(capsys):
    err = one_line_error(capsys, ["play", "tictactoe_v0", "--role", "player_y"])
    assert "no role 'player_y'" in err and "did you mean 'player_x'" in err


def test_plot_of_a_missing_run_dir(capsys, tmp_path):
    assert "does not exist" in one_line_error(capsys, ["plot", str(tmp_path / "nowhere")])
    assert "has no metrics.jsonl" in one_line_error(capsys, ["plot", str(tmp_path)])


def test_debug_shows_the_traceback_instead():
    with pytest.raises(UsageError, match="unknown env"):
        main(["run", "nope_v0", "--debug"])


def test_a_bench_mode_that_the_policy_does_not_have(capsys, tmp_path):
    err = one_line_error(capsys, ["bench", "plan_path_v0", "--mode", "single", "--out", str(tmp_path / "b")])
    assert "only defined for model policies" in err
    assert not (tmp_path / "b").exists()


# ------------------------------------------------------------------- help
def _all_parsers() -> dict[str, argparse.ArgumentParser]:
    top = build_parser()
    parsers = {"pettingllm": top}
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    plugins = {p.name for p in discover()}
    for name, parser in sub.choices.items():
        parsers[name] = command_parser(name) if name in plugins else parser
    return parsers


def test_every_option_of_every_command_has_help_and_its_default_and_no_rst():
    pytest.importorskip("torch")
    parsers = _all_parsers()
    assert {"list", "run", "play", "bench", "tiny-model", "train", "train-variants", "train-mgrpo",
            "self-consistency", "plot"} <= set(parsers)
    for name, parser in parsers.items():
        text = parser.format_help()
        assert not RST_LITERAL.search(text) and not re.search(r":[a-z]+:`", text), name
        formatter = DefaultsHelpFormatter(parser.prog)
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            assert action.help, (name, action.dest)
            if action.option_strings:
                assert "default:" in formatter._get_help_string(action).lower(), (name, action.option_strings)
    assert parsers["train-variants"].prog == "pettingllm train-variants"
    assert "prompt variants" in parsers["train-variants"].description
    assert "M-GRPO" in parsers["train-mgrpo"].description


@pytest.mark.slow
def test_train_variants_help_is_its_own():
    proc = run_cli("train-variants", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: pettingllm train-variants") and "prompt variants" in proc.stdout
    assert not RST_LITERAL.search(proc.stdout)


# ------------------------------------------------------------------- play
def test_play_defaults_to_the_planner_and_takes_one_line_moves():
    proc = run_cli("play", "plan_path_v0", stdin="MOVES: D D D\n" * 4)
    assert proc.returncode == 0, proc.stderr
    assert "You play planner" in proc.stdout and "--- tool (scripted) ---" in proc.stdout
    assert "[planner] your move:" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith(("episode over: solved", "turn limit reached"))


def test_play_reads_a_code_block_until_its_fence():
    program = "```python\nprint('MOVES: D')\nprint('done')\n```\n"
    proc = run_cli("play", "plan_path_v0", "--role", "tool", stdin=program)
    assert proc.returncode == 0, proc.stderr
    tool_step = proc.stdout.split("--- tool: reward")[1].splitlines()[0]
    assert "invalid" not in tool_step  # the whole block reached the env as one action


def test_read_move_takes_one_line_or_a_fenced_block():
    out = io.StringIO()
    assert read_move(io.StringIO("MOVE: 5\nMOVE: 6\n"), out) == "MOVE: 5"
    block = "```python\nprint(1)\n```\nnext\n"
    assert read_move(io.StringIO(block), out) == "```python\nprint(1)\n```"
    assert read_move(io.StringIO("```python\nprint(1)\n.\nnext\n"), out) == "```python\nprint(1)\n```"
    assert read_move(io.StringIO("```python\nprint(1)\n"), out) == "```python\nprint(1)\n```"
    assert "closed for you" in out.getvalue()
    assert read_move(io.StringIO(""), out) is None


def _oracle_game(seed: int) -> list[str]:
    """X's moves when both sides play the oracle from problem ``seed`` of the test split."""
    env = pettingllm_envs.make("tictactoe_v0", split="test")
    env.reset(seed=seed)
    oracle, moves = scripted_policy("tictactoe_v0"), []
    for agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        action = None if terminated or truncated else oracle(observation, agent, info)
        if action is not None and agent == "player_x":
            moves.append(action.splitlines()[-1])
        env.step(action)
    return moves


def test_tictactoe_outcomes_are_worded_per_game_and_the_final_board_is_shown():
    as_x = run_cli("play", "tictactoe_v0", "--role", "player_x", stdin="\n".join(_oracle_game(0)) + "\n")
    assert as_x.returncode == 0, as_x.stderr
    assert as_x.stdout.strip().endswith("episode over: you won (you played player_x)")
    # As O against the perfect X the game is lost, and can end before O moves: the board is still shown.
    as_o = run_cli("play", "tictactoe_v0", "--role", "player_o", stdin="MOVE: 1\nMOVE: 2\nMOVE: 3\nMOVE: 4\n")
    assert as_o.returncode == 0, as_o.stderr
    tail = as_o.stdout.strip().splitlines()
    assert tail[-1] == "episode over: you lost (you played player_o)"
    assert "winner X" in tail[-2] and "a   b   c" in "\n".join(tail[-8:])
    assert "not solved" not in as_o.stdout


def test_play_stops_at_end_of_input():
    proc = run_cli("play", "tictactoe_v0")
    assert proc.returncode == 0 and "input ended before the episode did" in proc.stdout


def test_ctrl_c_in_play_is_one_line():
    # a shell starting pytest in the background leaves SIGINT ignored, and children inherit that:
    # restore the default so the signal is the Ctrl-C of a terminal
    proc = subprocess.Popen([sys.executable, "-m", "pettingllm_envs", "play", "plan_path_v0"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    while True:  # wait until it reads the person's move
        line = proc.stdout.readline()
        assert line, "play exited before asking for a move"
        if "your move" in line:
            break
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip() == "pettingllm: interrupted"


# ----------------------------------------------------------- trainer commands
def smoke_args(model: Path, run: Path, *extra: str) -> list[str]:
    return ["train", "--env", "plan_path_v0", "--model", str(model), "--steps", "1", "--run-dir", str(run),
            "--max-new-tokens", "4", "--n-samples", "2", "--problems-per-step", "1", "--env-kwargs",
            '{"max_turns": 1}', "--eval-every", "0", "--progress", "false", "--tensorboard", "false", *extra]


def test_train_errors_are_one_line(capsys, tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    err = one_line_error(capsys, smoke_args(tiny_model_dir, run, "--env", "plan_pth_v0"))
    assert "did you mean 'plan_path_v0'" in err
    err = one_line_error(capsys, smoke_args(tiny_model_dir, run, "--env-kwargs", "{bogus: 1}"))
    assert "no config field 'bogus'" in err and "max_turns" in err
    assert "steps" in one_line_error(capsys, smoke_args(tiny_model_dir, run, "--steps", "-1"))
    assert "did you mean '--steps'" in one_line_error(capsys, smoke_args(tiny_model_dir, run, "--stepz", "1"))
    err = one_line_error(capsys, smoke_args(tiny_model_dir, run, "--model", str(tmp_path / "no_such_model")))
    assert "the folder does not exist" in err and "Repo id" not in err
    config = tmp_path / "run.yaml"
    config.write_text("stepz: 3\n")
    assert "did you mean 'steps'" in one_line_error(capsys, smoke_args(tiny_model_dir, run, "--config", str(config)))
    err = one_line_error(capsys, smoke_args(tiny_model_dir, run, "--config", str(tmp_path / "missing.yaml")))
    assert "no such file" in err
    assert not run.exists()  # no failed start left an empty run dir behind


@pytest.mark.slow
def test_a_second_train_into_the_same_run_dir_is_refused_unless_resume_or_overwrite(capsys, tiny_model_dir,
                                                                                    tmp_path):
    run = tmp_path / "run"
    samples = run / "samples.jsonl"
    assert main(smoke_args(tiny_model_dir, run, "--dump-samples", str(samples))) == 0
    err = capsys.readouterr().err
    assert "groups degenerate: no gradient this step" in err  # the random tiny model learns nothing here
    assert "Loading weights" not in err and "Writing model shards" not in err and "FutureWarning" not in err
    first_metrics, first_samples = (run / "metrics.jsonl").read_text(), samples.read_text()

    err = one_line_error(capsys, smoke_args(tiny_model_dir, run, "--dump-samples", str(samples)))
    assert "already holds a run" in err and "--resume" in err and "--overwrite" in err
    assert (run / "metrics.jsonl").read_text() == first_metrics and samples.read_text() == first_samples

    assert main(smoke_args(tiny_model_dir, run, "--steps", "2", "--resume", "--dump-samples", str(samples))) == 0
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]

    (run / "stale.txt").write_text("from the first run")
    assert main(smoke_args(tiny_model_dir, run, "--overwrite", "--dump-samples", str(samples))) == 0
    assert not (run / "stale.txt").exists()
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]
    assert {json.loads(line)["step"] for line in samples.read_text().splitlines()} == {1}
    assert (run / "checkpoints" / "latest").read_text() == "step_000001"


def test_train_mgrpo_and_self_consistency_are_commands(capsys, tiny_model_dir, tmp_path):
    err = one_line_error(capsys, ["train-mgrpo", "--model", str(tmp_path / "missing")])
    assert "the folder does not exist" in err
    err = one_line_error(capsys, ["train-mgrpo", "--model", str(tiny_model_dir), "--role", "main"])
    assert "--run-id" in err
    assert "did you mean 'mgrpo'" in one_line_error(capsys, ["train-mgrpo", "--mode", "mgrp"])
    earlier = tmp_path / "mgrpo"
    earlier.mkdir()
    (earlier / "metrics.jsonl").write_text('{"step": 1}\n')
    err = one_line_error(capsys, ["train-mgrpo", "--model", str(tiny_model_dir), "--run-dir", str(earlier)])
    assert "already holds a run" in err and "--overwrite" in err
    assert (earlier / "metrics.jsonl").read_text() == '{"step": 1}\n'
    err = one_line_error(capsys, ["self-consistency", "--model", str(tiny_model_dir), "--g", "0"])
    assert "--g must be >= 1" in err
    out = tmp_path / "sc.json"
    assert main(["self-consistency", "--model", str(tiny_model_dir), "--g", "2", "--problems", "1",
                 "--max-new-tokens", "2", "--variants", "[]", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["g"] == 2 and summary["problems"] == 1
    assert json.loads(out.read_text())["records"][0]["problem"] == 0


@pytest.mark.slow
def test_tiny_model_loads_with_from_pretrained_and_prints_no_library_bars(tmp_path):
    transformers = pytest.importorskip("transformers")
    proc = run_cli("tiny-model", str(tmp_path / "tiny"))
    assert proc.returncode == 0, proc.stderr
    assert "Writing model shards" not in proc.stderr and "Warning" not in proc.stderr
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "tiny")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "tiny")
    text = "MOVES: U R\n```python\nprint('é')\n```"
    ids = tokenizer(text).input_ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt.endswith("<|assistant|>")
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size == len(tokenizer)


@pytest.mark.slow
def test_the_module_entry_point_runs_the_trainer_commands():
    """``python -m pettingllm_envs`` is ``pettingllm``, plug-in commands and their one-line errors included."""
    proc = subprocess.run([sys.executable, "-m", "pettingllm_envs", "train-mgrpo", "--mode", "nope"],
                          capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0
    assert "config field 'mode': got 'nope'" in proc.stderr and "mgrpo, frozen_sub, single" in proc.stderr



def test_plots_have_integer_steps_distinct_curves_and_legends_off_the_curves():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from trainers.harness.plot import draw_metrics

    rows = [{"step": s, "reward/mean": 0.1 * s, "reward/agent/tool": 0.1 * s, "reward/agent/planner": 0.1 * s,
             "clip_frac": 0.0, "kl": 0.0} for s in (1, 2, 3)]
    fig = draw_metrics(rows, "run")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        if not ax.lines:
            continue
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
        styles = [(line.get_marker(), line.get_linestyle()) for line in ax.lines]
        assert len(set(styles)) == len(styles)  # equal curves (tool == planner == mean) stay distinguishable
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.y1 <= ax.get_window_extent(renderer).y0  # under the panel, over no curve


def test_the_held_out_success_is_drawn_with_its_interval_as_a_band():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib.collections import PolyCollection

    from trainers.harness.plot import draw_metrics

    rows = [{"step": s, "tree/success_rate": 0.5, "eval/success_rate": 0.2, "eval/success_ci_low": 0.1,
             "eval/success_ci_high": 0.35} for s in (2, 4, 6)]
    ax = next(a for a in draw_metrics(rows, "run").axes if a.get_title() == "success rate")
    assert sorted(line.get_label() for line in ax.lines) == ["eval/success_rate", "tree/success_rate"]
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    ys = band.get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(0.1) and max(ys) == pytest.approx(0.35)


def test_the_plain_progress_bar_without_tqdm_writes_one_line_to_a_log():
    stream = io.StringIO()  # not a terminal: no carriage returns, one line at the end
    with PlainBar(4, "bench", "episodes", stream) as bar:
        for _ in range(4):
            bar.update(1)
        bar.write("a note")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "a note" and lines[1].startswith("bench: [" + "#" * PlainBar.width + "] 4/4 episodes")
    assert len(lines) == 2 and "\r" not in stream.getvalue()


def test_importing_the_package_leaves_library_logging_alone():
    code = ("import os, pettingllm_envs.cli; "
            "assert 'HF_HUB_DISABLE_PROGRESS_BARS' not in os.environ and 'TRANSFORMERS_VERBOSITY' not in os.environ")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_make_with_an_unknown_config_field_names_the_valid_ones():
    with pytest.raises(TypeError, match=r"PlanPathConfig has no field\(s\) \['bogus'\]; fields: .*max_turns"):
        pettingllm_envs.make("plan_path_v0", bogus=1)


def test_a_trainer_command_without_the_train_extra_says_which_extra(tmp_path):
    code = ("import sys; sys.modules['torch'] = None  # as if torch were not installed\n"
            "from pettingllm_envs.cli import main\n"
            f"sys.exit(main(['tiny-model', {str(tmp_path / 'tiny')!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("pettingllm: error: this command needs torch, which comes with the train extra: "
                                   "pip install -e '.[train]' in a checkout, or pip install "
                                   f"'{wheel_name()}[train]' next to the wheel")


def test_the_env_only_install_runs_without_tqdm_and_pyyaml():
    prelude = "import sys; sys.modules['tqdm'] = sys.modules['yaml'] = None\nfrom pettingllm_envs.cli import main\n"
    ok = subprocess.run([sys.executable, "-c", prelude + "sys.exit(main(sys.argv[1:]))", "run", "plan_path_v0",
                         "--episodes", "2", "--env-kwargs", '{"max_turns": 2}'], capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr.startswith("run: [" + "#" * PlainBar.width + "] 2/2 episodes")
    assert "plan_path_v0  1.00" in ok.stdout
    yaml_style = subprocess.run([sys.executable, "-c", prelude + "sys.exit(main(sys.argv[1:]))", "run",
                                 "--env-kwargs", "{max_turns: 2}"], capture_output=True, text=True, timeout=120)
    assert yaml_style.returncode == 2 and "is not a JSON object" in yaml_style.stderr
    assert yaml_style.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_start_that_fails_while_loading_the_model_leaves_no_run_dir(tmp_path):
    pytest.importorskip("transformers")
    broken = tmp_path / "broken_model"
    broken.mkdir()
    (broken / "config.json").write_text("{}")  # passes the folder check, fails in from_pretrained
    run = tmp_path / "runs" / "first"
    with pytest.raises(Exception):  # noqa: B017 - whatever transformers raises; the point is what is left behind
        main(smoke_args(broken, run, "--debug"))
    assert not run.exists() and not run.parent.exists()
