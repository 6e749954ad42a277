"""Exclusion patterns as cli.md §7 describes them."""

import pytest

from obnamlib import errors
from obnamlib.engine import pathname_excluder as pe
from obnamlib.vfs import local as vfs_local


def excluder(exclude=(), include=()):
    ex = pe.PathnameExcluder()
    for p in exclude:
        ex.exclude(p)
    for p in include:
        ex.include(p)
    return ex


@pytest.mark.parametrize('exclude, include, path, excluded', [
    ([r'\.mp3$'], [], b'/home/u/song.mp3', True),
    ([r'\.mp3$'], [], b'/home/u/song.mp3.txt', False),
    (['foo'], [], b'/x/foo/bar', True),          # any component
    (['foo'], [], b'/x/afoob', True),            # searched, not anchored
    (['^/home'], [], b'/data/home', False),
    (['Foo'], [], b'/x/foo', False),             # case-sensitive
    (['home'], [], b'/home/u', True),            # root itself testable
    (['cache'], ['important'], b'/u/cache/important.txt', False),
    (['cache'], ['important'], b'/u/cache/other.txt', True),
    ([], ['anything'], b'/u/x', False),
    ([''], [], b'/u/x', False),                  # empty pattern ignored
    (['a', 'b'], [], b'/b', True),
    ([r'\xff'], [], b'/bad\xffname', True),     # bytes paths
])
def test_is_excluded(exclude, include, path, excluded):
    assert excluder(exclude, include).is_excluded(path) is excluded


def test_excluding_pattern_names_the_pattern():
    ex = excluder([r'\.o$', 'tmp'])
    assert ex.excluding_pattern(b'/src/tmp/a.o') == r'\.o$'
    assert ex.excluding_pattern(b'/src/a.c') is None


def test_bad_pattern_is_reported_not_raised():
    ex = excluder(['(unclosed', 'ok'], ['[bad'])
    assert [e.pattern for e in ex.errors] == ['(unclosed', '[bad']
    assert str(ex.errors[0]).startswith(
        pe.ExcludePatternError.code +
        ": Bad exclude pattern '(unclosed': "
        "missing ), unterminated subpattern")
    assert ex.is_excluded(b'/x/ok')
    assert not ex.is_excluded(b'/x/(unclosed')


def test_exclude_from_file(tmp_path):
    f = tmp_path / 'ex'
    f.write_bytes(b'# comment\n\n  \\.bak$  \nsecret\n   # indented hash\n')
    assert pe.read_exclude_file(str(f)) == [r'\.bak$', 'secret']


def test_missing_exclude_from_file_is_rce08ax(tmp_path):
    with pytest.raises(errors.ObnamIOError) as info:
        pe.read_exclude_file(str(tmp_path / 'nope'))
    assert str(info.value) == (
        'RCE08AX: I/O error: %s: 2: No such file or directory'
        % (tmp_path / 'nope'))


def test_from_settings_order_and_log_file(tmp_path):
    f = tmp_path / 'ex'
    f.write_bytes(b'fromfile\n')
    ex = pe.from_settings({'exclude-from': [str(f)], 'exclude': ['cli'],
                           'include': ['keep'], 'log': '/var/log/obnam.log'})
    assert [r.pattern for r in ex.excludes] == [
        b'fromfile', b'cli', b'/var/log/obnam.log']
    assert ex.is_excluded(b'/var/log/obnam.log.1')     # rotated logs too
    assert ex.is_excluded(b'/var/log/obnamxlog')       # unescaped dot
    assert not ex.is_excluded(b'/x/cli/keep')


@pytest.mark.parametrize('log', ['', 'none', 'syslog', 'stderr'])
def test_non_file_logs_are_not_patterns(log):
    assert pe.from_settings({'log': log}).excludes == []


@pytest.mark.parametrize('content, valid', [
    (b'Signature: 8a477f597d28d172789f06886806bc55', True),
    (b'Signature: 8a477f597d28d172789f06886806bc55\n# made by x\n', True),
    (b'Signature: 8a477f597d28d172789f06886806bc5', False),
    (b'signature: 8a477f597d28d172789f06886806bc55', False),
    (b'', False),
])
def test_cachedir_tag(tmp_path, content, valid):
    (tmp_path / 'CACHEDIR.TAG').write_bytes(content)
    fs = vfs_local.LocalFS('/')
    assert pe.is_cache_directory(fs, str(tmp_path).encode()) is valid


def test_no_cachedir_tag(tmp_path):
    fs = vfs_local.LocalFS('/')
    assert pe.is_cache_directory(fs, str(tmp_path).encode()) is False
