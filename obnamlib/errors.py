"""Errors with stable identifiers.

Every error a person may see is a class here (or in the module that owns the
concept) with an explicit `code` and a message template with named fields.
Codes are the `RxxxxxX` identifiers Obnam 1.x printed (it derived them from
MD5(class name + module name)); each is written here as a literal, so that
moving a class never changes it and grep finds it.  The command line prints
`ERROR: CODE: message`; the traceback goes to the log.
"""


class ObnamError(Exception):
    """Base of every error meant for people.  Subclasses set `code` and `msg`."""

    code = 'R00000X'
    msg = 'unknown error'

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        for name, value in kwargs.items():
            setattr(self, name, value)
        super().__init__(self.message())

    def message(self):
        """The text for people, without the code."""
        try:
            return self.msg.format(**{k: _show(v) for k, v in self.kwargs.items()})
        except (KeyError, IndexError):
            return self.msg

    def __str__(self):
        return '%s: %s' % (self.code, self.message())

    def first_line(self):
        return str(self).splitlines()[0]


def _show(value):
    """Bytes (paths, names) are shown decoded with surrogates kept readable."""
    if isinstance(value, bytes):
        return value.decode('utf-8', 'backslashreplace')
    return value


def all_error_classes():
    """Every ObnamError subclass that has been imported, for list-errors."""
    found = []
    pending = [ObnamError]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            found.append(sub)
            pending.append(sub)
    return sorted(set(found), key=lambda c: c.code)


# Errors that several layers raise live here; a concept's own errors live in
# its module (forget_policy, restorer, ...), each with a pinned code.

class ObnamIOError(ObnamError):
    code = 'RCE08AX'
    msg = 'I/O error: {filename}: {errno}: {strerror}'


class ObnamSystemError(ObnamError):
    code = 'RD5FA4X'
    msg = 'System error: {filename}: {errno}: {strerror}'


class LockFail(ObnamError):
    code = 'R681AEX'
    msg = "Couldn't create lock {lock_name}: {reason}"


class UnknownVFSError(ObnamError):
    code = 'R826A1X'
    msg = 'Unknown VFS type: {url}'


class RootIsNotADirectory(ObnamError):
    code = 'RA4F35X'
    msg = '{baseurl} is not a directory, but a VFS root must be a directory'


class MissingFilterError(ObnamError):
    code = 'R169C6X'
    msg = 'Unknown filter tag: {tagname}'


class NoFilterTagError(ObnamError):
    code = 'R173AEX'
    msg = 'No filter tag found'


class GpgError(ObnamError):
    """gpg failed.  With an `explanation` (one line that says what is
    wrong and what to do, where obnam knows better than gpg's words)
    that is the message; gpg's stderr goes to the log."""

    code = 'R0C79EX'
    msg = 'gpg failed with exit code {returncode}:\n{stderr}'

    def message(self):
        explanation = self.kwargs.get('explanation')
        return explanation if explanation else super().message()

    def first_line(self):
        """gpg's own words are what tell people why: on one line they
        follow the exit code, separated by semicolons."""
        if self.kwargs.get('explanation'):
            return str(self)
        said = [line.strip() for line in str(self.stderr).splitlines()]
        return '%s: gpg failed with exit code %s: %s' % (
            self.code, self.returncode, '; '.join(l for l in said if l))


class NotARepository(ObnamError):
    code = 'RA920EX'
    msg = '{url} does not seem to be an Obnam repository'


class UnknownRepositoryFormat(ObnamError):
    code = 'RF4EFDX'
    msg = 'Unknown format {format} at {url}'


class UnknownRepositoryFormatWanted(ObnamError):
    code = 'RA7D64X'
    msg = 'Unknown format {format} requested'


class RepositorySettingMissingError(ObnamError):
    code = 'R01F56X'
    msg = ('No --repository setting. You need to specify it on the command '
           'line or a configuration file')


class RepositoryClientDoesNotExist(ObnamError):
    code = 'R24424X'
    msg = 'Repository client {client_name} does not exist'


class RepositoryClientAlreadyExists(ObnamError):
    code = 'R41CE6X'
    msg = 'Repository client {client_name} already exists'


class ClientDoesNotExistError(ObnamError):
    code = 'R1CA00X'
    msg = 'Client {client} does not exist in repository {repo}'


class RepositoryClientHasNoGenerations(ObnamError):
    code = 'REFB32X'
    msg = 'Client {client_name} has no generations'


class RepositoryGenerationDoesNotExist(ObnamError):
    code = 'R0B15DX'
    msg = 'Cannot find requested generation {gen_id!r} for client {client_name}'


class RepositoryFileDoesNotExistInGeneration(ObnamError):
    code = 'R3E151X'
    msg = 'Client {client_name}, generation {genspec} does not have file {filename}'


class RepositoryChunkDoesNotExist(ObnamError):
    code = 'R43272X'
    msg = "Repository doesn't contain chunk {chunk_id}. It is expected at {filename}"


class RepositoryClientNotLocked(ObnamError):
    code = 'R0BE94X'
    msg = 'Repository client {client_name} is not locked'


class RepositoryClientListNotLocked(ObnamError):
    code = 'R6C1C8X'
    msg = 'Repository client list is not locked'


class RepositoryChunkIndexesNotLocked(ObnamError):
    code = 'RE187FX'
    msg = 'Repository chunk indexes are not locked'


class RepositoryClientLockingFailed(ObnamError):
    code = 'R6EAF2X'
    msg = 'Repository client {client_name} could not be locked'


class RepositoryClientListLockingFailed(ObnamError):
    code = 'RB1048X'
    msg = 'Repository client list could not be locked'


class RepositoryChunkIndexesLockingFailed(ObnamError):
    code = 'R8F974X'
    msg = 'Repository chunk indexes are already locked'


class RepositoryCorrupt(ObnamError):
    """A file in the repository cannot be decoded (new in this implementation)."""
    code = 'RB0D42X'
    msg = 'Repository is damaged: {what}: {reason}'


class UnsafeStoredName(ObnamError):
    """A name stored in a generation that no file system can hold as one
    name: it would escape the place where it is restored or checked."""
    code = 'R452C9X'
    msg = ('Client {client_name}, generation {genspec}: unsafe name stored '
           'for {filename} (empty, ".", ".." or containing "/" or NUL): '
           'not used; the repository is damaged or was tampered with')


def reraise_fatal(error):
    """Raise `error` again if no later file can succeed either (its class
    says `fatal = True`: a lost SSH connection to a pull backup's client).

    Per-file handlers call this first, so one dead connection ends the run
    with one error instead of an error per remaining file.
    """
    if getattr(error, 'fatal', False):
        raise error
