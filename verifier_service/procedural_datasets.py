"""The datasets of the pinned reasoning-gym (`REASONING_GYM_VERSION`) that the `procedural` component scores: the
names its registry holds, but `composite`, whose entries name the dataset that made them (`metadata.source_dataset`:
send that). Kept here, a constant, so that validating a request never imports reasoning-gym (about 2 s and
matplotlib): only the worker processes that score do. tests/unit/test_procedural.py checks the list against the
installed library's registry, so a new pin that adds or drops a dataset fails there until this list follows it."""

from __future__ import annotations

import importlib.util
from functools import cache

REASONING_GYM_VERSION = "0.1.25"
DATASETS: frozenset[str] = frozenset(
    """
    ab acre advanced_geometry aiw arc_1d arc_agi base_conversion basic_arithmetic bf binary_alternation
    binary_matrix bitwise_arithmetic boxnet caesar_cipher calendar_arithmetic chain_sum circuit_logic codeio
    coin_flip color_cube_rotation complex_arithmetic count_bits count_primes countdown course_schedule
    cryptarithm decimal_arithmetic decimal_chain_sum dice emoji_mystery family_relationships figlet_font
    fraction_simplification futoshiki game_of_life game_of_life_halting gcd graph_color group_anagrams
    gsm_symbolic intermediate_integration isomorphic_strings jugs kakurasu knight_swap knights_knaves
    largest_island lcm leg_counting letter_counting letter_jumble list_functions mahjong_puzzle
    manipulate_matrix maze mini_sudoku modulo_grid n_queens needle_haystack number_filtering number_format
    number_sequence number_sorting palindrome_generation palindrome_partitioning path_star polynomial_equations
    polynomial_multiplication pool_matrix power_function prime_factorization products propositional_logic
    puzzle24 quantum_lock ransom_note rearc rectangle_count rotate_matrix rotten_oranges rubiks_cube rush_hour
    self_reference sentence_reordering shortest_path simple_equations simple_geometry simple_integration sokoban
    spell_backward spiral_matrix string_insertion string_manipulation string_splitting string_synthesis sudoku
    survo syllogism time_intervals tower_of_hanoi tsumego word_ladder word_sequence_reversal word_sorting
    zebra_puzzles
    """.split()  # noqa: SIM905 (a list literal: one name a line, 105 lines)
)


@cache
def installed() -> bool:
    """Whether reasoning-gym can be imported here (the `procedural` extra); found without importing it."""
    return importlib.util.find_spec("reasoning_gym") is not None
