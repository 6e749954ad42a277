"""Who holds a lock file, and whether that holder is gone.

Obnam 1.x only checks that a lock file exists (1.10 and later write it
empty; format-6.md §9), so our lock files name their holder in lines
nobody else reads:

    obnam-lock
    host=HOSTNAME           socket.gethostname() of the writer
    pid=PID
    time=2026-12-06T21:55:10Z
    boot_id=UUID            /proc/sys/kernel/random/boot_id
    start=TICKS             /proc/PID/stat field 22: when PID started
    pidns=pid:[INODE]       /proc/self/ns/pid: whose pids these are
    token=HEX               one per LockManager: tells our own locks apart

A holder on this host is gone when the host has booted since, when no
process has its pid (or only a zombie), or when the process with its pid
started at another time (the pid was reused).  Whatever we cannot judge
(an empty 1.x lock, another host, a container of the same name with pids
of its own, an unreadable file) counts as held: only a person can tell,
with force-lock.
"""

import calendar
import collections
import functools
import os
import socket
import time

MAGIC = 'obnam-lock'
TIME_FORMAT = '%Y-%m-%dT%H:%M:%SZ'
MAX_HOST_LENGTH = 255                 # a DNS name's limit

Holder = collections.namedtuple(
    'Holder', 'host pid time boot_id start token pidns')
Holder.__new__.__defaults__ = ('',)


class ThisHost:
    """What a lock's holder is compared with; tests substitute their own.
    The boot id and pid namespace cannot change while we run: read once."""

    def host(self):
        return socket.gethostname()

    @functools.lru_cache(maxsize=None)
    def boot_id(self):
        try:
            with open('/proc/sys/kernel/random/boot_id') as f:
                return f.read().strip()
        except OSError:
            return ''

    @functools.lru_cache(maxsize=None)
    def pid_namespace(self):
        try:
            return os.readlink('/proc/self/ns/pid')
        except OSError:
            return ''

    def own_start(self):
        """When this process started: read once (per pid, as a forked
        child is another process)."""
        return self._start_once(os.getpid())

    @functools.lru_cache(maxsize=None)
    def _start_once(self, pid):
        return self.process_start(pid) or ''

    def process_start(self, pid):
        """When process pid started ('' if unknown), None if no process
        (or only a zombie) has that pid."""
        try:
            with open('/proc/%d/stat' % pid, 'rb') as f:
                data = f.read()
        except FileNotFoundError:
            if _has_proc():
                return None
            return _exists_by_signal(pid)
        except OSError:
            return _exists_by_signal(pid)
        fields = data[data.rindex(b')') + 2:].split()
        if fields[0] in (b'Z', b'X'):
            return None
        return fields[19].decode('ascii')


@functools.lru_cache(maxsize=None)
def _has_proc():
    """Whether /proc tells of processes: without it (not mounted in a
    chroot, another system) a missing /proc/PID says nothing."""
    return os.path.exists('/proc/self/stat')


def _exists_by_signal(pid):
    """Without /proc: does a process with pid exist?  ('' = yes)"""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return None     # OverflowError: no pid_t is that large
    except OSError:
        pass            # EPERM: it exists, owned by someone else
    return ''


THIS_HOST = ThisHost()


def content(token, this_host=THIS_HOST, now=None):
    """The lock file content for this process."""
    pid = os.getpid()
    lines = [MAGIC,
             'host=%s' % this_host.host(),
             'pid=%d' % pid,
             'time=%s' % time.strftime(TIME_FORMAT, time.gmtime(now)),
             'boot_id=%s' % this_host.boot_id(),
             'start=%s' % this_host.own_start(),
             'pidns=%s' % this_host.pid_namespace(),
             'token=%s' % token]
    return ('\n'.join(lines) + '\n').encode('utf-8', 'surrogateescape')


def parse(data):
    """The Holder a lock file names, or None (Obnam 1.x: empty, or 1.x
    before 1.10: no host; a file still being written, whose last line
    is not complete: its pid may be cut short; anything else we do not
    understand)."""
    if not data.endswith(b'\n'):
        return None
    lines = data.decode('utf-8', 'replace').splitlines()
    if not lines or lines[0] != MAGIC:
        return None
    fields = dict(line.partition('=')[::2] for line in lines[1:])
    try:
        pid = int(fields['pid'])
    except (KeyError, ValueError):
        return None
    if not _plausible_host(fields.get('host', '')) or not 0 < pid < 2 ** 31:
        return None
    return Holder(fields['host'], pid, fields.get('time', ''),
                  fields.get('boot_id', ''), fields.get('start', ''),
                  fields.get('token', ''), fields.get('pidns', ''))


def _plausible_host(host):
    """A host name we can compare and show: a damaged or hostile file's
    megabyte of text or terminal escapes must not reach the error (nor
    a pid of a thousand digits: pid_t is 32 bits)."""
    return 0 < len(host) <= MAX_HOST_LENGTH and host.isprintable()


def why_gone(holder, this_host=THIS_HOST):
    """Why the holder can no longer hold the lock, or None if it may."""
    if holder.host != this_host.host():
        return None
    pidns = this_host.pid_namespace()
    if holder.pidns and pidns and holder.pidns != pidns:
        return None
    boot_id = this_host.boot_id()
    if holder.boot_id and boot_id and holder.boot_id != boot_id:
        return 'the host has restarted since'
    start = this_host.process_start(holder.pid)
    if start is None:
        return 'process %d is not running' % holder.pid
    if holder.start and start and holder.start != start:
        return 'process %d is another program now' % holder.pid
    return None


def describe(holder, now=None):
    """'host H, pid P, for 5 min' for messages."""
    text = 'host %s, pid %d' % (holder.host, holder.pid)
    age = age_seconds(holder, now)
    if age is not None:
        text += ', for %s' % humanise_age(age)
    return text


def age_seconds(holder, now=None):
    try:
        taken = calendar.timegm(time.strptime(holder.time, TIME_FORMAT))
    except ValueError:
        return None
    return max(0, int((time.time() if now is None else now) - taken))


def humanise_age(seconds):
    if seconds < 120:
        return '%d s' % seconds
    if seconds < 2 * 3600:
        return '%d min' % (seconds // 60)
    if seconds < 2 * 86400:
        return '%d h' % (seconds // 3600)
    return '%d days' % (seconds // 86400)
