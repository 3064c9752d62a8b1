"""`python -m gemma4_t4` and the `gemma4-t4` command: the operator's command line (gemma4_t4.cli)."""

import sys


def run() -> int:
    try:  # Ctrl-C while the command line's libraries load is an interrupt too, not a traceback
        from gemma4_t4.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
