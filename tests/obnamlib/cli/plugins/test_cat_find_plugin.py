"""`obnam cat` and `obnam find` as people run them: bytes out, errors,
exit codes."""

import os
import re
import subprocess
import sys

import pytest

from tests.obnamlib import restore_helpers as rh
from tests import paths

CHUNK = 4096


def obnam(tmp_path, *args):
    """(exit code, stdout bytes, stderr text) of one obnam run."""
    argv = [sys.executable, paths.OBNAM, '--no-default-configs',
            '--client-name', rh.CLIENT, '--repository', str(tmp_path / 'repo'),
            '--log', str(tmp_path / 'obnam.log')]
    argv += [os.fsencode(a) if isinstance(a, bytes) else str(a) for a in args]
    result = subprocess.run(argv, capture_output=True,
                            env=dict(os.environ, LC_ALL='C.UTF-8'))
    return result.returncode, result.stdout, result.stderr.decode()


def make_sparse(path):
    with open(path, 'wb') as f:
        f.seek(3 * CHUNK)
        f.write(os.urandom(100))
        f.truncate(8 * CHUNK)


@pytest.fixture
def live(tmp_path):
    live = tmp_path / 'live'
    (live / 'dir').mkdir(parents=True)
    (live / 'empty').write_bytes(b'')
    (live / 'one').write_bytes(os.urandom(1))
    (live / 'chunks').write_bytes(os.urandom(5 * CHUNK + 123))
    make_sparse(live / 'sparse')
    with open(os.fsencode(str(live)) + b'/na\xefve', 'wb') as f:
        f.write(os.urandom(300))
    os.mkfifo(live / 'fifo')
    return live


@pytest.fixture
def backed_up(tmp_path, live):
    repo, gen = rh.back_up(tmp_path / 'repo', live, chunk_size=CHUNK)
    return repo, gen


def live_bytes(live, name):
    with open(os.fsencode(str(live)) + b'/' + name, 'rb') as f:
        return f.read()


@pytest.mark.parametrize('name', [b'empty', b'one', b'chunks', b'sparse',
                                  b'na\xefve'])
def test_cat_writes_the_file_byte_for_byte(tmp_path, live, backed_up, name):
    code, out, err = obnam(tmp_path, 'cat',
                           os.fsencode(str(live)) + b'/' + name)
    assert (code, err) == (0, '')
    assert out == live_bytes(live, name)


def test_cat_of_several_files_and_to_output(tmp_path, live, backed_up):
    target = tmp_path / 'out'
    code, out, err = obnam(tmp_path, 'cat', '--output', target,
                           live / 'one', live / 'chunks')
    assert (code, out, err) == (0, b'', '')
    assert target.read_bytes() == live_bytes(live, b'one') + \
        live_bytes(live, b'chunks')


def test_cat_of_an_older_generation(tmp_path, live, backed_up):
    repo, first = backed_up
    old = (live / 'one').read_bytes()
    (live / 'one').write_bytes(b'changed')
    rh.back_up(tmp_path / 'repo', live, chunk_size=CHUNK)
    assert obnam(tmp_path, 'cat', live / 'one')[1] == b'changed'
    code, out, err = obnam(tmp_path, 'cat', '--generation',
                           repo.make_generation_spec(first), live / 'one')
    assert (code, out, err) == (0, old, '')


@pytest.mark.parametrize('name, error', [
    ('nosuch', r'R3E151X: Client client, generation \d+ does not have file '
               r'\S+/live/nosuch'),
    ('dir', r'R39C5AX: \S+/live/dir is a directory in generation \d+; only '
            r'a regular file can be written out \(restore or ls a '
            r'directory\)'),
    ('fifo', r'RD6A69X: \S+/live/fifo is a FIFO in generation \d+; '
             r'only a regular file can be written out'),
])
def test_cat_refuses_what_is_not_a_regular_file(tmp_path, live, backed_up,
                                                name, error):
    code, out, err = obnam(tmp_path, 'cat', live / 'one', live / name)
    assert (code, out) == (1, b'')       # nothing written before the check
    assert re.fullmatch('ERROR: (%s)\n' % error, err), err


def test_cat_without_a_file(tmp_path, backed_up):
    assert obnam(tmp_path, 'cat') == (
        1, b'', 'ERROR: REAB9EX: The cat command wants the name of a file '
        '(obnam cat FILE...)\n')


def test_cat_with_two_generations(tmp_path, live, backed_up):
    assert obnam(tmp_path, 'cat', '--generation', 'latest', '--generation',
                 'latest', live / 'one') == (
        1, b'', 'ERROR: R70078X: The cat command wants exactly one '
        'generation option\n')


def test_cat_of_a_damaged_file_says_so(tmp_path, live, backed_up):
    repo, gen = backed_up
    rh.flip_last_bit(rh.file_chunk(repo, gen, tmp_path / 'repo',
                                   live / 'chunks', index=2))
    code, out, err = obnam(tmp_path, 'cat', live / 'chunks')
    assert code == 1
    assert len(out) == len(live_bytes(live, b'chunks'))
    assert err.startswith('ERROR: RDF0F1X: Backed-up data of %s does not '
                          'match its checksum' % (live / 'chunks'))


# --- find ---------------------------------------------------------------

@pytest.fixture
def history(tmp_path, live):
    """Three generations; `one` is in the first and the third."""
    gens = [rh.back_up(tmp_path / 'repo', live)[1]]
    saved = (live / 'one').read_bytes()
    (live / 'one').unlink()
    gens.append(rh.back_up(tmp_path / 'repo', live)[1])
    (live / 'one').write_bytes(saved)
    repo, gen = rh.back_up(tmp_path / 'repo', live)
    return [repo.make_generation_spec(g) for g in gens + [gen]]


def lines(*pairs):
    return b''.join(os.fsencode(spec) + b'\t' + os.fsencode(str(path)) + b'\n'
                    for spec, path in pairs)


def test_find_lists_every_generation_that_holds_the_file(tmp_path, live,
                                                         history):
    code, out, err = obnam(tmp_path, 'find', 'one')
    assert (code, err) == (0, '')
    assert out == lines((history[0], live / 'one'), (history[2], live / 'one'))


def test_find_in_chosen_generations(tmp_path, live, history):
    code, out, err = obnam(tmp_path, 'find', '--generation', history[1],
                           '--generation', 'latest', str(live) + '/o*')
    assert (code, err) == (0, '')
    assert out == lines((history[2], live / 'one'))


def test_find_with_nothing_found_exits_1(tmp_path, history):
    assert obnam(tmp_path, 'find', '*.jpg') == (1, b'', '')
    assert obnam(tmp_path, 'find', '--generation', history[1], 'one') == \
        (1, b'', '')


def test_find_a_name_that_is_not_utf8(tmp_path, live, history):
    code, out, err = obnam(tmp_path, 'find', b'*\xef*')
    name = os.fsencode(str(live)) + b'/na\xefve'
    assert (code, err) == (0, '')
    assert out == b''.join(os.fsencode(g) + b'\t' + name + b'\n'
                           for g in history)


def test_find_without_a_pattern(tmp_path, history):
    assert obnam(tmp_path, 'find') == (
        1, b'', 'ERROR: R59E73X: The find command wants at least one '
        'pattern (obnam find PATTERN...)\n')


def test_find_for_an_unknown_client(tmp_path, history):
    code, out, err = obnam(tmp_path, 'find', '--client-name', 'nobody', 'x')
    assert (code, out) == (1, b'')
    assert err.startswith('ERROR: R1CA00X: Client nobody does not exist')


def test_help_explains_the_patterns_and_the_format(tmp_path):
    code, out, err = obnam(tmp_path, 'help', 'find')
    assert (code, err) == (0, '')
    text = b' '.join(out.split()).decode()
    assert 'a pattern with / matches its whole absolute path' in text
    assert 'the generation id, a TAB, and the path' in text
