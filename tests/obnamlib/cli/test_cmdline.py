"""obnamlib.cli.cmdline and obnamlib.cli.manpage: options, framework options,
usage errors, help text and the manual page."""

import io

import pytest

from obnamlib.cli import cmdline, config_files, settings


def fresh(hidden=False):
    reg = settings.Settings()
    reg.string(['repository', 'r'], 'where', metavar='URL')
    reg.choice(['repository-format'], ['6', 'ga'], 'format')
    reg.boolean(['pretend', 'dry-run', 'no-act'], 'change nothing')
    reg.boolean(['quiet'], 'be quiet', hidden=hidden)
    reg.string_list(['exclude'], 'skip REGEXP', metavar='REGEXP',
                    group='Backing up')
    reg.integer(['lock-timeout'], 'wait N (default %default)', default=60,
                metavar='N')
    files = config_files.ConfigFileList(defaults=['/d.conf'])
    out = io.StringIO()
    cl = cmdline.CommandLine(
        reg, files, 'prog', '1.0', usage=lambda: 'Usage: %prog [options] X',
        description=lambda: 'Does things.\n* %prog x: the x\n',
        cmd_synopsis={'x': '[FILE]...'}, stdout=out)
    return cl, reg, files, out


def test_values_prefixes_aliases_and_negations():
    cl, reg, _, _ = fresh()
    args = cl.parse(['x', '-r/r', '--no-act', '--exc', 'a,b', 'y',
                     '--exclude=c', '--lock=5', '--', '--quiet'])
    assert args == ['x', 'y', '--quiet']
    assert (reg['repository'], reg['pretend'], reg['exclude'],
            reg['lock-timeout'], reg['quiet']) == ('/r', True, ['a,b', 'c'],
                                                    5, False)
    cl.parse(['--no-dry-run', '--repository=/s'])
    assert (reg['pretend'], reg['repository']) == (False, '/s')


def test_no_negation_where_that_name_is_a_setting():
    cl, reg, _, _ = fresh()
    parser = cl.build_parser(acting=True)
    assert parser.has_option('--no-pretend')
    assert parser.has_option('--no-no-act')
    assert not parser.has_option('--no-repository')


def usage_error(cl, argv, capsys):
    with pytest.raises(SystemExit) as e:
        cl.find_config_files(argv)
    out, err = capsys.readouterr()
    assert (e.value.code, out) == (2, '')
    return err


@pytest.mark.parametrize('argv, message', [
    (['--frob'], 'no such option: --frob'),
    (['--repo'], 'ambiguous option: --repo (--repository, '
                 '--repository-format?)'),
    (['--lock-timeout=soon'], "option --lock-timeout: invalid integer "
                              "value: 'soon'"),
    (['--repository-format=7'], "option --repository-format: invalid "
                                "choice: '7' (choose from '6', 'ga')"),
    (['-r'], '-r option requires 1 argument'),
    (['--pretend=yes'], '--pretend option does not take a value'),
])
def test_usage_errors_exit_2_with_the_usage_block(argv, message, capsys):
    cl, _, _, _ = fresh()
    assert usage_error(cl, argv, capsys) == \
        'Usage: prog [options] X\n\nprog: error: %s\n' % message


def test_first_pass_only_finds_config_files():
    cl, reg, files, out = fresh()
    cl.find_config_files(['--config', '/a', '-r', '/r', '--dump-config',
                          '--no-default-configs', '--config', '/b'])
    assert (files.paths, files.required) == (['/b'], ['/b'])
    assert (reg['repository'], out.getvalue()) == ('', '')


def test_config_files_are_added_again_in_the_second_pass():
    cl, _, files, out = fresh()
    argv = ['--config', '/a', '--list-config-files']
    cl.find_config_files(argv)
    with pytest.raises(SystemExit) as e:
        cl.parse(argv)
    assert e.value.code == 0
    assert out.getvalue() == '/d.conf\n/a\n/a\n'


def test_dumps_act_after_the_whole_command_line(capsys):
    cl, _, _, out = fresh()
    with pytest.raises(SystemExit) as e:
        cl.parse(['--dump-config', '--dump-setting-names', '-r', '/late'])
    assert e.value.code == 0
    assert '\nrepository = /late\n' in out.getvalue()
    assert 'output\n' not in out.getvalue()


def test_dump_setting_names():
    cl, reg, _, out = fresh()
    with pytest.raises(SystemExit):
        cl.parse(['--dump-setting-names'])
    assert out.getvalue() == ''.join(name + '\n' for name in reg.keys())


def test_help_and_help_all(monkeypatch, capsys):
    monkeypatch.setenv('COLUMNS', '80')
    cl, _, _, out = fresh(hidden=True)
    text = cl.help_text()
    assert text.startswith('Usage: prog [options] X\n\nDoes things.\n\n'
                           '* prog x: the x\n\nOptions:\n  --version ')
    assert '  -r URL, --repository=URL\n' in text
    assert '  --lock-timeout=N      wait N (default 60)\n' in text
    assert '\n  Backing up:\n    --exclude=REGEXP    skip REGEXP\n' in text
    assert '\n  Performance:\n' in text
    assert '--quiet' not in text
    assert '--quiet' in cl.help_text(all_options=True)
    with pytest.raises(SystemExit):
        cl.parse(['--help-all'])
    assert out.getvalue() == cl.help_text(all_options=True)
    with pytest.raises(SystemExit) as e:
        cl.find_config_files(['--help'])
    assert (e.value.code, capsys.readouterr().out) == (0, text)


def test_help_text_follows_columns(monkeypatch):
    monkeypatch.setenv('COLUMNS', '40')
    cl, _, _, _ = fresh()
    assert '  --version       show program\'s\n' \
        '                  version number and\n' in cl.help_text()


@pytest.mark.parametrize('text, width, filled', [
    ('one two\nthree\n\nfour\n', 78, 'one two three\n\nfour\n'),
    ('intro\n* a b c d\n  e f\n* g\nafter\n', 78,
     'intro\n\n* a b c d e f\n* g\n\nafter\n'),
    ('* aaa bbb ccc ddd\n', 10, '* aaa bbb\n  ccc ddd\n'),
    ('words words words', 11, 'words words\nwords\n'),
    ('', 78, ''),
])
def test_fill_paragraphs(text, width, filled):
    assert cmdline.fill_paragraphs(text, width) == filled


@pytest.mark.parametrize('width', [2, 1, 0, -7])
def test_fill_paragraphs_narrower_than_a_bullet_fills_at_the_minimum(width):
    text = 'ab cd\n* ef gh\n'
    assert cmdline.fill_paragraphs(text, width) == \
        cmdline.fill_paragraphs(text, cmdline.MIN_WIDTH) == \
        'ab\ncd\n\n* e\n  f\n  g\n  h\n'


@pytest.mark.parametrize('columns', ['0', '1', '-5'])
def test_help_at_a_tiny_width(columns, monkeypatch):
    monkeypatch.setenv('COLUMNS', columns)
    cl, _, _, _ = fresh()
    assert cl.help_text().startswith('Usage: prog [options] X\n\nDoe\ns t\n')


TEMPLATE = ('.TH PROG 1\n.SH NAME\nprog \\- does\n.SH SYNOPSIS\n'
            '.SH DESCRIPTION\n.SH OPTIONS\n.SH FILES\n')


def test_generate_manpage(tmp_path):
    template = tmp_path / 'prog.1.in'
    template.write_text(TEMPLATE)
    cl, _, _, out = fresh()
    cl.find_config_files(['--generate-manpage', str(template)])
    assert out.getvalue() == ''
    with pytest.raises(SystemExit) as e:
        cl.parse(['--generate-manpage', str(template)])
    assert e.value.code == 0
    page = out.getvalue()
    synopsis = page.split('.SH SYNOPSIS\n')[1].split('.SH DESCRIPTION')[0]
    assert synopsis.startswith(
        '.nh\n.B prog\n.RB [ \\-\\-config\\fR=\\fIFILE ]\n')
    assert '.RB [ \\-r\\fIURL ]\n.RB [ \\-\\-repository\\fR=\\fIURL ]\n' \
        in synopsis
    assert synopsis.endswith('.PP\n.br\n.B prog\n.RI [ options ]\nx\n'
                             '.RI [ FILE ]... ""\n.hy\n')
    options = page.split('.SH OPTIONS\n')[1].split('.SH FILES')[0]
    assert '.TP\n.BR \\-\\-lock\\-timeout =\\fIN\nwait N (default 60)\n' \
        in options
    pretend = options.index('.BR \\-\\-pretend ", " \\-\\-dry\\-run ", " '
                            '\\-\\-no\\-act\n')
    negation = options.index('.BR \\-\\-no\\-pretend ", " '
                             '\\-\\-no\\-dry\\-run ", " \\-\\-no\\-no\\-act\n')
    quiet = options.index('.BR \\-\\-quiet\n')
    assert pretend < negation < quiet
    assert '.SS "Backing up"\n' in options
    assert page.startswith('.TH PROG 1\n.SH NAME\n')
    assert page.endswith('.SH FILES\n')
