"""docs/details.md's table of main.py's flags, made from their declarations (a2c_ppo_acktr/
config/): ``python -m a2c_ppo_acktr.run.flag_table`` writes it between the file's markers;
tests/run/test_flags.py checks that the committed table is the one the declarations give."""
import json
import os
import sys

from a2c_ppo_acktr.config import declarations
from a2c_ppo_acktr.config.flag import Flag

START, END = "<!-- flag table: start -->", "<!-- flag table: end -->"
DETAILS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "docs", "details.md")


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
    """Write the table into docs/details.md (or the file given), between its markers."""
    path = argv[0] if argv else DETAILS
    with open(path) as f:
        text = f.read()
    before, _, rest = text.partition(START)
    _, _, after = rest.partition(END)
    with open(path, "w") as f:
        f.write(f"{before}{START}\n{table()}{END}{after}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
