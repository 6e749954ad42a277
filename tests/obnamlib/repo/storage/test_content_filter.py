"""ContentFilter and SecondProcess on their own, without a RepositoryFS
(test_repo_fs and test_cipher_process test them through it)."""

import pytest

from obnamlib.repo.storage import content_filter, second_process
from tests.obnamlib.repo.storage.test_filters import XorCipher
from tests.obnamlib.repo.storage.test_repo_fs import PassphraseTable


@pytest.mark.parametrize('path, filtered, toplevel', [
    ('chunks/0/0/0/1', True, 'chunks'),
    ('./clientlist//metadata', True, 'clientlist'),
    ('metadata/format', False, 'metadata'),
    ('123/key', False, '123'),
    ('chunks/userkeys', False, 'chunks'),
    ('lock', False, 'lock'),
    ('/metadata/format', False, 'metadata'),
    ('metadata/./format', False, 'metadata'),
    ('metadata/format/', False, 'metadata'),
    ('123//key', False, '123'),
])
def test_which_files_are_filtered_and_their_toplevel(path, filtered,
                                                     toplevel):
    assert content_filter.is_filtered(path) == filtered
    assert content_filter.toplevel_of(path) == toplevel


@pytest.mark.parametrize('path', [
    'chunks/0/0/0/1', './a', 'a/./b', '/a/b', 'a//b', 'a/b/', '.', '',
    'a/.hidden', 'a/b..c/'])
def test_normalise_is_the_path_without_empty_or_dot_components(path):
    assert content_filter.normalise(path) == '/'.join(
        part for part in path.split('/') if part not in ('', '.'))


def test_format5_filters_its_format_file():
    assert content_filter.is_filtered('metadata/format', format5=True)


def test_wrap_encrypts_with_the_toplevels_key_prepared_once():
    keys = PassphraseTable({'chunks': 'k1'})
    chain = content_filter.ContentFilter(keys=keys, cipher=XorCipher())
    first = chain.wrap('chunks/1', b'one')
    second = chain.wrap('chunks/2', b'two')
    assert first.startswith(b'encrypt1\0') and first.endswith(b'k1')
    assert keys.prepared == ['chunks']
    assert chain.unwrap('chunks/2', second) == b'two'
    assert chain.wrap('chunks/key', b'k') == b'k'


def test_format5_is_never_wrapped():
    chain = content_filter.ContentFilter(format5=True)
    with pytest.raises(content_filter.Format5IsReadOnly):
        chain.wrap('metadata/format', b'5\n')


def test_a_few_files_asked_ahead_start_no_process():
    second = second_process.SecondProcess(base=None,
                                          keys=PassphraseTable({}))
    second.read_ahead(['chunks/1', 'chunks/2'], in_line_limit=64)
    assert second.process is None
    assert second.take('chunks/1') is None
    second.close()


def test_wrap_from_several_threads_gives_what_one_thread_gives():
    """A chunk writer's worker may wrap beside the backup's thread."""
    import threading
    keys = PassphraseTable({'chunks': 'k1', 'other': 'k2'})
    chain = content_filter.ContentFilter(compress=True, keys=keys,
                                         cipher=XorCipher())
    items = [('%s/%d' % (top, i), b'text %d\n' % i * (200 + 50 * i))
             for i in range(40) for top in ('chunks', 'other')]
    start = threading.Barrier(4)
    results = [None] * 4

    def work(k):
        start.wait()
        results[k] = [chain.wrap(path, data) for path, data in items]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    one = content_filter.ContentFilter(compress=True, keys=keys,
                                       cipher=XorCipher())
    assert results == [[one.wrap(p, d) for p, d in items]] * 4
    assert sorted(keys.prepared) == ['chunks', 'chunks', 'other', 'other']
    for (path, data), stored in zip(items, results[0]):
        assert chain.unwrap(path, stored) == data
