"""Removing generations and what only they used (cli.md §5.10, §11).

Which generations go is decided first, completely, before anything is
removed: explicit generation specs (all resolved up front, so a bad one
removes nothing) or a retention policy (obnamlib.engine.forget_policy).  Then,
holding every lock of the repository, each generation is removed and
committed on its own: first the client (the generation disappears, and
with it the B-tree nodes only it referenced), then the chunk indexes,
whose commit deletes the chunk files no client uses any more.  A forget
killed at any moment therefore leaves every kept generation whole; at
worst some chunks of a removed generation stay behind unused, and the
client's next forget frees them (its marker says it must look:
Repository.begin_forget).  What a removal frees, in bytes of chunk files,
is chunk_usage's to predict (--pretend) and to count (a Freed given to
remove_generations).  A backup run's checkpoint generations go the same
way once the run has committed (remove_checkpoints).
"""

from obnamlib import errors
from obnamlib.engine import chunk_usage, forget_policy
from obnamlib.engine import listing
from obnamlib.repo import interface as ri


AFTER_PRETEND_TIME = 'after --pretend-time'


class Decision:
    """One generation of the client and what forget does with it."""

    def __init__(self, gen_id, spec, end_time, reasons):
        self.gen_id = gen_id
        self.spec = spec
        self.end_time = end_time
        self.reasons = reasons      # why it is kept; empty: it is forgotten

    @property
    def keep(self):
        return bool(self.reasons)

    def line(self):
        """`GENID<TAB>END TIME<TAB>keep hourly 1/12, daily 1/7` or `forget`."""
        verdict = ('keep ' + ', '.join(self.reasons)) if self.reasons \
            else 'forget'
        return '%s\t%s\t%s' % (self.spec, listing.local_time(self.end_time),
                               verdict)


def end_time(repo, gen_id):
    """When the generation ended (its start if it never did)."""
    ended = repo.get_generation_key(gen_id, ri.GEN_ENDED)
    if ended is None:
        ended = repo.get_generation_key(gen_id, ri.GEN_STARTED)
    return ended or 0


def decide_by_policy(repo, client_name, policy, as_of=None):
    """A Decision per generation of the client, oldest first.  With as_of
    (Unix time, from --pretend-time) the policy is applied as on that
    date: generations that ended later are kept and not counted."""
    gen_ids = repo.get_generation_ids(client_name)
    times = [(gen_id, end_time(repo, gen_id)) for gen_id in gen_ids]
    considered = [(gen_id, ended) for gen_id, ended in times
                  if as_of is None or ended <= as_of]
    reasons = forget_policy.explain(policy, considered)
    return [Decision(gen_id, repo.make_generation_spec(gen_id), ended,
                     reasons.get(gen_id, [AFTER_PRETEND_TIME]))
            for gen_id, ended in times]


def decide_by_specs(repo, client_name, specs):
    """Decisions for explicitly named generations; every spec is resolved
    before anything is removed (R0B15DX names the bad one).  A generation
    that existed and is gone (a killed forget's rerun names it again) is
    no error.  Returns (decisions oldest first, gen_ids to remove in
    argument order, the specs of generations already gone)."""
    chosen = []
    gone = []
    for spec in specs:
        try:
            gen_id = repo.interpret_generation_spec(client_name, spec)
        except errors.RepositoryGenerationDoesNotExist:
            if not repo.generation_spec_was_used(client_name, spec):
                raise
            if spec not in gone:
                gone.append(spec)
            continue
        if gen_id not in chosen:
            chosen.append(gen_id)
    decisions = [
        Decision(gen_id, repo.make_generation_spec(gen_id),
                 end_time(repo, gen_id),
                 [] if gen_id in chosen else ['not named'])
        for gen_id in repo.get_generation_ids(client_name)]
    return decisions, chosen, gone


def remove_generations(repo, client_name, gen_ids, progress=None,
                       freed=None):
    """Remove gen_ids in order, one commit per generation, freeing chunks
    that no remaining generation of any client uses.  The caller holds
    repo.lock_everything(); this ends with commit_everything (on an error
    the caller's unlock discards only the removal under way).
    progress(done, total) is called after each removal.  freed: a
    chunk_usage.Freed that gets the bytes of the chunk files the
    repository removes (looked up before they go)."""
    guard = _SharedChunkGuard(repo, client_name, gen_ids)
    _remove_leftovers(repo, client_name, guard, freed)
    for done, gen_id in enumerate(gen_ids, 1):
        _remove_one(repo, client_name, gen_id, guard, freed)
        if done < len(gen_ids):
            _commit_and_relock(repo, client_name)
        if progress is not None:
            progress(done, len(gen_ids))
    repo.finish_forget(client_name)
    repo.commit_everything()


def remove_checkpoints(repo, client_name, gen_ids):
    """Remove a backup run's checkpoint generations after its last
    commit, as forget removes generations (other clients' chunks guarded;
    the forget marker placed, so the client's next forget sweeps what a
    killed removal leaves, and a killed forget's entries swept now), in
    one commit.  The chunk files a killed backup left are not looked for:
    the run's last commit has just removed those it did not reuse.  The
    caller holds repo.lock_everything(); this ends with commit_everything.
    The chunks the run's last generation uses stay, so only the others
    are looked at (usually none: then no other generation is read)."""
    guard = _SharedChunkGuard(repo, client_name, gen_ids)
    _sweep_after_killed_forget(repo, client_name, guard)
    last = [g for g in repo.get_generation_ids(client_name)
            if int(g) not in guard.doomed][-1:]
    spared = repo.get_generation_chunk_ids(last[0]) if last else frozenset()
    for gen_id in gen_ids:
        _remove_one(repo, client_name, gen_id, guard, None, spared)
    repo.finish_forget(client_name)
    repo.commit_everything()


def _remove_leftovers(repo, client_name, guard, freed):
    """What a killed forget (index entries no generation of the client
    uses) or a killed backup of the client (chunk files nothing names)
    left goes with this forget's commits."""
    unused_files = []
    if freed is not None:
        unused_files = repo.find_forget_leftovers(client_name)[1]
    removed = _sweep_after_killed_forget(repo, client_name, guard)
    if freed is not None:
        freed.note_leftovers(set(removed) | set(unused_files))
    repo.remove_leftover_chunks(client_name)


def _sweep_after_killed_forget(repo, client_name, guard):
    """Place the client's forget marker; if a killed forget's was there,
    drop the client's index entries no generation of it uses.  Returns
    the ids of the chunks that go."""
    stale = repo.begin_forget(client_name)
    if not stale:
        return []
    guard.protect(stale)
    return repo.remove_unused_chunks(client_name, stale)


class _SharedChunkGuard:
    """Keeps chunks alive that other clients' generations use.

    The indexes should hold an entry per client using a chunk, but
    repositories whose writers did not index re-used chunks exist; if
    this client dropped the only entry of a chunk another client uses,
    the chunk file would be deleted under that client.  So before a
    chunk this client may stop using is dropped, an entry for one other
    client that uses it is (re)recorded.  Chunks the generations this
    forget keeps still use need nothing.  Who uses what is read at the
    first chunk to protect: a removal that drops none reads nothing."""

    def __init__(self, repo, client_name, gen_ids):
        self.repo = repo
        self.client_name = client_name
        self.doomed = set(int(g) for g in gen_ids)
        self.users = None       # chunk id -> another client using it
        self.kept = set()

    def _read_users(self):
        self.users = chunk_usage.other_clients_chunks(
            self.repo, self.client_name)
        if self.users:
            for gen_id in self.repo.get_generation_ids(self.client_name):
                if int(gen_id) not in self.doomed:
                    self.kept |= self.repo.get_generation_chunk_ids(gen_id)

    def protect(self, chunk_ids):
        if chunk_ids and self.users is None:
            self._read_users()
        for chunk_id in sorted(chunk_ids):
            user = self.users.get(chunk_id)
            if user is None or chunk_id in self.kept:
                continue
            try:
                self.repo.put_chunk_into_indexes(chunk_id, None, user)
            except errors.RepositoryChunkDoesNotExist:
                pass    # already gone; nothing left to protect


def _remove_one(repo, client_name, gen_id, guard, freed, spared=frozenset()):
    """Remove the generation and the client's index entries of the
    chunks no other generation of it uses (committed later).  spared:
    chunks known to stay in use by the client, not looked at."""
    candidates = repo.get_generation_chunk_ids(gen_id) - spared
    guard.protect(candidates)
    repo.remove_generation(gen_id)
    removed = repo.remove_unused_chunks(client_name, candidates)
    if freed is not None:
        freed.note_generation(gen_id, removed)


def _commit_and_relock(repo, client_name):
    """The client commit comes first, as in commit_everything: once a
    generation is gone, nothing needs the chunks the index commit then
    deletes."""
    repo.commit_client(client_name)
    repo.commit_chunk_indexes()
    repo.lock_client(client_name)
    repo.lock_chunk_indexes()
