"""``--seat ROLE=SPEC``: the env commands' way to put any subset of an env's roles in seats.

``pettingllm play`` seats the roles the person does not play (default: the env's oracle) and
``pettingllm bench`` the roles the benchmarked policy does not play (default: none). SPEC is
:func:`pettingllm_envs.seats.make_seat`'s language: ``scripted``, ``random``, ``human``,
``openai:<model>@<base_url>``, ``hf:<model folder>``. Every check here fails with one line.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from pettingllm_envs.commandline.errors import ArgumentParser, UsageError, did_you_mean
from pettingllm_envs.seats import SEAT_SPECS, seat_assignments


def add_seat_option(parser: ArgumentParser, help_text: str) -> None:
    """The repeatable ``--seat ROLE=SPEC`` option (``args.seat``: the items given, in order)."""
    parser.add_argument("--seat", action="append", default=[], metavar="ROLE=SPEC",
                        help=f"{help_text}; repeatable. SPEC: {SEAT_SPECS}")


#: The spec forms: a name, or a prefix before ``:``.
SPEC_FORMS = ("scripted", "random", "human", "openai", "hf")


def seat_specs(items: Sequence[str], roles: Sequence[str] | None = None, *, env_id: str = "",
               taken: Mapping[str, str] | None = None, forms: Collection[str] = SPEC_FORMS) -> dict[str, str]:
    """Role -> spec of ``--seat`` ``items``: every role one of ``env_id``'s ``roles`` (when given) and none of
    ``taken`` (role -> why it cannot be seated: the person plays it, ...), every spec one of ``forms`` (a
    name, or a prefix before ``:``)."""
    try:
        specs = seat_assignments(list(items))
    except ValueError as error:
        raise UsageError(f"--seat: {error}") from None
    from pettingllm_envs.commandline.checks import check_model

    for role, spec in specs.items():
        if roles is not None and role not in roles:
            raise UsageError(f"--seat {role}={spec}: {env_id} has no role {role!r}{did_you_mean(role, roles)} "
                             f"(roles: {', '.join(roles)})")
        if taken and role in taken:
            raise UsageError(f"--seat {role}={spec}: {taken[role]}")
        if not any(spec == form or spec.startswith(f"{form}:") for form in forms):
            raise UsageError(f"--seat {role}={spec}: unknown spec{did_you_mean(spec, forms)} (allowed: "
                             f"{', '.join(f'{f}:...' if f in ('openai', 'hf') else f for f in forms)})")
        if spec.startswith("hf:"):
            check_model(spec[3:], option="--seat ROLE=hf:")
    return specs
