"""What /proc says about other processes: alive or not, CPU time, the
sockets they listen on, and what is mounted.

gluster's daemons are not the bench's children (they detach), so their
CPU time and their sockets can only be read here.  The mount table is read
instead of stat'ing a mount point, which would hang on a stuck FUSE mount.
"""

import os
import re
import socket
import sys

# Socket states in /proc/net/{tcp,udp}[6]: a listening TCP socket, and an
# unconnected UDP one, which takes datagrams from anyone.
TCP_LISTEN = '0A'
UDP_UNCONNECTED = '07'
TABLES = (('tcp', TCP_LISTEN), ('tcp6', TCP_LISTEN),
          ('udp', UDP_UNCONNECTED), ('udp6', UDP_UNCONNECTED))


def _stat_fields(pid):
    """/proc/PID/stat's fields from the state on (field 3 is index 0), or
    None when the process is gone."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid):
    """Whether pid runs (a zombie has ended; it only awaits its reaper)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != 'Z'


def cpu_seconds(pids):
    """User+system time the live processes among pids spent themselves."""
    ticks = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            ticks += int(fields[11]) + int(fields[12])   # utime, stime
    return ticks / os.sysconf('SC_CLK_TCK')


def command_line(pid):
    """pid's argv ([] when it is gone)."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            raw = f.read()
    except OSError:
        return []
    return [a.decode(errors='replace') for a in raw.split(b'\0') if a]


def socket_inodes(pid):
    inodes = set()
    try:
        names = os.listdir('/proc/%d/fd' % pid)
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink('/proc/%d/fd/%s' % (pid, name))
        except OSError:
            continue
        if target.startswith('socket:['):
            inodes.add(int(target[len('socket:['):-1]))
    return inodes


def listening_sockets(pids, net='/proc/net'):
    """(table, address, port, pid) for each TCP socket that listens and
    each UDP socket open to anyone, of the processes pids."""
    owner = {inode: pid for pid in pids for inode in socket_inodes(pid)}
    found = []
    for table, state in TABLES:
        try:
            with open(os.path.join(net, table)) as f:
                text = f.read()
        except OSError:
            continue
        for address, port, inode in parse_net_table(text, state):
            if inode in owner:
                found.append((table, address, port, owner[inode]))
    return found


def parse_net_table(text, state):
    """(address, port, inode) of each socket in state, from the text of a
    /proc/net/{tcp,udp}[6] table."""
    rows = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != state:
            continue
        address, port = fields[1].split(':')
        rows.append((decode_address(address), int(port, 16), int(fields[9])))
    return rows


def decode_address(text, byteorder=sys.byteorder):
    """/proc/net's hex address: 32-bit words, each in host byte order."""
    raw = bytes.fromhex(text)
    if byteorder == 'little':
        raw = b''.join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, raw)


def mounted(path, mounts='/proc/self/mounts'):
    """Whether something is mounted on path, from the mount table."""
    wanted = os.path.join(os.path.realpath(os.path.dirname(path)),
                          os.path.basename(path))
    with open(mounts) as f:
        for line in f:
            fields = line.split()
            if len(fields) > 1 and _unescape(fields[1]) == wanted:
                return True
    return False


def _unescape(field):
    """The mount table writes space, tab, newline and backslash as \\ooo."""
    return re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), field)
