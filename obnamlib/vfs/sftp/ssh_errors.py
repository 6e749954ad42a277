"""Why an SSH connection could not be made: the errors both transports
(the OpenSSH client and paramiko) raise, so that users see the same
messages whichever one connected."""

from obnamlib.errors import ObnamError


class NoHostKeyError(ObnamError):
    code = 'R5F98AX'
    msg = 'No known host key for {hostname}'


class NoHostKeyOfWantedTypeError(ObnamError):
    code = 'R8AAC1X'
    msg = 'No known type {key_type} host key for {hostname}'


class WrongHostKeyError(ObnamError):
    code = 'R47416X'
    msg = ('SSH server {hostname} offered wrong public key\n'
           'The server offered a key ({key_type}, fingerprint {fingerprint}) '
           'that differs from the one in your known hosts file. Someone may '
           'be intercepting the connection, or the server was reinstalled. '
           'Check the key with the server administrator; if it is right, '
           'remove the old entry (ssh-keygen -R {hostname}) and try again.')


class KeyAuthenticationError(ObnamError):
    code = 'RCB0CAX'
    msg = "Can't authenticate to SSH server using key"


class SshConnectError(ObnamError):
    """The server could not be reached or the ssh client failed."""
    code = 'RC4E32X'
    msg = 'Cannot connect to SSH server {hostname}: {reason}'
