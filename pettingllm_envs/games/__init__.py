"""Puzzle and game environments: sudoku (tool + planner) and two-player tic-tac-toe."""

from pettingllm_envs.games import sudoku as sudoku_v0
from pettingllm_envs.games import tictactoe as tictactoe_v0

__all__ = ["sudoku_v0", "tictactoe_v0"]
