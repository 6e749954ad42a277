"""mount: a read-only FUSE view of the generations (§5.13).

What the mount shows lives in obnamlib.engine.fuse_view, and how the
kernel's requests reach it in obnamlib.cli.fuse_operations (pyfuse3:
libfuse 3, Debian package python3-pyfuse3; the FUSE 2 binding
python3-fuse cannot report nanosecond times).  Here we parse
`--fuse-opt`, check the binding is there, and either serve in the
foreground (`-f`) or in a child process that the command waits for until
the mount is in place.
"""

import logging
import os
import signal

from obnamlib import errors
from obnamlib.engine import fuse_view
from obnamlib.cli import plugin

GROUP = 'Mounting with FUSE'
DEBIAN_PACKAGE = 'python3-pyfuse3'


class FuseModuleNotFoundError(errors.ObnamError):
    code = 'RABC26X'
    msg = 'Failed to load module "{module}", try installing {package}'


class NoMountPointError(errors.ObnamError):
    code = 'R6A2EFX'
    msg = 'The mount command wants an existing directory set with --to'


class MountFailedError(errors.ObnamError):
    code = 'RFB792X'
    msg = 'Could not mount on {mountpoint}: {reason}'


def load_binding():
    """The pyfuse3 and trio modules, or RABC26X naming the package."""
    try:
        import pyfuse3
        import trio
    except ImportError as e:
        raise FuseModuleNotFoundError(module=e.name or 'pyfuse3',
                                      package=DEBIAN_PACKAGE)
    return pyfuse3, trio


def parse_fuse_options(values):
    """--fuse-opt values -> (set of mount options, foreground?, debug?).
    A value is `-f`, `-d`, `-o OPTS`, `-oOPTS` or plain `OPTS`, where OPTS
    is comma-separated; `ro` is always added (and `rw` dropped)."""
    options = {'ro', 'fsname=obnam', 'subtype=obnam'}
    foreground = debug = False
    for value in values:
        for word in value.split():
            if word == '-f':
                foreground = True
            elif word == '-d':
                foreground = debug = True
            elif word == '-o':
                continue
            else:
                if word.startswith('-o'):
                    word = word[2:]
                options.update(o for o in word.split(',') if o)
    options.discard('rw')
    if 'debug' in options:
        options.discard('debug')
        foreground = debug = True
    return options, foreground, debug


class FusePlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.string_list(
            ['fuse-opt'], 'options to pass directly to FUSE', metavar='FUSE',
            group=GROUP)
        self.app.add_subcommand('mount', self.mount, arg_synopsis='[ROOT]')

    def mount(self, args):
        """Mount backup repository as a user-space filesystem"""
        pyfuse3, trio = load_binding()
        settings = self.app.settings
        mountpoint = settings['to']
        if not mountpoint or not os.path.isdir(mountpoint):
            raise NoMountPointError()
        options, foreground, _ = parse_fuse_options(settings['fuse-opt'])
        client_name = settings['client-name']
        from obnamlib.repo import factory as repo_factory
        view = fuse_view.BackupView(
            lambda: repo_factory.open_repository(settings), client_name)
        logging.info('Mounting %s generations of %s on %s',
                     len(view.generations), client_name, mountpoint)
        if foreground:
            serve(pyfuse3, trio, view, mountpoint, options)
        else:
            serve_in_background(pyfuse3, trio, view, mountpoint, options)


def serve(pyfuse3, trio, view, mountpoint, options):
    """Mount, answer requests until unmounted (or SIGINT/SIGTERM)."""
    operations = _operations(view)
    try:
        pyfuse3.init(operations, mountpoint, options)
    except RuntimeError as e:
        raise MountFailedError(mountpoint=mountpoint, reason=str(e))
    _serve_mounted(pyfuse3, trio, view)


def _serve_mounted(pyfuse3, trio, view):
    signal.signal(signal.SIGTERM, lambda *_: pyfuse3.terminate())
    try:
        trio.run(pyfuse3.main)
    except KeyboardInterrupt:
        pass
    finally:
        pyfuse3.close(unmount=True)
        view.close()


def serve_in_background(pyfuse3, trio, view, mountpoint, options):
    """Fork; the child mounts, tells the parent how it went, detaches and
    serves.  The parent returns once the mount is there (or fails)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        with os.fdopen(read_end, 'rb') as report:
            outcome = report.read().decode('utf-8', 'replace')
        if outcome != 'ok':
            os.waitpid(pid, 0)
            raise MountFailedError(mountpoint=mountpoint,
                                   reason=outcome or 'server died')
        return
    os.close(read_end)
    status = 0
    try:
        os.setsid()
        view.pid = os.getpid()
        operations = _operations(view)
        try:
            pyfuse3.init(operations, mountpoint, options)
        except RuntimeError as e:
            os.write(write_end, str(e).encode('utf-8') or b'mount failed')
            os._exit(1)
        os.write(write_end, b'ok')
        os.close(write_end)
        _detach_stdio()
        _serve_mounted(pyfuse3, trio, view)
    except BaseException:
        logging.exception('FUSE server failed')
        status = 1
    finally:
        logging.shutdown()
        os._exit(status)


def _detach_stdio():
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _operations(view):
    """The pyfuse3 Operations serving view: its module needs pyfuse3, so it
    is imported now, once load_binding has found the binding."""
    from obnamlib.cli import fuse_operations
    return fuse_operations.Operations(view)
