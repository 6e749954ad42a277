"""Opening the repository for a command, with the locks it needs.

A command says how much it locks: nothing (read commands), its own client,
or everything (forget, fsck).  Whatever happens inside the block, the
repository is closed at the end, which discards uncommitted changes and
releases every lock this process still holds; a command commits inside the
block when it has finished its changes.

A stale lock broken on the way (lockmgr) is told to `on_stale_lock`, one
line (the command's ui.error: stderr); the log hears of it in any case.
"""

import contextlib
import logging

from obnamlib.repo import factory as repo_factory

LOCK_LEVELS = ('none', 'client', 'everything')


@contextlib.contextmanager
def opened_repository(settings, lock='none', create=False, client_name=None,
                      on_stale_lock=None, **overrides):
    """Yield an open Repository holding the locks of level `lock`."""
    if lock not in LOCK_LEVELS:
        raise ValueError('unknown lock level %r' % (lock,))
    repo = repo_factory.open_repository(settings, create=create, **overrides)
    tell_of_stale_locks(repo, on_stale_lock)
    try:
        _take_locks(repo, lock, client_name or _setting(settings, 'client-name'))
        yield repo
    except BaseException:
        _close_quietly(repo)
        raise
    repo.close()


def tell_of_stale_locks(repo, notice):
    """Have the repository's lock manager report the locks it breaks."""
    repo.locks.on_break = notice


def _take_locks(repo, lock, client_name):
    if lock == 'client':
        repo.lock_client(client_name)
    elif lock == 'everything':
        repo.lock_everything()


def _setting(settings, name):
    try:
        return settings[name]
    except (KeyError, TypeError):
        return None


def _close_quietly(repo):
    """Release locks; an error here must not hide the command's error."""
    try:
        repo.close()
    except Exception:
        logging.warning('Could not release repository locks cleanly',
                        exc_info=True)
