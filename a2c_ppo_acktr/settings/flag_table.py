"""The table of main.py's flags, made from their declarations (a2c_ppo_acktr/config/) when asked
for, never committed: ``python -m a2c_ppo_acktr.settings.flag_table`` prints it (Markdown), and
``python main.py --help`` names that command below its options. Each row: the flag, its default,
its config part, the algorithms that use it, what a resume does with it, and its --help text."""
import json
import sys

from a2c_ppo_acktr.config import declarations
from a2c_ppo_acktr.config.flag import Flag

COMMAND = "python -m a2c_ppo_acktr.settings.flag_table"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _resume(spec: Flag) -> str:
    if not spec.saved:
        return "not saved"
    return f"may change: {spec.may_change}" if spec.may_change else "kept"


def row(spec: Flag) -> str:
    """One flag's row: what it is, its default, its part, the algorithms that use it, what a
    resume does with it, and its --help text."""
    form, value = spec.option, spec.metavar or spec.dest.upper()
    if spec.choices is not None:
        form += " {" + ",".join(spec.names()) + "}"
    elif not spec.switch:
        form += {"?": f" [{value}]", "+": f" {value} ..."}.get(spec.nargs or "", " " + value)
    cells = [f"`{form}`", f"`{json.dumps(spec.default)}`", f"`{spec.part}`",
             ", ".join(spec.algos) or "all", _resume(spec), spec.text()]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def table() -> str:
    """The table, in --help's order."""
    head = ["| flag | default | part | algorithms | on --resume | what it does (--help) |",
            "|---|---|---|---|---|---|"]
    return "\n".join(head + [row(spec) for spec in declarations()]) + "\n"


def main(argv: list[str]) -> int:
    """Print the table on stdout (it takes no arguments)."""
    if argv:
        print(f"flag_table: error: takes no arguments, got {' '.join(argv)} (it prints the "
              "table of main.py's flags; redirect it to a file to keep one)", file=sys.stderr)
        return 2
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
