"""Running a program with a pseudo-terminal as its controlling terminal,
for tests of what goes to /dev/tty and what to stdout/stderr."""

import os
import sys


def run_on_terminal(argv, directory, columns=80, redirect=(1, 2)):
    """Run this Python with argv on a fresh pseudo-terminal, the file
    descriptors in `redirect` going to files in `directory`; returns
    (terminal bytes, {fd: bytes written to it}, exit code)."""
    import pty
    paths = {target: os.path.join(str(directory), 'fd%d' % target)
             for target in redirect}
    pid, fd = pty.fork()
    if pid == 0:    # pragma: no cover (child)
        try:
            _become(argv, paths, columns)
        finally:
            os._exit(127)   # never a second pytest on the terminal
    terminal = b''
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        terminal += chunk
    _, status = os.waitpid(pid, 0)
    written = {}
    for target, path in paths.items():
        with open(path, 'rb') as f:
            written[target] = f.read()
    return terminal, written, os.waitstatus_to_exitcode(status)


def _become(argv, paths, columns):
    """In the forked child: size the terminal, redirect, exec."""
    import fcntl
    import struct
    import termios
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', 24, columns, 0, 0))
    for target, path in paths.items():
        fd_out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd_out, target)
    os.execve(sys.executable, [sys.executable] + argv,
              {'TERM': 'xterm', 'PATH': '/usr/bin:/bin'})
