"""Procedural GSM-style word problems, written for this project.

Each template draws its quantities from a seeded ``random.Random`` and *computes* the
answer from them (nothing is stored), so every problem is solvable and its answer exact.
Quantities are chosen so that answers are whole numbers. ``difficulty`` 1 asks for one or
two operations, 2 for three or four, 3 for five or more (fractions, percentages, rates).
The problem text is the content that decides the split (see ``core.instances``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from math import gcd

NAMES = (
    "Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jonas",
    "Kemi", "Liam", "Mei", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tara",
)
ITEMS = (
    ("notebook", "notebooks"), ("pencil", "pencils"), ("apple", "apples"), ("ticket", "tickets"),
    ("muffin", "muffins"), ("plant", "plants"), ("marker", "markers"), ("comic", "comics"),
)

Template = Callable[[random.Random, int], tuple[str, int]]


def _name(rng: random.Random, *avoid: str) -> str:
    return rng.choice([n for n in NAMES if n not in avoid])


def _whole_step(percent: int) -> int:
    """The smallest amount whose ``percent`` % is a whole number."""
    return 100 // gcd(100, percent)


def shopping(rng: random.Random, level: int) -> tuple[str, int]:
    """Cost of two kinds of items; then a discount; then the change from a bill."""
    name = _name(rng)
    (_, many_a), (_, many_b) = rng.sample(ITEMS, 2)
    off = rng.choice([10, 20, 25, 50])
    step = 1 if level == 1 else _whole_step(off)  # whole-dollar discounts
    count_a, price_a = rng.randint(2, 9), rng.randint(1, 15 // step + 2) * step
    count_b, price_b = rng.randint(2, 9), rng.randint(1, 15 // step + 2) * step
    total = count_a * price_a + count_b * price_b
    text = f"{name} buys {count_a} {many_a} at ${price_a} each and {count_b} {many_b} at ${price_b} each."
    if level == 1:
        return text + f" How many dollars does {name} spend?", total
    paid = total - total * off // 100
    text += f" The shop takes {off}% off the whole bill."
    if level == 2:
        return text + f" How many dollars does {name} pay?", paid
    bill = (paid // 50 + 1) * 50 + rng.choice([0, 50])
    return text + f" {name} pays with ${bill} in $50 notes. How many dollars of change does {name} get?", bill - paid


def travel(rng: random.Random, level: int) -> tuple[str, int]:
    """Distance from speed and time over two legs; then the minutes of the trip home."""
    name = _name(rng)
    speed, hours = rng.randint(3, 12) * 5, rng.randint(1, 5)
    distance = speed * hours
    text = f"{name} drives at {speed} km per hour for {hours} hours."
    if level == 1:
        return text + f" How many kilometres does {name} drive?", distance
    speed2, minutes = rng.randint(2, 10) * 6, rng.choice([20, 30, 40, 50])
    distance += speed2 * minutes // 60
    text += f" Then {name} drives at {speed2} km per hour for {minutes} minutes."
    if level == 2:
        return text + f" How many kilometres does {name} drive in total?", distance
    back = rng.choice([v for v in (30, 40, 45, 50, 60, 75, 80, 90, 100, 120) if distance * 60 % v == 0])
    return text + (f" {name} drives the same distance home at {back} km per hour. How many minutes does the trip "
                   "home take?"), distance * 60 // back


def sharing(rng: random.Random, level: int) -> tuple[str, int]:
    """Items shared among friends: each share, after giving some away, and leftovers."""
    name = _name(rng)
    _, many = rng.choice(ITEMS)
    friends, each = rng.randint(2, 8), rng.randint(3, 12)
    total = friends * each
    if level == 1:
        return f"{name} shares {total} {many} equally among {friends} friends. How many {many} does each get?", each
    kept = rng.randint(2, 15)
    total += kept
    text = f"{name} has {total} {many}, keeps {kept} and shares the rest equally among {friends} friends."
    if level == 2:
        return text + f" How many {many} does each friend get?", each
    eaten = rng.randint(1, each - 1)
    return text + (f" Each friend then uses {eaten} of theirs. How many {many} do the friends have left "
                   "altogether?"), friends * (each - eaten)


def ages(rng: random.Random, level: int) -> tuple[str, int]:
    """Ages linked by multiples and differences."""
    older = _name(rng)
    younger = _name(rng, older)
    young_age, factor = rng.randint(3, 12), rng.randint(2, 4)
    old_age = young_age * factor
    text = f"{older} is {factor} times as old as {younger}, who is {young_age}."
    if level == 1:
        return text + f" How old is {older}?", old_age
    years = rng.randint(2, 10)
    text += f" How old will {older} and {younger} be together in {years} years?"
    if level == 2:
        return text, old_age + young_age + 2 * years
    third = _name(rng, older, younger)
    gap = rng.randint(2, 9)
    return (f"{older} is {factor} times as old as {younger}, who is {young_age}. {third} is {gap} years younger "
            f"than {older}. What will the sum of the three ages be in {years} years?"), (
        old_age + young_age + old_age - gap + 3 * years)


def wages(rng: random.Random, level: int) -> tuple[str, int]:
    """Pay from an hourly rate, days worked, overtime at time and a half, then rent."""
    name = _name(rng)
    rate = rng.randint(1, 3) * 20 if level == 3 else rng.randint(6, 20) * 2  # keeps every amount whole
    hours, days = rng.randint(3, 8), rng.randint(2, 6)
    pay = rate * hours * days
    text = f"{name} earns ${rate} per hour and works {hours} hours a day for {days} days."
    if level == 1:
        return text + f" How many dollars does {name} earn?", pay
    overtime = rng.randint(1, 6)
    pay += overtime * rate * 3 // 2
    text += f" {name} also works {overtime} hours of overtime paid at one and a half times the rate."
    if level == 2:
        return text + f" How many dollars does {name} earn in total?", pay
    spend = rng.choice([10, 20, 50])
    return text + f" {name} spends {spend}% of the earnings on rent. How many dollars are left?", (
        pay - pay * spend // 100)


def fractions_left(rng: random.Random, level: int) -> tuple[str, int]:
    """A collection reduced by successive fractions of what is left, then boxed."""
    name = _name(rng)
    friend = _name(rng, name)
    _, many = rng.choice(ITEMS)
    first, second = rng.choice([2, 3, 4, 5]), rng.choice([2, 3, 4])
    total = first * second * rng.randint(1, 6)
    left = total - total // first
    text = f"{name} has {total} {many} and gives 1/{first} of them to {friend}."
    if level == 1:
        return text + f" How many {many} does {name} have left?", left
    left -= left // second
    text += f" Then {name} gives 1/{second} of the remaining {many} to a neighbour."
    if level == 2:
        return text + f" How many {many} are left?", left
    bought = rng.randint(1, 10) * 2 + left % 2
    return text + (f" Finally {name} buys {bought} more and splits all of them into 2 equal boxes. How many "
                   f"{many} are in each box?"), (left + bought) // 2


def price_change(rng: random.Random, level: int) -> tuple[str, int]:
    """A price raised then lowered by percentages (multiples of $200 keep it whole)."""
    one, many = rng.choice(ITEMS)
    price = rng.randint(1, 9) * 200
    up = rng.choice([10, 20, 25, 50])
    raised = price * (100 + up) // 100
    text = f"A {one} costs ${price}. Its price goes up by {up}%."
    if level == 1:
        return text + " What is the new price in dollars?", raised
    down = rng.choice([10, 20, 50])
    lowered = raised - raised * down // 100
    text += f" Later the new price drops by {down}%."
    if level == 2:
        return text + " What is the final price in dollars?", lowered
    count = rng.randint(2, 6)
    return text + f" How many dollars do {count} {many} cost at the final price?", count * lowered


def recipe(rng: random.Random, level: int) -> tuple[str, int]:
    """Scaling a recipe by batches."""
    name = _name(rng)
    cups, batch = rng.randint(2, 6), rng.choice([6, 8, 10, 12])
    batches = rng.randint(2, 7)
    text = f"A recipe uses {cups} cups of flour for {batch} cookies."
    if level == 1:
        return text + f" How many cups are needed for {batch * batches} cookies?", cups * batches
    guests, per = rng.randint(3, 12), rng.randint(1, 4)
    needed = guests * per
    batches = -(-needed // batch)
    text += (f" {name} invites {guests} guests and wants {per} cookies per guest, baking only whole batches.")
    if level == 2:
        return text + " How many cups of flour does " + name + " use?", cups * batches
    bag = rng.choice([3, 4, 5])
    return text + f" Flour comes in bags of {bag} cups. How many bags must {name} buy?", -(-cups * batches // bag)


def savings(rng: random.Random, level: int) -> tuple[str, int]:
    """Weeks of saving needed to reach a goal (rounded up)."""
    name = _name(rng)
    weekly, goal = rng.randint(5, 30), rng.randint(10, 60) * 10
    if level == 1:
        weeks = rng.randint(2, 12)
        return f"{name} saves ${weekly} every week. How many dollars does {name} save in {weeks} weeks?", (
            weekly * weeks)
    start = rng.randint(0, goal // 2)
    text = f"{name} has ${start} and saves ${weekly} every week to buy a bike that costs ${goal}."
    if level == 2:
        return text + f" After how many whole weeks can {name} first afford the bike?", -(-(goal - start) // weekly)
    gift = rng.randint(1, 5) * 10
    every = rng.randint(3, 6)
    saved, weeks = start, 0
    while saved < goal:
        weeks += 1
        saved += weekly + (gift if weeks % every == 0 else 0)
    return text + (f" Every {every}th week a grandparent adds ${gift}. After how many whole weeks can {name} first "
                   "afford the bike?"), weeks


def garden(rng: random.Random, level: int) -> tuple[str, int]:
    """Perimeter, area and fencing costs of a rectangle (with a path around it)."""
    length, width = rng.randint(4, 30), rng.randint(3, 20)
    text = f"A rectangular garden is {length} m long and {width} m wide."
    if level == 1:
        return text + " What is its area in square metres?", length * width
    cost = rng.randint(2, 12)
    text += f" Fencing costs ${cost} per metre."
    if level == 2:
        return text + " How many dollars does it cost to fence the whole garden?", 2 * (length + width) * cost
    path = rng.randint(1, 3)
    outer = (length + 2 * path) * (width + 2 * path)
    return text + (f" A path {path} m wide is built all around the outside. What is the area of the path in square "
                   "metres?"), outer - length * width


TEMPLATES: tuple[Template, ...] = (
    shopping, travel, sharing, ages, wages, fractions_left, price_change, recipe, savings, garden,
)


def generate_problem(rng: random.Random, difficulty: int = 0) -> tuple[str, int, int, str]:
    """``(question, answer, level, template name)``; ``difficulty`` 0 draws the level too."""
    template = rng.choice(TEMPLATES)
    level = difficulty or rng.randint(1, 3)
    question, answer = template(rng, level)
    return question, answer, level, template.__name__
