"""The interleaved runner with a simulated clock: deterministic, no real timing."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from dbench.bench.core import runner
from dbench.bench.core.runner import Case, RunConfig


class FakeClock:
    """perf_counter_ns that advances only when a simulated call runs."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    c = FakeClock()
    monkeypatch.setattr(runner.time, "perf_counter_ns", c)
    monkeypatch.setattr(runner, "timer_overhead_ns", lambda trials=0: 50.0)
    return c


def make_cases(clock: FakeClock, costs_ns: dict[str, int], log: list[str]) -> list[Case]:
    cases = []
    for name, cost in costs_ns.items():
        def call(name: str = name, cost: int = cost) -> None:
            clock.now += cost
            log.append(name)

        cases.append(Case(key={"op": "op", "variant": name, "mode": "inference"}, call=call))
    return cases


CONFIG = RunConfig(rounds=6, block_seconds=1e-4, warmup_seconds=0.0, seed=7)


def rounds_of(log: list[str], cases: list[Case]) -> list[list[str]]:
    """The order cases were visited in each round (first call of each block)."""
    timed = log[-sum(c.block for c in cases) * CONFIG.rounds:]
    blocks = []
    i = 0
    while i < len(timed):
        name = timed[i]
        block = next(c.block for c in cases if c.key["variant"] == name)
        blocks.append(name)
        i += block
    return [blocks[r * len(cases):(r + 1) * len(cases)] for r in range(CONFIG.rounds)]


def test_every_round_visits_every_case_once_in_a_fresh_order(clock: FakeClock) -> None:
    log: list[str] = []
    cases = make_cases(clock, {"a": 1000, "b": 2000, "c": 3000, "d": 500}, log)
    outcome = runner.run(cases, CONFIG)
    assert outcome.rounds_done == 6 and outcome.stop_reason == "rounds"
    orders = rounds_of(log, cases)
    assert all(sorted(o) == ["a", "b", "c", "d"] for o in orders)
    assert len({tuple(o) for o in orders}) > 1, "rounds should be shuffled"


def test_same_seed_same_order(clock: FakeClock) -> None:
    orders = []
    for _ in range(2):
        log: list[str] = []
        cases = make_cases(clock, {"a": 1000, "b": 2000, "c": 3000}, log)
        runner.run(cases, CONFIG)
        orders.append(rounds_of(log, cases))
    assert orders[0] == orders[1]


def _grouped_cases(clock: FakeClock, log: list[str]) -> list[Case]:
    """Two floors (f1, f2) with the cases paired with them, one case paired through another
    (a2 -> a1 -> f1), a case whose floor is not timed (o -> gone), and a case with no floor (p)."""
    cases = make_cases(clock, {n: 1000 for n in ("f1", "a1", "a2", "f2", "b1", "b2", "b3", "o", "p")}, log)
    labels = {c.key["variant"]: c.label for c in cases}
    for name, floor in (("a1", "f1"), ("a2", "a1"), ("b1", "f2"), ("b2", "f2"), ("b3", "f2"), ("o", "gone")):
        next(c for c in cases if c.key["variant"] == name).baseline = labels.get(floor, floor)
    return cases


def test_grouped_rounds_keep_each_case_next_to_its_floors_group(clock: FakeClock) -> None:
    log: list[str] = []
    cases = _grouped_cases(clock, log)
    runner.run(cases, CONFIG)
    groups = [{"f1", "a1", "a2"}, {"f2", "b1", "b2", "b3"}, {"o"}, {"p"}]
    orders = rounds_of(log, cases)
    for order in orders:
        assert sorted(order) == sorted(set().union(*groups))
        for group in groups:  # contiguous: its blocks fill one span of the round
            at = [i for i, name in enumerate(order) if name in group]
            assert at == list(range(at[0], at[0] + len(group))), (order, group)
    assert len({tuple(o) for o in orders}) > 1, "groups and their cases are still drawn at random"
    firsts = {o[0] for o in orders} | {o[-1] for o in orders}
    assert len(firsts) > 2, "the groups' order changes between rounds"


def test_shuffled_rounds_are_the_calibrated_design(clock: FakeClock) -> None:
    """--order shuffled draws the rounds exactly as the gate's calibration runs did: one shuffle of
    every case per round from random.Random(seed)."""
    import dataclasses
    import random

    log: list[str] = []
    cases = _grouped_cases(clock, log)
    runner.run(cases, dataclasses.replace(CONFIG, order="shuffled"))
    rng, expected = random.Random(CONFIG.seed), []
    for _ in range(CONFIG.rounds):
        order = [c.key["variant"] for c in cases]
        rng.shuffle(order)
        expected.append(order)
    assert rounds_of(log, cases) == expected


def test_pairing_groups_survive_a_cycle_of_baselines() -> None:
    a = Case(key={"op": "op", "variant": "a", "mode": "m"}, call=lambda: None)
    b = Case(key={"op": "op", "variant": "b", "mode": "m"}, call=lambda: None, baseline=a.label)
    a.baseline = b.label  # a broken declaration: the grouping still ends, with both in one group
    assert [sorted(c.key["variant"] for c in g) for g in runner.pairing_groups([a, b])] == [["a", "b"]]


def test_samples_are_per_call_microseconds(clock: FakeClock) -> None:
    cases = make_cases(clock, {"a": 1000, "b": 2500}, [])
    runner.run(cases, CONFIG)
    assert cases[0].samples == [1.0] * 6
    assert cases[1].samples == [2.5] * 6


def test_block_dwarfs_timer_overhead(clock: FakeClock) -> None:
    cases = make_cases(clock, {"fast": 10}, [])
    runner.run(cases, CONFIG)
    # Overhead 50 ns -> block >= 50 / 1e-4 ns = 0.5 ms of 10 ns calls.
    assert cases[0].block * 10 >= 50 / runner.TIMER_OVERHEAD_FRACTION
    assert cases[0].block * 10 <= 11 * 50 / runner.TIMER_OVERHEAD_FRACTION


def test_unrunnable_cases_are_never_called(clock: FakeClock) -> None:
    log: list[str] = []
    cases = make_cases(clock, {"a": 1000, "na": 1000, "bad": 1000}, log)
    cases[1].na_reason = "no autograd"
    cases[2].error = "pre-flight check failed"
    runner.run(cases, CONFIG)
    assert set(log) == {"a"}
    assert cases[1].samples == [] and cases[2].samples == []


def test_interrupt_keeps_only_complete_rounds(clock: FakeClock) -> None:
    log: list[str] = []
    cases = make_cases(clock, {"a": 1000, "b": 1000, "c": 1000}, log)
    original = cases[1].call
    checkpoints: list[int] = []

    def interrupting() -> None:
        if len(checkpoints) == 2:  # Ctrl-C arrives during the third round
            raise KeyboardInterrupt
        original()  # type: ignore[misc]

    cases[1].call = interrupting
    outcome = runner.run(cases, CONFIG, on_round=checkpoints.append)
    assert outcome.stop_reason == "interrupted"
    assert outcome.rounds_done == 2 and checkpoints == [1, 2]
    assert all(len(c.samples) == 2 for c in cases), "the unfinished round is dropped from every case"


def test_adaptive_stops_at_min_rounds_when_noise_free(clock: FakeClock) -> None:
    cases = make_cases(clock, {"a": 1000, "b": 2000}, [])
    config = RunConfig(rounds=50, block_seconds=1e-4, warmup_seconds=0.0, adaptive=True, min_rounds=8)
    outcome = runner.run(cases, config)
    assert outcome.rounds_done == 8 and outcome.stop_reason.startswith("converged")


def test_adaptive_keeps_going_while_noisy(clock: FakeClock) -> None:
    noise = itertools.cycle([1000, 1500, 700, 2100, 900])
    log: list[str] = []
    case = Case(key={"op": "op", "variant": "noisy", "mode": "inference"}, call=None)

    def call() -> Any:
        clock.now += next(noise)
        log.append("x")

    case.call = call
    config = RunConfig(rounds=12, block_seconds=1e-6, warmup_seconds=0.0, adaptive=True, min_rounds=4,
                       rel_precision=1e-6)
    outcome = runner.run([case], config)
    assert outcome.rounds_done == 12 and outcome.stop_reason == "rounds"
