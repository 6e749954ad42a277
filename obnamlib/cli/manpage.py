"""`--generate-manpage=TEMPLATE`: a troff manual page from a template.

The template is printed with two sections filled in from the option
parser: after a `.SH SYNOPSIS` line, every option and every subcommand
with its argument synopsis; after `.SH OPTIONS`, each option with its help
(ungrouped options first, then each group under `.SS`).  Options are
sorted by their first name, except that a `--no-FOO` option follows the
option it negates, as Obnam 1.x's manual pages had them.
"""

import optparse
import re


def fill_template(template, parser, cmd_synopsis):
    """The template with SYNOPSIS and OPTIONS filled in."""
    text = template
    for section, contents in (('SYNOPSIS', synopsis(parser, cmd_synopsis)),
                              ('OPTIONS', options(parser))):
        heading = '\n.SH %s\n' % section
        text = text.replace(heading, heading + contents)
    return text


def synopsis(parser, cmd_synopsis):
    lines = ['.nh', '.B %s' % escape_dashes(parser.prog)]
    everything = ordered(parser, parser.option_list)
    for group in parser.option_groups:
        everything += ordered(parser, group.option_list)
    for option in ordered(parser, everything):
        lines += ['.RB [ %s ]' % spec for spec in synopsis_specs(option)]
    if cmd_synopsis:
        lines.append('.PP')
        for cmd in sorted(cmd_synopsis):
            lines += ['.br', '.B %s' % escape_dashes(parser.prog),
                      '.RI [ options ]', escape_dashes(cmd),
                      argument_spec(cmd_synopsis[cmd])]
    lines.append('.hy')
    return ''.join(line + '\n' for line in lines)


def synopsis_specs(option):
    """`-r\\fIURL` or `\\-\\-name\\fR=\\fIURL` for each of its names."""
    metavar = escape_dashes(option.metavar) if option.metavar else None
    for name in option._short_opts + option._long_opts:
        if metavar is None:
            suffix = ''
        elif name.startswith('--'):
            suffix = '\\fR=\\fI' + metavar
        else:
            suffix = '\\fI' + metavar
        yield escape_dashes(name) + suffix


def options(parser):
    lines = []
    for option in ordered(parser, parser.option_list):
        lines += option_entry(parser, option)
    for group in parser.option_groups:
        lines.append('.SS "%s"' % group.title)
        for option in ordered(parser, group.option_list):
            lines += option_entry(parser, option)
    return ''.join(line + '\n' for line in lines)


def option_entry(parser, option):
    names = [escape_dashes(name) for name in option._short_opts]
    for name in option._long_opts:
        if option.metavar:
            names.append('%s =\\fI%s' % (escape_dashes(name), option.metavar))
        else:
            names.append(escape_dashes(name))
    return ['.TP', '.BR ' + ' ", " '.join(names),
            escape_leading_dot(help_with_default(parser, option).strip())]


def help_with_default(parser, option):
    default = parser.defaults.get(option.dest)
    if default is None or default is optparse.NO_DEFAULT:
        default = 'none'
    return option.help.replace('%default', str(default))


def ordered(parser, option_list):
    """Options sorted by first name, each `--no-FOO` right after the
    options of the setting it negates."""
    negations = [o for o in option_list if is_negation(parser, o)]
    result = sorted((o for o in option_list if o not in negations),
                    key=lambda o: (o._long_opts + o._short_opts)[0])
    for negation in negations:
        origin = parser.origins.get(negation)
        same = [o for o in result if parser.origins.get(o) is origin]
        if not same:
            result.append(negation)
            continue
        first = result.index(same[0])
        rest = [o for o in result[first:]
                if parser.origins.get(o) is not origin]
        result = result[:first] + same + [negation] + rest
    return result


def is_negation(parser, option):
    """A `--no-FOO` option we added (optparse's own options never are)."""
    return option in parser.origins and bool(option._long_opts) and \
        option._long_opts[0].startswith('--no-')


def argument_spec(spec):
    """`.RI` line for an argument synopsis: upper-case words in italics."""
    words = ['.RI']
    spec = spec or ''
    while spec:
        for pattern in (r'[^A-Z]+', r'[A-Z]+'):
            m = re.match(pattern, spec)
            if m:
                words.append(escape_dashes(m.group(0)))
                spec = spec[m.end():]
            else:
                words.append('""')
    return ' '.join(words)


def escape_dashes(text):
    return text.replace('-', '\\-')


def escape_leading_dot(line):
    return '\\' + line if line.startswith('.') else line
