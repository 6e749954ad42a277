"""Repository files over SFTP: whole files read and written with every
request in flight, replaced atomically, created exclusively (chunks and
locks)."""

import errno
import logging
import os
import uuid

from obnamlib.errors import LockFail, ObnamError
from obnamlib.vfs.sftp import codec
from obnamlib.vfs.sftp.codec import int64
from obnamlib.vfs.sftp.errors import SftpConnectionLost, exists_error
from obnamlib.vfs.sftp.limits import (BATCH_FIRST_READS, CHUNK,
                                      EXCL_ATTEMPTS, FIRST_READS)
from obnamlib.vfs.sftp.streams import (Pieces, collect_reads, read_more,
                                       send_reads)
from obnamlib.vfs.sftp.url import fs_path, join

log = logging.getLogger('obnamlib.vfs.sftp')


class FilesMixin:
    """SftpFS's StorageFS file methods: read_file(s), write_file,
    create_file(s) and lock (unlock is Storage's remove)."""

    def _init_files(self):
        self._has_posix_rename = True

    def read_file(self, path):
        return self.read_files([path])[0]

    def read_files(self, paths):
        """The contents of several whole files, in three round trips.

        Every OPEN is in flight at once, then every FSTAT and first READ,
        then the rest of the larger files.  For callers that know what they
        will read next (restoring a file's chunks, B-tree nodes); raises
        like read_file (FileNotFoundError) for the first file that fails.
        """
        opened = self._open_for_reading(paths)
        handles = [r if isinstance(r, bytes) else None for r in opened]
        error = next((r for r in opened if isinstance(r, Exception)), None)
        try:
            if error is not None:
                raise error
            data = self._read_handles(paths, handles)
        finally:
            for handle in handles:
                if handle is not None:
                    self._close_handle(handle)
        self.bytes_read += sum(len(d) for d in data)
        return data

    def _read_handles(self, paths, handles):
        """Every FSTAT and the first READs in flight (FIRST_READS for a
        file alone, BATCH_FIRST_READS each for several); then the rest of
        every larger file, together.  (READs past the end cost the server
        a short EOF reply, but no round trip.)"""
        first = (FIRST_READS if len(handles) == 1 else
                 BATCH_FIRST_READS) * CHUNK
        sent = [(self._send(codec.CMD_FSTAT, handle),
                 send_reads(self, handle, 0, first))
                for handle in handles]
        sizes, data = [], []
        for path, (fstat, reads) in zip(paths, sent):
            _, msg = self._wait(fstat, path)
            sizes.append(codec.read_attrs(msg).st_size or 0)
            data.append(collect_reads(self, reads, Pieces(), path))
        rest = [send_reads(self, handle, len(got), size)
                for handle, got, size in zip(handles, data, sizes)]
        for path, handle, got, size, reads in zip(paths, handles, data,
                                                  sizes, rest):
            if reads:
                collect_reads(self, reads, got, path)
                read_more(self, handle, path, got, size)
        return _joined(data)

    def _open_for_reading(self, paths):
        """Every OPEN in flight: per path its handle or the OSError."""
        return self._collect([self._send_open(self._abs(path),
                                              codec.SFTP_FLAG_READ)
                              for path in paths], paths)

    def write_file(self, path, data):
        full = self._abs(path)
        tmp = self._write_temp(full, data, path)
        try:
            self._replace(tmp, full, path)
        except SftpConnectionLost:
            raise
        except BaseException:
            self._remove_quietly(tmp)
            raise
        self.bytes_written += len(data)

    def create_file(self, path, data):
        """Create `path` holding `data`; FileExistsError if it exists.

        Exclusive (SSH_FXF_EXCL) and two round trips: the OPEN, then every
        WRITE and the CLOSE.  Like an exclusive create on a local disk (and
        Obnam 1.x's chunk writes), a connection lost in the middle can leave
        a short file; chunk files are referenced only after this returns,
        so such a file is an unused chunk, as after any crash.  A failed
        write with the connection alive removes the file again.
        """
        full = self._abs(path)
        handle = self._open_exclusive(full, path)
        self._write_or_remove(handle, data, full, path, full)
        self.bytes_written += len(data)

    def _write_and_close(self, handle, data, full, path):
        """Every WRITE of `data` and the CLOSE in flight at once."""
        self._wait_writes(self._send_writes(handle, data), full, path)

    def _write_or_remove(self, handle, data, full, path, written):
        """_write_and_close; if it fails with the connection alive, the
        file being written (`written`, on the server) is removed again."""
        try:
            self._write_and_close(handle, data, full, path)
        except SftpConnectionLost:
            raise
        except BaseException:
            self._remove_quietly(written)
            raise

    def _send_writes(self, handle, data):
        nums = [self._send(codec.CMD_WRITE, handle, int64(offset),
                           payload=data[offset:offset + CHUNK])
                for offset in range(0, len(data), CHUNK)]
        nums.append(self._close_handle(handle, wait=True))
        return nums

    def create_files(self, items):
        """create_file for several (path, data) at once, in two round
        trips (three if directories are missing): every OPEN in flight,
        then every WRITE and CLOSE.  For a caller storing many chunks
        together.  Returns, per item, None or the FileExistsError; any
        other error is raised once every reply came (files created by the
        call before it stay: unused chunks, as after a crash)."""
        paths = [path for path, _ in items]
        fulls = [self._abs(path) for path in paths]
        opened = self._open_many_exclusive(fulls, paths)
        writes = [(i, self._send_writes(handle, items[i][1]))
                  for i, handle in enumerate(opened)
                  if isinstance(handle, bytes)]
        error = next((r for r in opened if isinstance(r, Exception) and
                      not isinstance(r, FileExistsError)), None)
        for i, nums in writes:
            try:
                self._wait_writes(nums, fulls[i], paths[i])
                self.bytes_written += len(items[i][1])
            except OSError as e:
                self._remove_quietly(fulls[i])
                error = error or e
        if error is not None:
            raise error
        return [r if isinstance(r, FileExistsError) else None
                for r in opened]

    def _open_many_exclusive(self, fulls, paths):
        """Per file: its handle from an exclusive OPEN, or the OSError
        (FileExistsError if it exists); missing directories are made."""
        opened = self._collect(
            [self._send_open(full, codec.EXCLUSIVE) for full in fulls], paths)
        missing = [i for i, r in enumerate(opened)
                   if isinstance(r, FileNotFoundError)]
        if missing:
            dirs = sorted({os.path.dirname(fulls[i]) for i in missing})
            mkdirs = [(d, self._send_mkdirs(self._missing_chain(d)))
                      for d in dirs]
            retries = [self._send_open(fulls[i], codec.EXCLUSIVE)
                       for i in missing]
            for d, sent in mkdirs:
                self._wait_mkdirs(sent, d, d)
            for i, result in zip(missing, self._collect(
                    retries, [paths[i] for i in missing])):
                opened[i] = result
        for i, result in enumerate(opened):
            if isinstance(result, OSError) and result.errno == errno.EIO \
                    and self._exists_abs(fulls[i]):
                opened[i] = exists_error(self._error_name(paths[i]))
        return opened

    def _write_temp(self, full, data, path):
        """Write `data` to a new temporary file beside `full`; its name."""
        tmp = _temp_name(full)
        handle = self._create_making_parents(tmp, path, codec.TRUNCATE)
        self._write_or_remove(handle, data, full, path, tmp)
        return tmp

    def _create_making_parents(self, full, path, flags):
        """Open a file for writing; if its directory is missing, make it
        and retry in the same round trip."""
        try:
            return self._open(full, flags, path)
        except FileNotFoundError:
            dirname = os.path.dirname(full)
            sent = self._send_mkdirs(self._missing_chain(dirname))
            num = self._send_open(full, flags)
            self._wait_mkdirs(sent, dirname, path)
            _, msg = self._wait(num, path)
            return msg.get_binary()

    def _replace(self, old, new, path):
        if self._has_posix_rename:
            try:
                self._call(codec.CMD_EXTENDED, 'posix-rename@openssh.com',
                           old, new, path=path)
                return
            except OSError as e:
                if e.errno != errno.ENOTSUP:
                    raise
                log.warning('SFTP server lacks posix-rename: replacing '
                            'files is not atomic')
                self._has_posix_rename = False
        try:
            self._call(codec.CMD_REMOVE, new, path=path)
        except FileNotFoundError:
            pass
        self._call(codec.CMD_RENAME, old, new, path=path)

    def _remove_quietly(self, full):
        try:
            if self._dead is None:
                self._call(codec.CMD_REMOVE, full)
        except (OSError, ObnamError):
            pass

    def lock(self, path, content=b''):
        """Create `path` exclusively (SSH_FXF_EXCL); LockFail if it exists."""
        full = self._abs(path)
        try:
            handle = self._open_exclusive(full, path)
        except FileExistsError:
            raise LockFail(lock_name=fs_path(path),
                           reason='it already exists')
        self._write_and_close(handle, bytes(content), full, path)

    def _open_exclusive(self, full, path):
        """Open a new file with SSH_FXF_EXCL; FileExistsError if it exists.

        The server says only "Failure" when the file exists; if it is gone
        by the time we look (its holder just released a lock), try again.
        """
        for attempt in range(EXCL_ATTEMPTS):
            try:
                return self._create_making_parents(full, path,
                                                   codec.EXCLUSIVE)
            except OSError as e:
                if e.errno != errno.EIO:
                    raise
                if self._exists_abs(full):
                    raise exists_error(fs_path(path))
                failure = e
        raise failure


def _temp_name(full):
    return join(os.path.dirname(full),
                b'tmp' + uuid.uuid4().hex[:16].encode('ascii'))


def _joined(pieces_of_files):
    """Each file's Pieces made one bytes, in place: a file's pieces are
    let go as soon as it is joined, so a batch is in memory about once,
    not twice."""
    for i, pieces in enumerate(pieces_of_files):
        pieces_of_files[i] = bytes(pieces)
    return pieces_of_files
