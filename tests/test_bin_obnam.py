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
    (private / 'app.py').write_text(
        'def main():\n    print("private obnamlib at", __file__)\n')
    code, out, err = run([sys.executable, str(prefix / 'bin' / 'obnam')],
                         tmp_path)
    assert (code, out, err) == (
        0, b'private obnamlib at %s\n' % str(private / 'app.py').encode(),
        b'')


def old_python():
    """A Python older than 3.10 on this machine (pyenv's), or None."""
    root = os.environ.get('PYENV_ROOT', os.path.expanduser('~/.pyenv'))
    for path in sorted(glob.glob(os.path.join(root, 'versions', '3.9*',
                                              'bin', 'python3'))):
        return path
    return None


def test_too_old_python_is_named_in_one_line(tmp_path):
    python = old_python()
    if python is None:
        pytest.skip('no Python 3.9 from pyenv here')
    code, out, err = run([python, OBNAM, '--version'], tmp_path)
    assert (code, out) == (1, b'')
    assert err.startswith(b'obnam: needs Python 3.10 or later, not 3.9\n')
