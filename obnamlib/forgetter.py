"""Removing generations and what only they used (cli.md §5.10, §11).

Which generations go is decided first, completely, before anything is
removed: explicit generation specs (all resolved up front, so a bad one
removes nothing) or a retention policy (obnamlib.forget_policy).  Then,
holding every lock of the repository, each generation is removed and
committed on its own: first the client (the generation disappears, and
with it the B-tree nodes only it referenced), then the chunk indexes,
whose commit deletes the chunk files no client uses any more.  A forget
killed at any moment therefore leaves every kept generation whole; at
worst some chunks of a removed generation stay behind unused.
"""

from obnamlib import forget_policy
from obnamlib import listing
from obnamlib import repo_interface as ri


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
    before anything is removed (R0B15DX names the bad one).  Returns
    (decisions oldest first, gen_ids to remove in argument order)."""
    chosen = []
    for spec in specs:
        gen_id = repo.interpret_generation_spec(client_name, spec)
        if gen_id not in chosen:
            chosen.append(gen_id)
    decisions = [
        Decision(gen_id, repo.make_generation_spec(gen_id),
                 end_time(repo, gen_id),
                 [] if gen_id in chosen else ['not named'])
        for gen_id in repo.get_generation_ids(client_name)]
    return decisions, chosen


def remove_generations(repo, client_name, gen_ids, progress=None):
    """Remove gen_ids in order, one commit per generation, freeing chunks
    that no remaining generation of any client uses.  The caller holds
    repo.lock_everything(); this ends with commit_everything (on an error
    the caller's unlock discards only the removal under way).
    progress(done, total) is called after each removal."""
    protected = chunks_of_other_clients(repo, client_name)
    for done, gen_id in enumerate(gen_ids, 1):
        _remove_one(repo, client_name, gen_id, protected,
                    last=done == len(gen_ids))
        if progress is not None:
            progress(done, len(gen_ids))
    repo.commit_everything()


def chunks_of_other_clients(repo, client_name):
    """Chunk ids that other clients' generations use.  The indexes should
    say so already (an entry per user), but repositories whose writers
    did not index re-used chunks exist; a chunk another client uses is
    never offered for deletion, whatever the indexes say."""
    used = set()
    for other in repo.get_client_names():
        if other != client_name:
            for gen_id in repo.get_generation_ids(other):
                used |= repo.get_generation_chunk_ids(gen_id)
    return used


def _remove_one(repo, client_name, gen_id, protected, last):
    """The client commit comes first: once a generation is gone, nothing
    needs the chunks the index commit then deletes."""
    candidates = repo.get_generation_chunk_ids(gen_id) - protected
    repo.remove_generation(gen_id)
    repo.remove_unused_chunks(client_name, candidates)
    if last:
        return      # commit_everything does it, in the same order
    repo.commit_client(client_name)
    repo.commit_chunk_indexes()
    repo.lock_client(client_name)
    repo.lock_chunk_indexes()
