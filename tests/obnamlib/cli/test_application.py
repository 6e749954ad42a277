"""obnamlib.cli.application: a run of bin/obnam as users meet it (help,
usage errors, configuration files, manual page, profiling), and the
subcommand machinery in-process."""

import io

import pytest

from obnamlib.cli import application
from tests.obnamlib.cli.test_app import run as run_bytes


def run(args, home, env=None):
    """bin/obnam (default configuration files read) at 80 columns:
    (exit code, stdout text, stderr text)."""
    code, out, err = run_bytes(args, home, env=dict({'COLUMNS': '80'},
                                                    **(env or {})),
                               nodefaults=False)
    return code, out.decode(), err.decode()


@pytest.fixture
def home(tmp_path):
    h = tmp_path / 'home'
    h.mkdir()
    return h


def test_help_and_help_all_subcommands(home):
    code, help_text, err = run(['--no-default-configs', 'help'], home)
    assert (code, err) == (0, '')
    # the hidden test aid _lock is neither in usage nor in the list
    assert help_text.startswith('Usage: obnam [options] add-key '
                                '[CLIENT-NAME]...\n')
    assert ' _lock ' not in help_text
    assert '\n\nBack up files to, and restore them from, an Obnam ' \
        'repository.\n\n* obnam add-key: ' in help_text
    assert '* obnam _lock:' not in help_text
    assert '--repository' not in help_text
    code, all_text, _ = run(['--no-default-configs', 'help-all'], home)
    assert '* obnam _lock: ' in all_text
    extra = [line for line in all_text.splitlines()
             if line not in help_text.splitlines()]
    assert [line[:len('* obnam _lock: ')] for line in extra] == \
        ['* obnam _lock: ']


def test_help_of_one_subcommand(home):
    code, out, err = run(['--no-default-configs', 'help', 'fsck'], home)
    assert (code, err) == (0, '')
    assert out.startswith('Usage: obnam [options] fsck \n\n')


def test_help_options(home):
    code, out, err = run(['--no-default-configs', '--help'], home)
    assert (code, err) == (0, '')
    assert '\nOptions:\n  --version             show program\'s version ' \
        'number and exit\n  -h, --help            show this help message ' \
        'and exit\n  --generate-manpage=TEMPLATE\n' in out
    groups = [line.strip() for line in out.splitlines()
              if line.startswith('  ') and line.endswith(':')
              and not line.startswith('   ')]
    assert groups == sorted(groups, key=lambda g: g.rstrip(':'))
    assert 'Performance:' in groups
    _, all_out, _ = run(['--no-default-configs', '--help-all'], home)
    assert all_out == out


def test_usage_error_prints_usage_block_and_exits_2(home):
    code, out, err = run(['--no-default-configs', '--frob', 'help'], home)
    assert (code, out) == (2, '')
    lines = err.splitlines()
    assert lines[0] == 'Usage: obnam [options] add-key [CLIENT-NAME]...'
    assert lines[-2:] == ['', 'obnam: error: no such option: --frob']
    assert len(lines) == len(run(['--no-default-configs', 'help'],
                                 home)[1].split('\n\n')[0].splitlines()) + 2


def test_list_config_files_order_with_yaml_and_xdg(home, tmp_path):
    confdir = home / '.config' / 'obnam'
    confdir.mkdir(parents=True)
    for name in ('z.yaml', 'a.conf', 'm.yaml', 'skip.ini'):
        (confdir / name).write_text('config:\n' if name.endswith('.yaml')
                                    else '')
    xdg = tmp_path / 'xdg'
    (xdg / 'obnam').mkdir(parents=True)
    (xdg / 'obnam' / 'x.yaml').write_text('config:\n')
    extra = tmp_path / 'extra.yaml'
    extra.write_text('config:\n')
    code, out, err = run(['--list-config-files', '--config', str(extra)],
                         home, env={'XDG_CONFIG_DIRS': str(xdg)})
    assert (code, err) == (0, '')
    listed = out.splitlines()
    assert listed[:2] == ['/etc/obnam.conf', '/etc/obnam.yaml']
    assert [p for p in listed if not p.startswith('/etc/')] == [
        str(home / '.obnam.conf'), str(home / '.obnam.yaml'),
        str(confdir / 'a.conf'), str(confdir / 'm.yaml'),
        str(confdir / 'z.yaml'), str(xdg / 'obnam' / 'x.yaml'),
        str(extra), str(extra)]


def test_yaml_config_file_in_home_is_read(home):
    (home / '.obnam.yaml').write_text('config:\n  keep: 5d\n')
    code, out, _ = run(['--dump-config'], home)
    assert (code, '\nkeep = 5d\n' in out) == (0, True)


def test_generate_manpage(home, tmp_path):
    template = tmp_path / 'obnam.1.in'
    template.write_text('.TH OBNAM 1\n.SH SYNOPSIS\n.SH OPTIONS\n.SH END\n')
    code, out, err = run(['--no-default-configs', '--generate-manpage',
                          str(template)], home)
    assert (code, err) == (0, '')
    assert out.startswith('.TH OBNAM 1\n.SH SYNOPSIS\n.nh\n.B obnam\n')
    assert '\n.br\n.B obnam\n.RI [ options ]\nbackup\n' \
        '.RI [ DIRECTORY | URL ]... ""\n' in out
    assert '\n.TP\n.BR \\-\\-generate\\-manpage =\\fITEMPLATE\n' \
        'fill in manual page TEMPLATE\n' in out
    assert '\n.SS "Logging"\n' in out and out.endswith('.SH END\n')


def test_manpage_template_bytes_that_are_not_utf8_pass_through(home,
                                                                tmp_path):
    template = tmp_path / 'obnam.1.in'
    template.write_bytes(b'.TH OBNAM 1\n.SH NAME\nobnam \xff\n')
    assert run_bytes(['--generate-manpage', str(template)], home) == \
        (0, template.read_bytes(), b'')


def test_obnam_profile_writes_a_profile(home, tmp_path):
    profile = tmp_path / 'obnam.prof'
    code, out, _ = run(['--no-default-configs', 'list-formats'], home,
                       env={'OBNAM_PROFILE': str(profile)})
    assert (code, out) == (0, '6\n')
    import pstats
    assert pstats.Stats(str(profile)).total_calls > 0


def test_obnam_profile_that_cannot_be_written_is_a_system_error(home,
                                                                tmp_path):
    profile = tmp_path / 'no-such-dir' / 'obnam.prof'
    out_file = tmp_path / 'out'
    assert run(['--no-default-configs', '--output', str(out_file),
                'list-formats'], home, env={'OBNAM_PROFILE': str(profile)}) \
        == (1, '', 'ERROR: RD5FA4X: System error: %s: 2: No such file or '
            'directory\n' % profile)
    assert out_file.read_text() == '6\n'


@pytest.mark.parametrize('progname, variable', [
    ('obnam', 'OBNAM_PROFILE'), ('/usr/bin/my-prog.py', 'MY_PROG_PROFILE'),
    ('a1é', 'A1__PROFILE'),
])
def test_profile_variable(progname, variable):
    assert application.profile_variable(progname) == variable


class Small(application.Application):

    def __init__(self):
        super().__init__('small', '0.1', description='A small program.',
                         stdout=io.StringIO(), stderr=io.StringIO())
        self.ran = []

    def cmd_do_it(self, args):
        """Do it.

        At length."""
        self.ran.append(('do-it', args))

    def add_settings(self):
        self.settings.boolean(['quiet'], 'be quiet')
        self.add_subcommand('other', self.other, arg_synopsis='[X]',
                            aliases=['o'], hidden=True)

    def other(self, args):
        self.ran.append(('other', args))


def test_subcommands_by_method_name_and_alias():
    app = Small()
    app.add_settings()
    app.process_args(['do-it', 'a'])
    app.process_args(['o', 'b'])
    assert app.ran == [('do-it', ['a']), ('other', ['b'])]
    with pytest.raises(application.UnknownSubcommand) as e:
        app.process_args(['nope'])
    assert str(e.value) == 'unknown subcommand nope'
    with pytest.raises(application.NoSubcommand) as e:
        app.process_args([])
    assert str(e.value) == 'must give subcommand'


def test_help_texts_in_process():
    app = Small()
    app.add_settings()
    app.add_default_subcommands()
    assert app.usage_text() == (     # `other` is hidden
        'Usage: %prog [options] do-it \n'
        '       %prog [options] help \n'
        '       %prog [options] help-all ')
    assert app.description_text() == (
        'A small program.\n* %prog do-it: Do it.\n* %prog help: Print help.\n'
        '* %prog help-all: Print help, including hidden subcommands.\n')
    assert '* %prog other: ' in app.description_text(show_all=True)
    app.output = io.StringIO()
    app.help(['do-it'])
    assert app.output.getvalue() == \
        'Usage: small [options] do-it \n\nDo it.\n\nAt length.\n'
    with pytest.raises(application.UnknownHelpSubcommand) as e:
        app.help(['nope'])
    assert str(e.value) == 'Unknown subcommand nope'


def test_uncoded_errors_have_pinned_codes_in_list_errors(home):
    """Errors 1.x printed without a code are printed so still, but
    list-errors names them with a code like every other error."""
    code, out, _ = run(['--no-default-configs', 'list-errors'], home)
    assert code == 0
    for entry in ('R1D5F9X UnknownConfigVariable', 'R958ECX NoSubcommand',
                  'RB13C2X ConfigFileUnreadable'):
        assert '* `%s`\n' % entry in out
    assert 'Uncoded' not in out and 'R00000X' not in out
    assert run(['--no-default-configs'], home) == \
        (1, '', 'ERROR: must give subcommand\n')


def test_an_application_reads_its_own_configuration_files():
    assert Small().config_files.paths[:2] == \
        ['/etc/small.conf', '/etc/small.yaml']
