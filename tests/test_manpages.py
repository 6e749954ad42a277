"""The manual pages obnam ships: doc/obnam.1, made by tools/make-manpages
from doc/obnam.1.in and the program's own settings and commands, and the
hand-written doc/obnam.conf.5.  They must be current, render without a
warning, cover every command and setting, and be installed by the
Debian package and by pip.

Rendering needs man (man-db) or at least groff (groff-base), building
the package dpkg-buildpackage with debhelper and dh-python: where they
are missing the tests skip and say so.
"""

import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from obnamlib.version import __version__
from tests.paths import CHECKOUT, OBNAM

OBNAM_1 = os.path.join(CHECKOUT, 'doc', 'obnam.1')
OBNAM_CONF_5 = os.path.join(CHECKOUT, 'doc', 'obnam.conf.5')
PAGES = (OBNAM_1, OBNAM_CONF_5)


def run(argv, **kwargs):
    return subprocess.run(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          **kwargs)


def obnam(*args):
    p = run([sys.executable, OBNAM, '--no-default-configs'] + list(args))
    assert p.returncode == 0, p.stderr
    return p.stdout.decode()


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def setting_names():
    return obnam('--dump-setting-names').split()


def visible_commands():
    """The commands `obnam help` lists (hidden ones are not)."""
    return re.findall(r'^\* obnam ([^:]+):', obnam('help'), re.MULTILINE)


def troff(text):
    """A word as a manual page spells it."""
    return text.replace('-', '\\-')


def section(page, name):
    """The troff source of one `.SH` section."""
    match = re.search(r'^\.SH "?%s"?\n(.*?)(?=^\.SH )' % name, page,
                      re.MULTILINE | re.DOTALL)
    assert match, 'no section %s' % name
    return match.group(1)


# --- the generated page is current and complete ----------------------------

def test_obnam_1_is_what_make_manpages_makes_now():
    made = run([sys.executable,
                os.path.join(CHECKOUT, 'tools', 'make-manpages'), '-'],
               check=True).stdout.decode()
    assert made == read(OBNAM_1), \
        'doc/obnam.1 is stale: run tools/make-manpages and commit it'


def test_obnam_1_lists_every_setting_as_an_option():
    options = section(read(OBNAM_1), 'OPTIONS')
    assert 'repository' in setting_names()
    missing = [name for name in setting_names()
               if '.BR \\-\\-%s' % troff(name) not in options]
    assert missing == []


def test_obnam_1_explains_every_command():
    commands = section(read(OBNAM_1), 'COMMANDS')
    entries = re.findall(r'^\.TP\n(?:\.B |\\fB)([^\s\\]+(?:\\-[^\s\\]+)*)',
                         commands, re.MULTILINE)
    assert 'backup' in visible_commands()
    assert entries == [troff(c) for c in visible_commands()]


def test_obnam_1_gives_the_longer_help_of_backup():
    commands = section(read(OBNAM_1), 'COMMANDS')
    backup = commands.split('\\fBbackup\\fR ', 1)[1].split('\n.TP\n', 1)[0]
    assert 'Backup data to repository\n.IP\n' in backup
    assert 'checkpoint' in backup


def test_obnam_1_gives_the_keep_syntax():
    options = section(read(OBNAM_1), 'OPTIONS')
    keep = options.split('.BR \\-\\-keep', 1)[1].split('\n.TP\n', 1)[0]
    assert '(hourly)' in keep and '"24h,14d,8w,12m,10y"' in keep
    assert '.SH "RETENTION POLICY"' in read(OBNAM_1)


def test_obnam_1_carries_the_version():
    assert '.TH OBNAM 1 "" "obnam %s"' % __version__ in read(OBNAM_1)


# --- rendering ---------------------------------------------------------------

def renderer():
    """`man -l` where man is installed, else groff's man macros."""
    if shutil.which('man'):
        return ['man', '-l']
    if shutil.which('groff'):
        return ['groff', '-man', '-Tutf8']
    pytest.skip('neither man (Debian: man-db) nor groff (groff-base) is '
                'installed: cannot render the manual pages')


def render(path):
    env = dict(os.environ, MANWIDTH='80', MAN_KEEP_FORMATTING='',
               LC_ALL='C.UTF-8')
    p = run(renderer() + [path], env=env)
    assert p.returncode == 0, p.stderr
    assert p.stderr == b''
    return p.stdout.decode()


@pytest.mark.parametrize('path', PAGES, ids=os.path.basename)
def test_page_renders(path):
    text = render(path)
    assert 'NAME' in text and 'SEE ALSO' in text
    assert 'obnam' in text


@pytest.mark.parametrize('path', PAGES, ids=os.path.basename)
def test_page_has_no_troff_warnings(path):
    if not shutil.which('groff'):
        pytest.skip('groff is not installed (Debian: groff-base)')
    p = run(['groff', '-man', '-Tutf8', '-ww', '-z', path])
    assert (p.returncode, p.stderr) == (0, b'')


def test_obnam_1_renders_its_sections_and_options():
    text = render(OBNAM_1)
    for heading in ('SYNOPSIS', 'DESCRIPTION', 'COMMANDS', 'OPTIONS',
                    'RETENTION POLICY', 'EXIT STATUS', 'FILES', 'EXAMPLES'):
        assert re.search('^%s$' % heading, text, re.MULTILINE), heading
    assert '--keep=POLICY' in text
    assert 'nagios-last-backup-age' in text


# --- the examples in obnam.conf(5) work --------------------------------------

def literal_blocks(page):
    """The `.nf` ... `.fi` blocks, as the reader sees them."""
    blocks = re.findall(r'^\.nf\n(.*?)^\.fi$', page, re.MULTILINE | re.DOTALL)
    return [b.replace('\\-', '-').replace('\\e', '\\') for b in blocks]


@pytest.mark.parametrize('suffix', ['.yaml', '.conf'])
def test_obnam_conf_5_examples_are_read_without_complaint(tmp_path, suffix):
    blocks = [b for b in literal_blocks(read(OBNAM_CONF_5))
              if b.startswith('config:' if suffix == '.yaml' else '[config]')]
    assert len(blocks) == 1
    path = tmp_path / ('example' + suffix)
    path.write_text(blocks[0])
    p = run([sys.executable, OBNAM, '--no-default-configs', '--config',
             str(path), '--dump-config'])
    assert (p.returncode, p.stderr) == (0, b'')
    dumped = p.stdout.decode()
    assert 'repository = /srv/backup/obnam-repository\n' in dumped
    assert 'one-file-system = True\n' in dumped


# --- shipped by pip and by the Debian package --------------------------------

def source_copy(target, *names):
    """The named parts of the checkout, without build products."""
    os.makedirs(target)
    ignore = shutil.ignore_patterns('__pycache__', '*.pyc', '*.egg-info')
    for name in names:
        source = os.path.join(CHECKOUT, name)
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(target, name),
                            ignore=ignore)
        else:
            shutil.copy(source, target)
    return target


def test_wheel_installs_the_pages_below_share_man(tmp_path):
    try:
        import setuptools  # noqa: F401
    except ImportError:
        pytest.skip('setuptools is not installed (Debian: '
                    'python3-setuptools): cannot build a wheel')
    src = source_copy(str(tmp_path / 'src'), 'pyproject.toml', 'README',
                      'obnamlib', 'doc')
    out = tmp_path / 'out'
    out.mkdir()
    run([sys.executable, '-c', 'import sys; from setuptools import '
         'build_meta; build_meta.build_wheel(sys.argv[1])', str(out)],
        cwd=src, check=True)
    wheel, = out.iterdir()
    names = zipfile.ZipFile(wheel).namelist()
    data = [n.split('.data/data/', 1)[1] for n in names if '.data/' in n]
    assert sorted(data) == ['share/man/man1/obnam.1',
                            'share/man/man5/obnam.conf.5']


@pytest.mark.timeout(300)
def test_debian_package_installs_pages_completion_examples_manual(tmp_path):
    if not shutil.which('dpkg-buildpackage'):
        pytest.skip('dpkg-buildpackage is not installed (Debian: '
                    'dpkg-dev)')
    src = source_copy(str(tmp_path / 'src'), 'debian', 'bin', 'obnamlib',
                      'doc', 'examples', 'README', 'NEWS', 'COPYING')
    if run(['dpkg-checkbuilddeps'], cwd=src).returncode != 0:
        pytest.skip('the build dependencies are not installed '
                    '(Debian: debhelper dh-python)')
    p = run(['dpkg-buildpackage', '-us', '-uc', '-b'], cwd=src)
    assert p.returncode == 0, p.stdout.decode()[-3000:]
    deb, = tmp_path.glob('obnam_*_all.deb')
    listing = run(['dpkg-deb', '--fsys-tarfile', str(deb)], check=True)
    archive = tarfile.open(fileobj=io.BytesIO(listing.stdout))
    names = {n.lstrip('.') for n in archive.getnames()}
    expected = {
        '/usr/share/man/man1/obnam.1.gz',
        '/usr/share/man/man5/obnam.conf.5.gz',
        '/usr/share/bash-completion/completions/obnam',
        '/usr/share/doc/obnam/manual.md',
        '/usr/share/doc/obnam/examples/obnam.conf',
        '/usr/share/doc/obnam/examples/obnam-backup.service',
        '/usr/share/doc/obnam/examples/obnam-backup.timer',
        '/usr/share/doc/obnam/examples/obnam-forget.service',
        '/usr/share/doc/obnam/examples/obnam-forget.timer',
        '/usr/share/doc/obnam/examples/obnam.cron',
    }
    assert expected - names == set()
    page = archive.extractfile('./usr/share/man/man1/obnam.1.gz').read()
    assert gzip.decompress(page) == read(OBNAM_1).encode()
