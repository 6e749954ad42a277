"""fsck against injected damage, one fault at a time (issue: fsck).

A repository with two clients and several generations (deflate on, so that
B-tree nodes carry zlib's checksum; small nodes, so that trees have several
levels; small chunks, so that files have several) is copied once per fault;
the fault is injected into the copy; then:

* fsck must report at least one problem (no fault passes as clean);
* every file of every generation either reads back exactly as before, or
  fsck named it (its path or an ancestor's, or the B-tree or client list
  that hides it);
* for a damaged chunk, fsck names every file that uses it.
"""

import collections
import concurrent.futures
import contextlib
import hashlib
import os
import random
import shutil
import subprocess

from obnamlib import larch
import pytest

from obnamlib import errors
from obnamlib.repo.storage import filters
from obnamlib.engine import background_md5, fsck_content, fsck_engine
from obnamlib.repo import factory as repo_factory
from tests import paths

OBNAM = paths.OBNAM
CLIENTS = ('alpha', 'beta')
SHARED_FORESTS = {'clientlist': 25, 'chunklist': 8, 'chunksums': 48}


def obnam(repo, client, *args):
    subprocess.run(
        [OBNAM, '--no-default-configs', '-r', str(repo), '--client-name',
         client, '--compress-with=deflate', '--node-size=4096',
         '--chunk-size=16384', '--lock-timeout=0', '--quiet'] + list(args),
        check=True, capture_output=True)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(data)


def make_live(root, rng, round_):
    shared = bytes(rng.getrandbits(8) for _ in range(40000))
    write(os.path.join(root, 'shared.bin'), shared)
    write(os.path.join(root, 'copy', 'shared-again.bin'), shared)
    for i in range(12):
        size = rng.choice([0, 10, 3000, 20000, 50000])
        data = bytes(rng.getrandbits(8) for _ in range(size))
        write(os.path.join(root, 'd%d' % (i % 3), 'f%d-%d' % (i, round_)),
              data)
    os.symlink('shared.bin', os.path.join(root, 'link-%d' % round_))


@pytest.fixture(scope='module')
def pristine(tmp_path_factory):
    base = tmp_path_factory.mktemp('fsck-inject')
    repo = base / 'repo'
    rng = random.Random(7)
    for client in CLIENTS:
        live = base / ('live-' + client)
        for round_ in range(2):
            make_live(str(live), rng, round_)
            obnam(repo, client, 'backup', str(live))
    expected = read_everything(repo)
    assert check(repo) == []
    return repo, expected


def open_repo(path):
    return repo_factory.open_repository(url=str(path), lock_timeout=0)


def check(path, **options):
    repo = open_repo(path)
    try:
        return fsck_engine.Fsck(repo, fsck_engine.FsckOptions(**options)).run()
    finally:
        repo.close()


def read_everything(path):
    """{(client, gen, path): sha1 or an error text} of every regular file."""
    found = {}
    repo = open_repo(path)
    try:
        for client in CLIENTS:
            try:
                gens = repo.get_generation_ids(client)
            except (errors.ObnamError, larch.Error) as e:
                found[(client, None, None)] = 'error: %s' % e
                continue
            for gen in gens:
                read_generation(repo, client, gen, found)
    finally:
        repo.close()
    return found


def read_generation(repo, client, gen, found):
    number = repo.make_generation_spec(gen)
    stack = [b'/']
    while stack:
        path = stack.pop()
        try:
            md = repo.get_metadata(gen, path)
            if md.isdir():
                stack.extend(os.path.join(path, c)
                             for c in repo.get_file_children(gen, path))
            elif md.isreg():
                data = b''.join(repo.get_chunk_content(c) for c in
                                repo.get_file_chunk_ids(gen, path))
                found[(client, number, path)] = hashlib.sha1(data).hexdigest()
        except (errors.ObnamError, larch.Error) as e:
            found[(client, number, path)] = 'error: %s' % e


# --- faults ------------------------------------------------------------------

def files_under(repo, top, part):
    result = []
    for dirpath, _, names in os.walk(os.path.join(repo, top)):
        rel = os.path.relpath(dirpath, repo)
        if '/new' in '/' + rel or '/delete' in '/' + rel:
            continue
        for name in names:
            if name in ('key', 'userkeys', 'lock') or name.startswith('tmp'):
                continue
            path = os.path.join(rel, name)
            if part == 'nodes' and '/nodes/' in '/' + path:
                result.append(path)
            elif part == 'refcounts' and '/refcounts/' in '/' + path:
                result.append(path)
            elif part == 'chunks' and top == 'chunks':
                result.append(path)
            elif part == 'metadata' and path == top + '/metadata':
                result.append(path)
    return sorted(result)


def delete(repo, rel, other):
    os.remove(os.path.join(repo, rel))


def truncate(repo, rel, other):
    path = os.path.join(repo, rel)
    os.truncate(path, os.path.getsize(path) // 2)


def flip(repo, rel, other):
    path = os.path.join(repo, rel)
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write(flipped(rel, data))


def flipped(rel, data):
    """data with one bit flipped where it changes what the file says.

    Some bits of a deflate stream (code lengths of unused symbols) change
    nothing when flipped; such a flip is no damage, so we move on to the
    next byte.  In a forest's metadata we flip inside root_ids: its
    node_size line is informational and last_id may legally be larger."""
    start = len(data) // 2
    if rel.endswith('/metadata') and b'root_ids = ' in data:
        start = data.index(b'root_ids = ') + len(b'root_ids = ')
    for position in range(start, len(data)):
        candidate = bytearray(data)
        candidate[position] ^= 0x04
        if decoded(candidate) != decoded(data):
            return bytes(candidate)
    raise AssertionError('no bit of %s changes its content' % rel)


def decoded(data):
    try:
        return filters.unwrap(bytes(data), None, filename='x')
    except errors.ObnamError as e:
        return e.code


def swap(repo, rel, other):
    a, b = os.path.join(repo, rel), os.path.join(repo, other)
    tmp = a + '.swap'
    os.rename(a, tmp)
    os.rename(b, a)
    os.rename(tmp, b)


FILE_FAULTS = (delete, truncate, flip, swap)


def client_forests(repo):
    return sorted(name for name in os.listdir(repo) if name.isdigit())


def file_fault_cases(repo):
    cases = []
    forests = list(SHARED_FORESTS) + client_forests(repo)
    chunk_files = files_under(repo, 'chunks', 'chunks')
    picks = chunk_files[::max(1, len(chunk_files) // 6)][:6]
    for rel in picks:
        other = chunk_files[(chunk_files.index(rel) + 1) % len(chunk_files)]
        cases += [(op, rel, other) for op in FILE_FAULTS]
    for forest in forests:
        nodes = files_under(repo, forest, 'nodes')
        for rel in (nodes[0], nodes[-1], nodes[len(nodes) // 2]):
            other = nodes[(nodes.index(rel) + 1) % len(nodes)]
            cases += [(op, rel, other) for op in FILE_FAULTS]
        refcounts = files_under(repo, forest, 'refcounts')[0]
        others = [f for f in forests if f != forest]
        other_refcounts = files_under(repo, others[0], 'refcounts')[0]
        cases += [(op, refcounts, other_refcounts) for op in FILE_FAULTS]
        cases += [(op, forest + '/metadata', others[0] + '/metadata')
                  for op in FILE_FAULTS]
    return cases


# --- what a fault may hide ---------------------------------------------------

def covered(report, client, gen, path):
    text = '\n'.join(report)
    if 'client %s' % client in text or 'clientlist' in text \
            or 'client list' in text:
        return True
    where = '%s:%s: ' % (client, gen)
    parts = path.split(b'/')
    for i in range(1, len(parts) + 1):
        prefix = b'/'.join(parts[:i]) or b'/'
        if where + prefix.decode() in text:
            return True
    return False


def assert_undamaged_files_read_back(repo, expected, report):
    now = read_everything(repo)
    for key, sha1 in expected.items():
        client, gen, path = key
        if now.get(key) == sha1:
            continue
        assert covered(report, client, gen, path), (
            'file %r changed (%s) but fsck did not say: %s'
            % (key, now.get(key), report))


def test_a_clean_repository_has_no_problems(pristine):
    repo, _ = pristine
    assert check(repo) == []


def test_every_file_fault_is_found(pristine):
    repo, expected = pristine
    cases = file_fault_cases(str(repo))
    assert len(cases) >= 100
    for op, rel, other in cases:
        with injected(str(repo), op, rel, other):
            report = check(repo)
            assert report, 'fsck missed %s of %s' % (op.__name__, rel)
            assert_undamaged_files_read_back(repo, expected, report)
            if rel.startswith('chunks/'):
                assert_chunk_users_named(repo, rel, report)
    assert check(repo) == []


@contextlib.contextmanager
def injected(repo, op, rel, other):
    """The fault, undone afterwards (copying the repository for every
    fault would cost more than all the checking: chunks sit in deep
    directories).  fsck without fixing writes only its lock files."""
    saved = {}
    for name in (rel, other):
        with open(os.path.join(repo, name), 'rb') as f:
            saved[name] = f.read()
    op(repo, rel, other)
    try:
        yield
    finally:
        for name, data in saved.items():
            write(os.path.join(repo, name), data)
        for name in (rel + '.swap',):
            if os.path.exists(os.path.join(repo, name)):
                os.remove(os.path.join(repo, name))


def assert_chunk_users_named(copy, rel, report):
    chunk_id = int(os.path.basename(rel), 16)
    text = '\n'.join(report)
    users = chunk_users(copy, chunk_id)
    assert users
    for client, gen, path in users:
        assert '%s:%s: %s' % (client, gen, path.decode()) in text, (
            '%s:%s %s uses %x; fsck said %s' % (client, gen, path,
                                                chunk_id, report))


def chunk_users(path, chunk_id):
    repo = open_repo(path)
    users = []
    try:
        for client in CLIENTS:
            for gen in repo.get_generation_ids(client):
                for file_path in files_of(repo, gen):
                    if chunk_id in repo.get_file_chunk_ids(gen, file_path):
                        users.append((client, repo.make_generation_spec(gen),
                                      file_path))
    finally:
        repo.close()
    return users


def files_of(repo, gen):
    stack = [b'/']
    while stack:
        path = stack.pop()
        md = repo.get_metadata(gen, path)
        if md.isdir():
            stack.extend(os.path.join(path, c)
                         for c in repo.get_file_children(gen, path))
        elif md.isreg():
            yield path


# --- index entries and journals ---------------------------------------------

def remove_index_entry(copy, forest_name, which):
    repo = open_repo(copy)
    forest = larch.open_forest(dirname=forest_name,
                               key_size=SHARED_FORESTS[forest_name],
                               node_size=4096, allow_writes=True,
                               vfs=repo.fs)
    tree = forest.trees[-1]
    pairs = list(tree.lookup_range(b'\0' * SHARED_FORESTS[forest_name],
                                   b'\xff' * SHARED_FORESTS[forest_name]))
    tree.remove(pairs[which % len(pairs)][0])
    forest.commit()


@pytest.mark.parametrize('forest_name', ['chunklist', 'chunksums'])
@pytest.mark.parametrize('which', [0, 7, -1])
def test_a_removed_index_entry_is_found_and_fixed(pristine, tmp_path,
                                                  forest_name, which):
    repo, expected = pristine
    copy = tmp_path / 'copy'
    shutil.copytree(repo, copy)
    remove_index_entry(copy, forest_name, which)
    report = check(copy)
    assert any(forest_name in line for line in report), report
    fixed = check(copy, fix=True, rm_unused=True)
    assert all(line.endswith('[fixed]') for line in fixed), fixed
    assert check(copy) == []
    assert read_everything(copy) == expected


def leave_rolled_back_journal(copy, forest):
    write(os.path.join(copy, forest, 'new', 'nodes', '0', '0', '0', 'fffff'),
          b'\0half-written node')


def leave_unfinished_commit(copy, forest):
    shutil.copy(os.path.join(copy, forest, 'metadata'),
                os.path.join(copy, forest, 'new', 'metadata'))


@pytest.mark.parametrize('journal', [leave_rolled_back_journal,
                                     leave_unfinished_commit])
def test_a_half_finished_journal_is_found_and_fixed(pristine, tmp_path,
                                                    journal):
    repo, expected = pristine
    for forest in list(SHARED_FORESTS) + client_forests(str(repo)):
        copy = tmp_path / forest
        shutil.copytree(repo, copy)
        os.makedirs(os.path.join(copy, forest, 'new'), exist_ok=True)
        journal(str(copy), forest)
        report = check(copy)
        assert any('journal' in line for line in report), report
        assert read_everything(copy) == expected
        check(copy, fix=True)
        assert check(copy) == []
        assert read_everything(copy) == expected
        shutil.rmtree(copy)


def test_fix_repairs_refcounts_without_losing_files(pristine, tmp_path):
    repo, expected = pristine
    for forest in list(SHARED_FORESTS) + client_forests(str(repo)):
        copy = tmp_path / forest
        shutil.copytree(repo, copy)
        delete(str(copy), files_under(str(copy), forest, 'refcounts')[0], None)
        assert check(copy)
        fixed = check(copy, fix=True)
        assert fixed and all(line.endswith('[fixed]') for line in fixed), fixed
        assert check(copy) == []
        assert read_everything(copy) == expected
        shutil.rmtree(copy)


def test_unused_chunk_is_reported_and_removed(pristine, tmp_path):
    repo, expected = pristine
    copy = tmp_path / 'copy'
    shutil.copytree(repo, copy)
    stray = os.path.join(copy, 'chunks', '1', '2', '3', 'abcdef')
    write(stray, b'\0not used by anyone')
    assert check(copy) == ['chunk abcdef not used by anyone']
    assert check(copy, rm_unused=True) == [
        'chunk abcdef not used by anyone; deleting']
    assert not os.path.exists(stray)
    assert check(copy) == []
    assert read_everything(copy) == expected


# --- how much fsck reads -----------------------------------------------------

def counted_check(path, **options):
    """fsck's problems and counters, and how often it read each file."""
    repo = open_repo(path)
    reads = collections.Counter()
    order = []
    read_file = repo.fs.read_file

    def counting(rel):
        reads[rel] += 1
        order.append(rel)
        return read_file(rel)

    repo.fs.read_file = counting
    try:
        fsck = fsck_engine.Fsck(repo, fsck_engine.FsckOptions(**options))
        return fsck.run(), fsck.stats, reads, order
    finally:
        repo.close()


def node_files(repo, forests):
    return sorted(f for forest in forests
                  for f in files_under(str(repo), forest, 'nodes'))


def chunk_reads(reads):
    return [r for r in reads if r.startswith('chunks/')]


def test_a_full_check_reads_every_node_and_chunk_exactly_once(pristine):
    repo, _ = pristine
    problems, stats, reads, order = counted_check(repo)
    assert problems == []
    forests = list(SHARED_FORESTS) + client_forests(str(repo))
    nodes = node_files(repo, forests)
    chunks = files_under(str(repo), 'chunks', 'chunks')
    assert sorted(r for r in reads if '/nodes/' in r) == nodes
    assert sorted(chunk_reads(reads)) == chunks
    # The client list is read once more before checking starts: taking
    # the clients' locks needs their ids.
    assert {reads[r] for r in nodes + chunks
            if not r.startswith('clientlist/')} == {1}
    assert stats.chunks == stats.chunk_reads == stats.chunks_total \
        == len(chunks)
    reader = open_repo(repo)
    try:
        content = sum(len(reader.get_chunk_content(int(os.path.basename(c),
                                                       16)))
                      for c in chunks)
    finally:
        reader.close()
    assert stats.chunk_bytes == content     # decoded bytes, not stored


def rising(names):
    """The share of neighbours in increasing order."""
    return sum(1 for a, b in zip(names, names[1:]) if a < b) / \
        (len(names) - 1)


def chunks_of_files_of_several_chunks(path):
    from obnamlib.repo.fmt_6.chunk_store import idpath
    repo = open_repo(path)
    try:
        return {idpath(c) for client in CLIENTS
                for gen in repo.get_generation_ids(client)
                for f in files_of(repo, gen)
                for c in repo.get_file_chunk_ids(gen, f)
                if len(repo.get_file_chunk_ids(gen, f)) > 1}
    finally:
        repo.close()


def test_chunks_are_read_in_the_order_the_format_asks_for(pristine,
                                                           monkeypatch):
    """Two streams, each in the format's order: the chunks of files of
    one chunk, and spread among them those of bigger files."""
    repo, _ = pristine
    _, _, _, order = counted_check(repo)
    big = chunks_of_files_of_several_chunks(repo)
    reads = chunk_reads(order)
    assert 0 < len(big & set(reads)) < len(set(reads))
    assert rising([r for r in reads if r in big]) >= 0.9
    assert rising([r for r in reads if r not in big]) >= 0.9
    # The order is the checker's (file names for format 6), not the walk's.
    from obnamlib.repo.fmt_6.fsck_checks import Fmt6Checker
    monkeypatch.setattr(Fmt6Checker, 'chunk_sort_key',
                        staticmethod(lambda chunk_id: -chunk_id))
    problems, _, _, order = counted_check(repo)
    assert problems == []
    assert rising(chunk_reads(order)) <= 0.75     # files ascend inside


def test_small_batches_still_name_every_user_of_a_damaged_chunk(
        pristine, monkeypatch):
    repo, _ = pristine
    monkeypatch.setattr(fsck_content, 'BATCH_CHUNK_IDS', 3)
    monkeypatch.setattr(fsck_content, 'SHARED_CHUNK_BYTES', 0)
    assert check(repo) == []
    chunk_files = files_under(str(repo), 'chunks', 'chunks')
    for rel in chunk_files[::max(1, len(chunk_files) // 4)]:
        with injected(str(repo), flip, rel, rel):
            report = check(repo)
            assert_chunk_users_named(repo, rel, report)


def test_skip_checksums_reads_no_chunk_but_finds_missing_ones(pristine):
    repo, _ = pristine
    problems, stats, reads, _ = counted_check(repo, skip_checksums=True)
    assert problems == [] and chunk_reads(reads) == []
    assert stats.chunk_reads == 0 and stats.files > 0
    rel = files_under(str(repo), 'chunks', 'chunks')[0]
    with injected(str(repo), flip, rel, rel):
        assert check(repo, skip_checksums=True) == []
    with injected(str(repo), delete, rel, rel):
        report = check(repo, skip_checksums=True)
        assert_chunk_users_named(repo, rel, report)


def test_ignore_chunks_reads_no_chunk_and_names_no_file(pristine):
    repo, _ = pristine
    problems, stats, reads, _ = counted_check(repo, ignore_chunks=True)
    assert problems == [] and chunk_reads(reads) == []
    rel = files_under(str(repo), 'chunks', 'chunks')[0]
    chunk_id = int(os.path.basename(rel), 16)
    with injected(str(repo), delete, rel, rel):
        report = check(repo, ignore_chunks=True)
    # Only the chunk indexes notice; no file's chunks were looked at.
    assert report and all(line.startswith(('chunklist:', 'chunksums:'))
                          for line in report), report
    assert all('%x' % chunk_id in line for line in report)


def test_last_generation_only_walks_one_generation_per_client(pristine):
    repo, _ = pristine
    _, full, _, _ = counted_check(repo)
    problems, last, reads, _ = counted_check(repo,
                                             last_generation_only=True)
    assert problems == []
    assert (full.clients, full.generations) == (2, 4)
    assert (last.clients, last.generations) == (2, 2)
    assert last.files < full.files
    assert 0 < last.chunk_reads < full.chunk_reads
    assert {reads[r] for r in chunk_reads(reads)} == {1}
    # A chunk only the older generations use is not read.
    old_only = chunks_of_older_generations_only(repo)
    assert old_only
    assert not set(chunk_reads(reads)) & old_only


def chunks_of_older_generations_only(path):
    from obnamlib.repo.fmt_6.chunk_store import idpath
    repo = open_repo(path)
    try:
        old, newest = set(), set()
        for client in CLIENTS:
            gens = repo.get_generation_ids(client)
            for gen in gens:
                used = set(c for f in files_of(repo, gen)
                           for c in repo.get_file_chunk_ids(gen, f))
                (newest if gen == gens[-1] else old).update(used)
        return {idpath(c) for c in old - newest}
    finally:
        repo.close()


def test_ignore_client_reads_nothing_of_that_client(pristine):
    repo, _ = pristine
    problems, stats, reads, _ = counted_check(repo, ignore_clients=('beta',))
    assert problems == []
    assert stats.clients == 1
    opened = open_repo(repo)
    try:
        beta_dir = str(opened.get_client_id('beta'))
    finally:
        opened.close()
    assert not [r for r in reads if r.startswith(beta_dir + '/nodes/')]
    # Damage to beta's forest is not looked for.
    rel = files_under(str(repo), beta_dir, 'nodes')[0]
    with injected(str(repo), flip, rel, rel):
        assert check(repo, ignore_clients=('beta',)) == []
        assert check(repo)


def test_the_engine_says_what_it_checks_in_order(pristine):
    class Recording(fsck_engine.SilentReporter):
        def __init__(self):
            self.phases = []

        def checking(self, text):
            self.phases.append(text)

    repo = open_repo(pristine[0])
    reporter = Recording()
    try:
        fsck_engine.Fsck(repo, reporter=reporter).run()
        gens = {c: [repo.make_generation_spec(g)
                    for g in repo.get_generation_ids(c)] for c in CLIENTS}
        regular_files = sum(len(list(files_of(repo, g))) for c in CLIENTS
                            for g in repo.get_generation_ids(c))
    finally:
        repo.close()
    walked = ['client %s generation %s (%d/2)' % (c, g, i + 1)
              for c in CLIENTS for i, g in enumerate(gens[c])]
    queued = int(reporter.phases[-3].split()[3])
    # Later generations queue only their changed files.
    assert 0 < queued <= regular_files
    assert reporter.phases == [
        'repository format and keys', 'B-trees'] + walked + [
        'the chunks of %d file(s)' % queued, walked[-1], 'chunk indexes']


def test_client_tree_problems_name_generations_by_their_ids(pristine,
                                                             tmp_path):
    repo, _ = pristine
    copy = tmp_path / 'copy'
    shutil.copytree(repo, copy)
    opened = open_repo(copy)
    try:
        forest = str(opened.get_client_id('alpha'))
        gens = {opened.make_generation_spec(g)
                for g in opened.get_generation_ids('alpha')}
    finally:
        opened.close()
    for rel in files_under(str(copy), forest, 'refcounts'):
        os.remove(os.path.join(copy, rel))
    report = check(copy)
    assert report
    named = set()
    for line in report:
        assert line.startswith('client alpha (forest %s): node ' % forest)
        inside = line.split('(generations ')[1].split(')')[0]
        named.update(inside.split(', '))
    assert named == gens


# --- later generations: only what changed ------------------------------------

def paths_with_changed_entries(repo, checker, old_gen, new_gen):
    """Brute force: every entry compared (not node by node), mapped to
    paths as the checker maps them."""
    lo, hi = b'\0' * 18, b'\xff' * 18
    old = dict(repo._generation(old_gen).tree.lookup_range(lo, hi))
    tree = repo._generation(new_gen).tree
    changed = [(key, value) for key, value in tree.lookup_range(lo, hi)
               if old.get(key) != value]
    return checker._paths_of(tree, changed)


def paths_that_differ(repo, old_gen, new_gen):
    """Through the public API: paths of new_gen whose metadata, listing
    or chunks are not those of old_gen."""
    def facts(gen, path):
        try:
            md = repo.get_metadata(gen, path)
        except errors.RepositoryFileDoesNotExistInGeneration:
            return None
        children = (repo.get_file_children(gen, path) if md.isdir()
                    else None)
        chunks = (repo.get_file_chunk_ids(gen, path) if md.isreg()
                  else None)
        return md, children, chunks

    differ, stack = set(), [b'/']
    while stack:
        path = stack.pop()
        new = facts(new_gen, path)
        if new != facts(old_gen, path):
            differ.add(path)
        for name in new[1] or ():
            stack.append(path.rstrip(b'/') + b'/' + name)
    return differ


def test_later_generations_check_exactly_the_changed_paths(pristine):
    from obnamlib.repo.fmt_6.fsck_checks import Fmt6Checker
    repo = open_repo(pristine[0])
    try:
        checker = Fmt6Checker(repo)
        for client in CLIENTS:
            first, second = repo.get_generation_ids(client)
            assert checker.changed_paths(client, first) is None
            changed = checker.changed_paths(client, second)
            assert changed == sorted(
                paths_with_changed_entries(repo, checker, first, second))
            differ = paths_that_differ(repo, first, second)
            assert any(p.endswith(b'/link-1') for p in differ)
            assert differ <= set(changed)
            # The second backup added files and a symlink; the files of
            # the first round did not change.
            assert any(p.endswith(b'/link-1') for p in changed)
            assert not any(p.endswith(b'-0') for p in changed)
    finally:
        repo.close()


def test_changed_paths_come_with_the_file_ids_a_name_lookup_finds(
        pristine):
    """Checking them then looks nothing up by name (a name's slot may be
    anywhere in the tree)."""
    from obnamlib.repo.fmt_6.client_tree import GenerationTree
    from obnamlib.repo.fmt_6.fsck_checks import Fmt6Checker
    repo = open_repo(pristine[0])
    try:
        checker = Fmt6Checker(repo)
        client = CLIENTS[0]
        first, second = repo.get_generation_ids(client)
        checker.changed_paths(client, first)
        changed = checker.changed_paths(client, second)
        generation = repo._generation(second)
        fresh = GenerationTree(generation.tree)
        assert changed
        for path in changed:
            assert generation.ids[path] == fresh.file_id(path)
    finally:
        repo.close()


def test_unchanged_files_are_not_looked_at_again(pristine, monkeypatch):
    repo, _ = pristine
    _, quick, _, _ = counted_check(repo)
    from obnamlib.repo.fmt_6.fsck_checks import Fmt6Checker
    monkeypatch.setattr(Fmt6Checker, 'changed_paths',
                        lambda self, client, gen: None)
    problems, full, _, _ = counted_check(repo)
    assert problems == []
    assert quick.generations == full.generations == 4
    assert quick.chunks == full.chunks
    assert quick.files < full.files


def test_the_chunk_indexes_are_never_loaded_whole(pristine, tmp_path,
                                                  monkeypatch):
    """Streamed and looked up: memory does not grow with the indexes."""
    from obnamlib.repo.fmt_6.chunk_indexes import ChunkIndexes

    def refuse(self):
        raise AssertionError('fsck loaded a whole chunk index')

    monkeypatch.setattr(ChunkIndexes, 'all_chunklist', refuse)
    monkeypatch.setattr(ChunkIndexes, 'all_chunksums', refuse)
    repo, expected = pristine
    assert check(repo) == []
    copy = tmp_path / 'copy'
    shutil.copytree(repo, copy)
    remove_index_entry(copy, 'chunksums', 3)
    assert any(line.startswith('chunksums: client ')
               for line in check(copy, fix=True))
    write(os.path.join(copy, 'chunks', '1', '2', '3', 'abcdef'), b'\0x')
    assert check(copy, rm_unused=True) == [
        'chunk abcdef not used by anyone; deleting']
    assert check(copy) == []


@pytest.mark.parametrize('options, expected', [
    ({}, [('expect', len(os.sched_getaffinity(0)) >= 2)]),
    ({'ignore_chunks': True}, [])])
def test_fsck_says_it_will_read_chunks_unless_told_to_ignore_them(
        pristine, options, expected):
    """In line (no helper process) where its second process may share
    the reads: two cores."""
    repo = open_repo(pristine[0])
    said = []
    repo.expect_chunk_reads = lambda in_line=False: said.append(
        ('expect', in_line))
    try:
        assert fsck_engine.Fsck(repo, fsck_engine.FsckOptions(
            **options)).run() == []
    finally:
        repo.close()
    assert said == expected


# --- whole-file MD5s in a worker thread ---------------------------------------

def test_whole_file_md5_through_the_worker_is_the_serial_one(monkeypatch):
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 100)
    rng = random.Random(3)
    pieces = [bytes(rng.getrandbits(8) for _ in range(size))
              for size in (300, 50, 1000, 100, 99, 400)]
    with concurrent.futures.ThreadPoolExecutor(1) as hasher:
        whole = fsck_content._WholeFile(hasher=hasher)
        for data in pieces:
            whole.update(data, hashlib.md5(data))
        assert whole.digest() == hashlib.md5(b''.join(pieces)).digest()
        assert whole.size == sum(map(len, pieces))


def test_damage_is_found_with_the_worker_hashing_every_chunk(
        pristine, monkeypatch):
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 0)
    repo, expected = pristine
    started = []
    real_executor = concurrent.futures.ThreadPoolExecutor

    def executor(*args, **kwargs):
        started.append(kwargs.get('thread_name_prefix'))
        return real_executor(*args, **kwargs)

    monkeypatch.setattr(background_md5.concurrent.futures,
                        'ThreadPoolExecutor', executor)
    monkeypatch.setattr(background_md5.os, 'sched_getaffinity',
                        lambda pid: {0, 1})
    chunk_digests = []
    real_digest = fsck_content._md5_digest
    monkeypatch.setattr(fsck_content, '_md5_digest',
                        lambda data: chunk_digests.append(1) or
                        real_digest(data))
    assert check(repo) == []
    assert started == ['obnam-md5']
    assert chunk_digests    # chunks' own MD5s too, their verdicts waiting
    cases = [case for case in file_fault_cases(str(repo))
             if case[1].startswith('chunks/')]
    for op, rel, other in cases:
        with injected(str(repo), op, rel, other):
            report = check(repo)
            assert report, 'fsck missed %s of %s' % (op.__name__, rel)
            assert_chunk_users_named(repo, rel, report)


def test_on_one_core_no_worker_is_started(pristine, monkeypatch):
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 0)
    monkeypatch.setattr(background_md5.os, 'sched_getaffinity',
                        lambda pid: {0})

    def refuse(*args, **kwargs):
        raise AssertionError('a worker thread on one core')

    monkeypatch.setattr(background_md5.concurrent.futures,
                        'ThreadPoolExecutor', refuse)
    repo, _ = pristine
    problems, stats, _, _ = counted_check(repo)
    assert problems == [] and stats.chunks > 0


def test_the_walk_lets_the_repository_forget_the_files_it_checked(
        pristine, monkeypatch):
    """Only directories' ids stay remembered (they guard against loops);
    a file's would cost memory for nothing."""
    from obnamlib.repo.fmt_6.fsck_checks import Fmt6Checker
    monkeypatch.setattr(Fmt6Checker, 'release_generation',
                        lambda self, gen_id: None)
    monkeypatch.setattr(fsck_engine, '_DONE_BATCH', 3)
    repo = open_repo(pristine[0])
    try:
        assert fsck_engine.Fsck(repo).run() == []
        for client in CLIENTS:
            first = repo.get_generation_ids(client)[0]
            remembered = list(repo._generation(first).ids)
            assert b'/' in remembered
            for path in remembered:
                assert repo.get_metadata(first, path).isdir(), path
    finally:
        repo.close()


# --- big files' chunks spread among small files ------------------------------

def test_big_files_chunks_are_spread_evenly_among_small_files():
    def item(count):
        return fsck_content._QueuedFile('f', 0, None, list(range(count)), b'',
                                        0)

    queued = [item(1), item(3), item(1), item(0), item(2), item(1)]
    steps = fsck_content._interleaved(queued)
    assert sorted(steps) == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0), (3, 0),
                             (4, 0), (4, 1), (5, 0)]
    assert [s for s in steps if s[0] in (1, 4)] == [
        (1, 0), (1, 1), (1, 2), (4, 0), (4, 1)]
    assert [s for s in steps if s[0] not in (1, 4)] == [
        (0, 0), (2, 0), (3, 0), (5, 0)]
    assert steps[:2] == [(0, 0), (1, 0)]    # spread, not all at the end
    assert fsck_content._interleaved([item(2), item(2)]) == [
        (0, 0), (0, 1), (1, 0), (1, 1)]
    assert fsck_content._interleaved([item(1), item(0)]) == [(0, 0), (1, 0)]


def test_problems_come_in_the_files_order_though_files_finish_out_of_it():
    said = []
    in_order = fsck_content._InOrder(said.append)
    in_order.done(1, ['b1', 'b2'])
    in_order.done(3)
    assert said == []
    in_order.done(0, ['a'])
    assert said == ['a', 'b1', 'b2']
    in_order.done(2, ['c'])
    assert said == ['a', 'b1', 'b2', 'c']


def test_a_file_damaged_twice_is_reported_as_on_one_core(
        pristine, monkeypatch):
    """With a chunk's verdict waiting for the worker, a later chunk of the
    same file may be read (and found damaged) first: only the first
    damaged chunk is reported, as when the chunks are checked in turn."""
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 0)
    repo, _ = pristine
    chunk_lists = []
    opened = open_repo(repo)
    try:
        from obnamlib.repo.fmt_6.chunk_store import idpath
        for client in CLIENTS:
            gen = opened.get_generation_ids(client)[0]
            for f in files_of(opened, gen):
                ids = opened.get_file_chunk_ids(gen, f)
                if len(ids) >= 3:
                    chunk_lists.append([idpath(c) for c in ids])
    finally:
        opened.close()
    assert len(chunk_lists) >= 2
    cases = []
    # A swapped chunk reads well but fails its checksum (the verdict waits
    # for the worker); a directory fails to read (at once).
    everything = sorted(set(p for paths in chunk_lists for p in paths))
    for paths in chunk_lists[:3]:
        if len(set(paths[:3])) < 3:
            continue
        elsewhere = [p for p in everything if p not in paths]
        cases.append([(swap, paths[0], elsewhere[0]),
                      (directory, paths[2], None)])
        cases.append([(swap, paths[0], elsewhere[0]),
                      (swap, paths[1], elsewhere[1])])
    assert cases
    for faults in cases:
        reports = []
        for cores in ({0}, {0, 1}):
            monkeypatch.setattr(background_md5.os, 'sched_getaffinity',
                                lambda pid, cores=cores: cores)
            with contextlib.ExitStack() as stack:
                for op, rel, other in faults:
                    stack.enter_context(
                        made_a_directory(str(repo), rel) if op is directory
                        else injected(str(repo), op, rel, other))
                opened = open_repo(repo)
                try:
                    fsck = fsck_engine.Fsck(opened)
                    reports.append((fsck.run(), fsck.stats.chunks,
                                    fsck.stats.problems))
                finally:
                    opened.close()
        assert reports[0][0], faults
        assert reports[0] == reports[1], faults


def directory(repo, rel, other):
    """A fault made by made_a_directory."""


@contextlib.contextmanager
def made_a_directory(repo, rel):
    path = os.path.join(repo, rel)
    with open(path, 'rb') as f:
        saved = f.read()
    os.remove(path)
    os.mkdir(path)
    try:
        yield
    finally:
        os.rmdir(path)
        write(path, saved)


def test_a_run_of_equal_chunks_is_read_once_while_its_verdict_waits(
        tmp_path, monkeypatch):
    """A sparse file's zeros: one chunk, many times in a row."""
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 0)
    monkeypatch.setattr(background_md5.os, 'sched_getaffinity',
                        lambda pid: {0, 1})
    hashed = []
    real = fsck_content._md5_digest

    def counting(data):
        hashed.append(len(data))
        return real(data)

    monkeypatch.setattr(fsck_content, '_md5_digest', counting)
    live, repo = tmp_path / 'live', tmp_path / 'repo'
    write(str(live / 'zeros'), bytes(16384 * 20))
    obnam(repo, 'alpha', 'backup', str(live))
    problems, stats, reads, _ = counted_check(repo)
    assert problems == []
    assert stats.chunks == len(chunk_reads(reads)) == 1
    assert hashed == [16384]
    assert set(reads[r] for r in chunk_reads(reads)) == {1}

