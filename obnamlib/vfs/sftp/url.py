"""sftp:// URLs: which server, as whom, and which directory on it."""

import os

from obnamlib.errors import ObnamError


class InvalidPortError(ObnamError):
    code = 'R5914DX'
    msg = 'Invalid port number {port} in {url}: {error}'


class WrongURLSchemeError(ObnamError):
    code = 'RB8E98X'
    msg = 'SftpFS used with non-sftp URL: {url}'


class SftpUrl:
    """sftp://[USER@]HOST[:PORT]/PATH, PATH absolute; /~/ = home-relative."""

    def __init__(self, url):
        self.url = url
        prefix = 'sftp://'
        if not url.startswith(prefix):
            raise WrongURLSchemeError(url=url)
        rest = url[len(prefix):]
        netloc, slash, path = rest.partition('/')
        self.user, self.host, self.port = _parse_netloc(netloc, url)
        path = slash + path
        if path in ('', '/~', '/~/') or path.startswith('/~/'):
            self.home_relative = True
            self.path = path[3:]
        else:
            self.home_relative = False
            self.path = path

    def same_server(self, other):
        """Do both URLs name the same account on the same server?"""
        return (self.host, self.port, self.user) == (
            other.host, other.port, other.user)

    def url_of(self, full):
        """The sftp:// URL of an absolute path (bytes) on this server."""
        host = '[%s]' % self.host if ':' in self.host else self.host
        return 'sftp://%s%s%s%s' % (
            self.user + '@' if self.user else '', host,
            ':%d' % self.port if self.port else '', os.fsdecode(full))


def _parse_netloc(netloc, url):
    user, at, hostport = netloc.rpartition('@')
    user = user if at else None
    if hostport.startswith('['):
        host, _, after = hostport[1:].partition(']')
        port = after[1:] if after.startswith(':') else after
    else:
        host, _, port = hostport.partition(':')
    if not host:
        raise WrongURLSchemeError(url=url)
    return user or None, host, _parse_port(port, url)


def _parse_port(port, url):
    if port == '':
        return None
    if not port.isdigit():
        raise InvalidPortError(port=port, url=url, error='not a number')
    number = int(port)
    if not 0 < number < 65536:
        raise InvalidPortError(port=port, url=url,
                               error='must be between 1 and 65535')
    return number


def join(base, rel):
    """An absolute server path (bytes) and a relative one, joined."""
    if not rel:
        return base
    if base.endswith(b'/'):
        return base + rel
    return base + b'/' + rel


def clean_rel(path):
    """A StorageFS path as bytes, without empty or '.' components."""
    if isinstance(path, str):
        path = path.encode('utf-8', 'surrogateescape')
    return b'/'.join(p for p in path.split(b'/') if p not in (b'', b'.'))


def fs_path(path):
    """A path as errors show it: str."""
    return path if isinstance(path, str) else os.fsdecode(path)
