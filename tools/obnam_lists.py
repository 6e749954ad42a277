"""obnam's subcommands and options as the program itself has them, for
the tools that write the shipped manual page and bash completion."""

import os
import sys

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, CHECKOUT)

import obnamlib.cli.app  # noqa: E402


def prepared_app():
    """The application with every setting and subcommand registered, as
    a run has them before it parses the command line."""
    app = obnamlib.cli.app.ObnamApp()
    app.register_everything()
    return app


def all_options(app):
    """optparse's options, every one, with its help shown or not."""
    parser = app.command_line().build_parser(acting=False, all_options=True)
    return parser._get_all_options()


def option_names(option):
    return option._short_opts + option._long_opts


def write_or_print(text, target):
    """Write `text` to the file `target`, or to stdout if it is `-`."""
    if target == '-':
        sys.stdout.write(text)
    else:
        with open(target, 'w', encoding='utf-8') as f:
            f.write(text)
