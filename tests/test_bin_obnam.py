"""bin/obnam, the script that starts obnam from a checkout and from the
Debian package: where it finds obnamlib, and the one line it prints when a
Python module obnam needs is missing."""

import glob
import os
import shutil
import subprocess
import sys

import pytest

from obnamlib.version import __version__

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OBNAM = os.path.join(CHECKOUT, 'bin', 'obnam')

pytestmark = pytest.mark.timeout(120)


def run(argv, tmp_path, env=None):
    """Run argv; return (exit code, stdout bytes, stderr bytes)."""
    full_env = {'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path),
                'LC_ALL': 'C.UTF-8'}
    full_env.update(env or {})
    p = subprocess.run(argv, env=full_env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


HIDING = '''
import runpy, sys
sys.modules[%r] = None      # as if it were not installed
sys.argv = [%r, '--version']
runpy.run_path(sys.argv[0], run_name='__main__')
'''


@pytest.mark.parametrize('module, debian, pip', [
    ('yaml', 'python3-yaml', 'PyYAML'),
    ('cryptography', 'python3-cryptography', 'cryptography'),
    ('paramiko', 'python3-paramiko', 'paramiko'),
])
def test_missing_module_named_in_one_line(tmp_path, module, debian, pip):
    code = HIDING % (module, OBNAM)
    assert run([sys.executable, '-c', code], tmp_path) == (
        1, b'',
        b'obnam: missing Python module %s: install the Debian package %s '
        b'(or the pip package %s)\n'
        % (module.encode(), debian.encode(), pip.encode()))


def test_optional_modules_are_not_required(tmp_path):
    """ttystatus (progress), pyfuse3 and trio (mount) are optional; cliapp
    and python-gnupg are not used at all."""
    checks = ''.join('sys.modules[%r] = None\n' % m for m in
                     ('ttystatus', 'pyfuse3', 'trio', 'cliapp', 'gnupg'))
    code = 'import sys\n' + checks + (HIDING % ('no-such-module', OBNAM))
    assert run([sys.executable, '-c', code], tmp_path) == (
        0, (__version__ + '\n').encode(), b'')


def test_checkout_obnamlib_comes_first(tmp_path):
    """Another obnamlib on PYTHONPATH does not hide the checkout's."""
    decoy = tmp_path / 'decoy' / 'obnamlib'
    decoy.mkdir(parents=True)
    (decoy / '__init__.py').write_text('raise SystemExit("decoy obnamlib")\n')
    assert run([sys.executable, OBNAM, '--version'], tmp_path,
               env={'PYTHONPATH': str(decoy.parent)}) == (
        0, (__version__ + '\n').encode(), b'')


def test_a_symlink_to_the_script_finds_the_checkout(tmp_path):
    link = tmp_path / 'somewhere' / 'obnam'
    link.parent.mkdir()
    link.symlink_to(OBNAM)
    assert run([sys.executable, str(link), '--version'], tmp_path) == (
        0, (__version__ + '\n').encode(), b'')


def test_installed_script_finds_the_private_directory(tmp_path):
    """As the Debian package installs it: PREFIX/bin/obnam and
    PREFIX/share/obnam/obnamlib."""
    prefix = tmp_path / 'usr'
    (prefix / 'bin').mkdir(parents=True)
    shutil.copy(OBNAM, prefix / 'bin' / 'obnam')
    private = prefix / 'share' / 'obnam' / 'obnamlib'
    private.mkdir(parents=True)
    (private / '__init__.py').write_text('')
    (private / 'cli').mkdir()
    (private / 'cli' / '__init__.py').write_text('')
    (private / 'cli' / 'app.py').write_text(
        'def main():\n    print("private obnamlib at", __file__)\n')
    code, out, err = run([sys.executable, str(prefix / 'bin' / 'obnam')],
                         tmp_path)
    assert (code, out, err) == (
        0, b'private obnamlib at %s\n' % str(private / 'cli' / 'app.py').encode(),
        b'')


def pyenv_python(version):
    """A pyenv Python `version` (e.g. '2.7') on this machine, or None."""
    root = os.environ.get('PYENV_ROOT', os.path.expanduser('~/.pyenv'))
    found = glob.glob(os.path.join(root, 'versions', version + '.*', 'bin',
                                   'python'))
    return max(found) if found else None


@pytest.mark.parametrize('version', ['2.7', '3.9'])
def test_too_old_python_is_named_in_one_line(tmp_path, version):
    python = pyenv_python(version)
    if python is None:
        pytest.skip('no Python %s from pyenv here' % version)
    assert run([python, OBNAM, '--version'], tmp_path) == (
        1, b'', b'obnam: needs Python 3.10 or later, not %s\n'
        % version.encode())


def test_missing_obnamlib_is_named_in_one_line(tmp_path):
    """The script copied on its own, away from any obnamlib."""
    lone = tmp_path / 'lone' / 'bin' / 'obnam'
    lone.parent.mkdir(parents=True)
    shutil.copy(OBNAM, lone)
    prefix = str(tmp_path / 'lone')
    # -S: no site-packages, where a pip install (the venv of ./check) has one.
    assert run([sys.executable, '-S', str(lone), '--version'], tmp_path) == (
        1, b'',
        b'obnam: cannot find the obnamlib package: not in %s or '
        b'%s/share/obnam, nor on the module path\n'
        % (prefix.encode(), prefix.encode()))
