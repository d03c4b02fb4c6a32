"""Which TextArena 0.7.4 games ``textarena_v0`` plays, how it finds their moves, and why the rest are left out.

Every ``-v0`` game of TextArena's registry is in exactly one of :data:`GAMES` (two-player
games that reset and play offline), :data:`UNAVAILABLE` (with the measured reason) or
:data:`SINGLE_PLAYER`; ``tests/envs/bridges/test_textarena_games.py`` checks that the table is complete
and that each reason holds, without importing the modules that would download NLTK data.

A game's *move generator* lists candidate action strings for the player to move, read
from TextArena's game state (facts of its ``game_state`` layout); the env keeps the
candidates TextArena accepts on a copy of the game (so legality is always TextArena's own
judgement) and uses them for openings, ``infos[...]["game"]["legal_actions"]`` and the
scripted policy. Legality reads only the public state and the mover's own hand (a bid must
raise the last one, a card must be in the hand); which moves *win* is published only for
games marked ``perfect_information`` (see that field). Games without a generator still play
(any string is an action); they have no scripted play and need their own randomness to give
train and test different starts.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: ``(textarena env, player id) -> candidate actions`` (any strings; illegal ones are filtered out).
MoveGenerator = Callable[[Any, int], list[str]]


@dataclass(frozen=True)
class GameSpec:
    """How ``textarena_v0`` plays one TextArena game."""

    moves: MoveGenerator | None = None
    """Candidate actions for the player to move, or None (no scripted play for this game)."""
    opening_plies: tuple[int, ...] = ()
    """Numbers of random legal moves played before the episode starts, to choose from: the
    instance space of games whose start is always the same (needs ``moves``)."""
    random_during_play: bool = False
    """The game draws random numbers after its start (later deals, dice): the TextArena seed
    is then part of an instance's content, since two seeds with one start differ later."""
    perfect_information: bool = False
    """Both players see the whole game state and the game draws no random numbers after its start.
    Only then does trying a move on a copy of the game show nothing the player to move could not
    work out itself, so only then does the env publish ``winning_actions``: elsewhere a trial reads
    what the player cannot see (KuhnPoker's ``[call]`` wins exactly when the opponent's hidden card
    is lower; a simultaneous game's trial sees the opponent's choice; a dice game's, the next roll)."""
    shared: tuple[str, ...] = ()
    """Attributes of TextArena's game object that it only reads (data it loads once): deep copies
    share them instead of copying (read from the game's source)."""


def _state(game: Any) -> dict[str, Any]:
    return game.state.game_state


def _indices(count: int, template: str = "[{}]") -> MoveGenerator:
    return lambda game, pid: [template.format(i) for i in range(count)]


def _fixed(*actions: str) -> MoveGenerator:
    return lambda game, pid: list(actions)


def _connect_four(game: Any, pid: int) -> list[str]:
    return [f"[col {c}]" for c in range(game.num_cols)]


def _nim(game: Any, pid: int) -> list[str]:
    return [f"[{i} {q}]" for i, pile in enumerate(_state(game)["piles"]) for q in range(1, pile + 1)]


def _othello(game: Any, pid: int) -> list[str]:
    return [f"[{r}, {c}]" for r, c in _state(game).get("valid_moves") or []]


def _chopsticks(game: Any, pid: int) -> list[str]:
    attacks = [f"[attack {m} {o}]" for m in (0, 1) for o in (0, 1)]
    total = sum(_state(game)["hands"][pid])
    return attacks + [f"[split {left} {total - left}]" for left in range(total + 1)]


def _blotto(game: Any, pid: int) -> list[str]:
    names = [field["name"] for field in _state(game)["fields"]]
    units = game.num_total_units
    spread = [units // len(names) + (i < units % len(names)) for i in range(len(names))]
    allocations = [spread, *([units if i == j else 0 for i in range(len(names))] for j in range(len(names)))]
    return ["[" + " ".join(f"{n}{u}" for n, u in zip(names, alloc, strict=True)) + "]" for alloc in allocations]


def _liars_dice(game: Any, pid: int) -> list[str]:
    bid = _state(game).get("current_bid") or {"quantity": 0, "face_value": 6}
    quantity, face = bid["quantity"], bid["face_value"]
    raises = [(quantity, f) for f in range(face + 1, 7)] + [(quantity + 1, f) for f in range(1, 7)]
    return ["[Call]", *(f"[Bid: {q}, {f}]" for q, f in raises)]


def _ultimate_tictactoe(game: Any, pid: int) -> list[str]:
    forced = _state(game).get("next_micro_board")  # the mini-board the last move sends this player to, if any
    boards = [forced] if isinstance(forced, int) else range(9)
    return [f"[{macro} {micro}]" for macro in boards for micro in range(9)]


def _quantum_tictactoe(game: Any, pid: int) -> list[str]:
    return [f"[{a},{b}]" for a, b in itertools.combinations(range(9), 2)]


def _battleship(game: Any, pid: int) -> list[str]:
    return [f"[{chr(65 + r)}{c}]" for r in range(game.grid_size) for c in range(game.grid_size)]


def _simple_tak(game: Any, pid: int) -> list[str]:
    return [f"[{i}]" for i in range(game.board_size ** 2)]


def _breakthrough(game: Any, pid: int) -> list[str]:
    """Each own piece one row forward (White, player 0, up a row), straight or diagonally: ``[a2a3]``."""
    board, size = _state(game)["board"], game.board_size
    piece, step = ("W", 1) if pid == 0 else ("B", -1)
    files = "abcdefghijklmnopqrstuvwxyz"
    return [f"[{files[c]}{r + 1}{files[c + dc]}{r + step + 1}]"
            for r in range(size) for c in range(size) if board[r][c] == piece and 0 <= r + step < size
            for dc in (-1, 0, 1) if 0 <= c + dc < size]


_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1), (0, -1), (-1, 0), (-1, -1), (-1, 1))


def _lines_of_action(game: Any, pid: int) -> list[str]:
    """Each own piece moved along a line exactly as many squares as the line has pieces (the game's
    own count), e.g. ``[b1 b3]``; player 0 plays ``O``."""
    board, size = _state(game)["board"], game.BOARD_N
    side = "O" if pid == 0 else "X"
    moves = []
    for r in range(size):
        for c in range(size):
            if board[r][c] != side:
                continue
            for dr, dc in _DIRECTIONS:
                distance = game._count_pieces_on_line(r, c, dr, dc)
                tr, tc = r + dr * distance, c + dc * distance
                if 0 <= tr < size and 0 <= tc < size:
                    moves.append(f"[{game.rc_to_coord(r, c)} {game.rc_to_coord(tr, tc)}]")
    return moves


def _alquerque(game: Any, pid: int) -> list[str]:
    """Each own piece (player 0 plays ``R``) to an empty point one or two steps away in any of the
    eight directions (a step or a capturing jump; the game rejects lines its board lacks): ``[a1 a2]``."""
    board, size = _state(game)["board"], game.BOARD_N
    piece = "R" if pid == 0 else "B"

    def name(r: int, c: int) -> str:
        return f"{'abcde'[c]}{size - r}"

    return [f"[{name(r, c)} {name(r + dr * k, c + dc * k)}]"
            for r in range(size) for c in range(size) if board[r][c] == piece
            for dr, dc in _DIRECTIONS for k in (1, 2)
            if 0 <= r + dr * k < size and 0 <= c + dc * k < size and not board[r + dr * k][c + dc * k]]


_BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")


def _listed(game: Any, pid: int) -> list[str]:
    """The bracketed options the game lists in ``valid_moves`` (Santorini)."""
    return _BRACKETED.findall(str(_state(game).get("valid_moves") or ""))


#: The two-player ``-v0`` games that reset and step offline (measured with the network blocked) and whose
#: instances can be split (a random start, or random openings from a move generator).
GAMES: dict[str, GameSpec] = {
    "Alquerque-v0": GameSpec(_alquerque, perfect_information=True, opening_plies=(2, 4)),
    "Battleship-v0": GameSpec(_battleship),
    "Breakthrough-v0": GameSpec(_breakthrough, perfect_information=True, opening_plies=(2, 4)),
    "Briscola-v0": GameSpec(_indices(4, "[play {}]")),
    "Chopsticks-v0": GameSpec(_chopsticks, perfect_information=True, opening_plies=(2, 4)),
    "ColonelBlotto-v0": GameSpec(_blotto, opening_plies=(2, 4)),
    "ConnectFour-v0": GameSpec(_connect_four, perfect_information=True, opening_plies=(2, 4)),
    "GameOfPureStrategy-v0": GameSpec(_fixed(*(f"[{c}]" for c in ("A", "K", "Q", "J", *map(str, range(10, 1, -1)))))),
    "GermanWhist-v0": GameSpec(_indices(14, "[play {}]")),
    "Golf-v0": GameSpec(),
    "HighSociety-v0": GameSpec(_indices(12)),
    "IndianPoker-v0": GameSpec(_fixed("[check]", "[call]", "[bet 1]", "[raise 1]", "[fold]"), random_during_play=True),
    "IteratedMatchingPennies-v0": GameSpec(_fixed("[heads]", "[tails]"), opening_plies=(2, 4)),
    "IteratedPrisonersDilemma-v0": GameSpec(_fixed("[Cooperate]", "[Defect]"), opening_plies=(2, 4, 6)),
    "IteratedRockPaperScissors-v0": GameSpec(_fixed("[rock]", "[paper]", "[scissors]"), opening_plies=(2, 4)),
    "IteratedUltimatumGame-v0": GameSpec(_fixed("[Offer: 2]", "[Offer: 5]", "[Offer: 8]", "[Accept]", "[Reject]"),
                                         opening_plies=(2, 4)),
    "IteratedTwoThirdsAverage-v0": GameSpec(_fixed(*(f"[{g}]" for g in range(0, 101, 10))), opening_plies=(2, 4)),
    "KuhnPoker-v0": GameSpec(_fixed("[check]", "[bet]", "[call]", "[fold]"), random_during_play=True),
    "LiarsDice-v0": GameSpec(_liars_dice, random_during_play=True),
    "LinesOfAction-v0": GameSpec(_lines_of_action, perfect_information=True, opening_plies=(2, 4)),
    # MarketEntryGame and PublicGoodsGame loop forever in TextArena once both players are eliminated:
    # the env ends a free-for-all game at the first elimination (textarena_driver.settle_eliminations).
    "MarketEntryGame-v0": GameSpec(_fixed("{I will stay out.}", "{I will enter.}", "[E]", "[S]"),
                                   opening_plies=(2, 4, 6)),
    "MemoryGame-v0": GameSpec(),
    "Nim-v0": GameSpec(_nim, perfect_information=True, opening_plies=(1, 2, 3)),
    "Othello-v0": GameSpec(_othello, perfect_information=True, opening_plies=(2, 4)),
    "PigDice-v0": GameSpec(_fixed("[roll]", "[hold]"), opening_plies=(1, 2, 3), random_during_play=True),
    "Poker-v0": GameSpec(random_during_play=True),
    "PublicGoodsGame-v0": GameSpec(_fixed("{Let us all contribute.}", "[0]", "[10]", "[20]"), opening_plies=(2, 4, 6)),
    "QuantumTicTacToe-v0": GameSpec(_quantum_tictactoe, perfect_information=True, opening_plies=(2, 4)),
    "SantoriniBaseFixed-v0": GameSpec(_listed, perfect_information=True, opening_plies=(2, 4)),
    "SimpleBlindAuction-v0": GameSpec(),
    "SimpleNegotiation-v0": GameSpec(),
    "SimpleTak-v0": GameSpec(_simple_tak, perfect_information=True, opening_plies=(2, 4)),
    "Snake-v0": GameSpec(_fixed("[up]", "[down]", "[left]", "[right]"), random_during_play=True),
    "SpiteAndMalice-v0": GameSpec(),
    "Stratego-v0": GameSpec(),
    "Surround-v0": GameSpec(_fixed("[up]", "[down]", "[left]", "[right]")),
    "TicTacToe-v0": GameSpec(_indices(9), perfect_information=True, opening_plies=(2, 4)),
    "TruthAndDeception-v0": GameSpec(shared=("facts_data",)),  # 1.7 ms to copy; only random.choice reads it
    "TwoDollar-v0": GameSpec(),
    "UltimateTicTacToe-v0": GameSpec(_ultimate_tictactoe, perfect_information=True, opening_plies=(2, 4)),
    "WildTicTacToe-v0": GameSpec(_fixed(*(f"[{mark} {cell}]" for mark in "XO" for cell in range(9))),
                                 perfect_information=True, opening_plies=(2, 4)),
}

#: Reasons a game is left out, as measured on TextArena 0.7.4 under Python 3.11 with no network.
NEEDS_NLTK = "downloads the NLTK 'words' corpus when its module is imported (no network, and no download at run time)"
NEEDS_API_KEY = "its game master or jury is an LLM behind OpenRouter (needs OPENROUTER_API_KEY and the network)"
SYNTAX_ERROR = "its module does not import on Python 3.11 (an f-string that needs Python 3.12)"
MISSING_FILES = "data files it reads are missing from the 0.7.4 wheel"
NOT_TWO_PLAYERS = "needs more than two players"
FIXED_START = ("starts from the same position for every seed and has no move generator here (for random openings), "
               "so it has one instance, which train and test cannot split")
NO_RAW_VARIANT = "registered without a '-raw' variant (it needs the BabyAI package's own wrappers)"

UNAVAILABLE: dict[str, str] = {
    "Checkers-v0": SYNTAX_ERROR,
    "Chess-v0": SYNTAX_ERROR,
    "IteratedStagHunt-v0": SYNTAX_ERROR,
    "ReverseTicTacToe-v0": SYNTAX_ERROR,
    "UltimateTexasHoldem-v0": SYNTAX_ERROR,
    "Klondike-v0": SYNTAX_ERROR,
    "Debate-v0": NEEDS_API_KEY,
    "ScenarioPlanning-v0": NEEDS_API_KEY,
    "GuessWho-v0": NEEDS_API_KEY,
    "TwentyQuestions-v0": NEEDS_API_KEY,
    "DontSayIt-v0": NEEDS_NLTK,
    "LetterAuction-v0": NEEDS_NLTK,
    "SpellingBee-v0": NEEDS_NLTK,
    "WordChains-v0": NEEDS_NLTK,
    "Codenames-v0": NEEDS_NLTK,
    "Hangman-v0": NEEDS_NLTK,
    "WordLadder-v0": NEEDS_NLTK,
    "Wordle-v0": NEEDS_NLTK,
    "WordSearch-v0": NEEDS_NLTK,
    "UsedCarNegotiation-v0": MISSING_FILES,
    "ScorableGames-v0": MISSING_FILES,
    "Taboo-v0": NOT_TWO_PLAYERS,
    "ThreePlayerTicTacToe-v0": NOT_TWO_PLAYERS,
    "ThreePlayerGOPS-v0": NOT_TWO_PLAYERS,
    "ThreePlayerIPD-v0": NOT_TWO_PLAYERS,
    "CharacterConclave-v0": NOT_TWO_PLAYERS,
    "SettlersOfCatan-v0": NOT_TWO_PLAYERS,
    "SecretMafia-v0": NOT_TWO_PLAYERS,
    "BabyAiText-v0": NO_RAW_VARIANT,
    "Crusade-v0": FIXED_START,
    "NewRecruit-v0": FIXED_START,  # (and it prints to standard output on every proposal)
    "Tak-v0": FIXED_START,
}

#: One-player puzzles (not games between two players; reasoning-gym-style tasks are bridged elsewhere).
SINGLE_PLAYER: frozenset[str] = frozenset({
    "2048-v0", "Bandit-v0", "Blackjack-v0", "Countdown-v0", "Crosswords-v0", "Cryptarithm-v0", "FifteenPuzzle-v0",
    "FrozenLake-v0", "GuessTheNumber-v0", "LightsOut-v0", "LogicPuzzle-v0", "Mastermind-v0", "Minesweeper-v0",
    "PegJump-v0", "RushHour-v0", "Secretary-v0", "Set-v0", "Slitherlink-v0", "Sokoban-v0", "Sudoku-v0",
    "ThreeCardMonte-v0", "TowerOfHanoi-v0",
})


def game_id(name: str) -> str:
    """TextArena's id of ``name``: the docs write games without the version (``ConnectFour``),
    TextArena's registry with it (``ConnectFour-v0``); any other name is returned as given."""
    versioned = f"{name}-v0"
    return versioned if versioned in GAMES or versioned in UNAVAILABLE or versioned in SINGLE_PLAYER else name
