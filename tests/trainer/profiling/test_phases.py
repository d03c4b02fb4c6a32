"""The phase timer (trainers/profiling/phases.py): phases are exclusive, so an inner phase and the seconds
added inside a phase are taken from the outer one and a step's phases add up to at most its wall time;
a timer is current only for the block it is installed in."""

from __future__ import annotations

import time

from trainers.profiling.phases import NO_TIMER, PhaseTimer, add_seconds, current, installed, phase


def test_phases_are_exclusive_so_they_add_up_to_at_most_the_wall_time():
    timer = PhaseTimer()
    start = time.perf_counter()
    with installed(timer), phase("outer"):
        with phase("inner"):
            time.sleep(0.002)
        add_seconds("measured", 0.001)
        time.sleep(0.001)
    wall = time.perf_counter() - start
    assert set(timer.seconds) == {"outer", "inner", "measured"}
    assert timer.seconds["measured"] == 0.001 and timer.seconds["inner"] >= 0.002
    assert timer.seconds["outer"] >= 0 and sum(timer.seconds.values()) <= wall
    assert current() is NO_TIMER  # installed only for its block
