"""``--help`` as one page: the options people change most, grouped by section, and each
section's options one flag away.

- ``--help`` (``-h``): the front page, the options declared ``common=True``
  (:func:`agentrl.utils.options.option`) and the arguments a command marks with
  :func:`common`, in their sections;
- ``--help SECTION``: every option of one section (an argument group: ``run``, ``model``,
  ..., or a command's own group);
- ``--help_all`` (or ``--help-all``): every option, argparse's full help with the epilog.

Nothing here knows the options: it reads the parser's groups and what each action carries.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["add_paged_help", "common", "front_page", "help_sections", "section_page"]

# The attribute of an action that is on the front page.
_FRONT = "common"


def common(action: argparse.Action) -> argparse.Action:
    """Mark ``action`` (a command's own argument) as one for the front page; returns it."""
    setattr(action, _FRONT, True)
    return action


def _is_front(action: argparse.Action) -> bool:
    return bool(getattr(action, _FRONT, False))


def _key(group: argparse._ArgumentGroup) -> str:
    """The name ``--help SECTION`` takes for a group: its title without " options"."""
    return (group.title or "").removesuffix(" options").replace(" ", "_")


def _shown(actions: Sequence[argparse.Action]) -> list[argparse.Action]:
    return [a for a in actions if a.help != argparse.SUPPRESS]


def _default_groups(parser: argparse.ArgumentParser) -> tuple[Any, ...]:
    return (parser._positionals, parser._optionals)


def help_sections(parser: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    """The sections ``--help SECTION`` takes, in the order the full help lists them."""
    return {
        _key(group): group
        for group in parser._action_groups
        if group not in _default_groups(parser) and _shown(group._group_actions)
    }


def _page(
    parser: argparse.ArgumentParser,
    groups: Sequence[argparse._ArgumentGroup],
    keep: Callable[[argparse.Action], bool],
    title: Callable[[argparse._ArgumentGroup, int, int], str],
    description: str | None,
    epilog: str | None,
) -> str:
    formatter = parser._get_formatter()
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    formatter.add_text(description)
    for group in groups:
        every = _shown(group._group_actions)
        actions = [a for a in every if keep(a)]
        if not actions:
            continue
        formatter.start_section(title(group, len(actions), len(every)))
        formatter.add_text(group.description)
        formatter.add_arguments(actions)
        formatter.end_section()
    formatter.add_text(epilog)
    return formatter.format_help()


def _where_the_rest_is(parser: argparse.ArgumentParser) -> str:
    sections = ", ".join(help_sections(parser))
    return (
        f"The rest: `{parser.prog} --help SECTION` lists a section's options ({sections}); "
        f"`{parser.prog} --help_all` every option, with the exit codes."
    )


def front_page(parser: argparse.ArgumentParser) -> str:
    """The usage, the description, the front-page options by section, and where the rest is."""
    sections = {id(group): key for key, group in help_sections(parser).items()}

    def title(group: argparse._ArgumentGroup, shown: int, total: int) -> str:
        key = sections.get(id(group))
        if key is None or shown == total:
            return str(group.title)
        return f"{group.title} ({shown} of {total}; all: --help {key})"

    return _page(
        parser,
        parser._action_groups,
        _is_front,
        title,
        parser.description,
        _where_the_rest_is(parser),
    )


def section_page(parser: argparse.ArgumentParser, key: str) -> str:
    """Every option of section ``key``; an unknown section is a usage error."""
    sections = help_sections(parser)
    if key not in sections:
        parser.error(f"unknown help section {key!r}; sections: {', '.join(sections)}")
    return _page(
        parser,
        [sections[key]],
        lambda action: True,
        lambda group, shown, total: str(group.title),
        None,
        f"`{parser.prog} --help` shows the options changed most; `{parser.prog} --help_all` "
        "every option.",
    )


class _HelpPage(argparse.Action):
    """``-h/--help [SECTION]``: the front page, or one section's options; with ``nargs=0``
    (``--help_all``), every option (argparse's own full help)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("nargs", "?")
        if kwargs["nargs"] == "?":
            kwargs.setdefault("metavar", "SECTION")
        kwargs.update(default=argparse.SUPPRESS)
        super().__init__(option_strings, argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if self.nargs == 0:
            text = parser.format_help()
        elif values is None:
            text = front_page(parser)
        else:
            text = section_page(parser, str(values))
        parser._print_message(text, sys.stdout)
        parser.exit()


def add_paged_help(parser: argparse.ArgumentParser) -> None:
    """Replace the parser's ``-h/--help`` with the paged one and add ``--help_all``."""
    group = parser._optionals  # where argparse's own -h/--help sits, if the parser has one
    saved = group.conflict_handler
    group.conflict_handler = "resolve"  # drops that one
    try:
        # -h is --help too; listed once, so that the line fits.
        parser.add_argument("-h", action=_HelpPage, help=argparse.SUPPRESS)
        common(
            parser.add_argument(
                "--help", action=_HelpPage, help="this page, or every option of one SECTION"
            )
        )
    finally:
        group.conflict_handler = saved
    common(parser.add_argument("--help_all", action=_HelpPage, nargs=0, help="show every option"))
