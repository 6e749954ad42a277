"""dump-repo: repository data structures as JSON, for developers (§5.17).

A sequence of JSON objects (indented by 4, each followed by a newline):
the client list, the chunk ids, then per client its key and per
generation its keys and chunk ids, plus every file's metadata and chunk
ids with --dump-repo-file-metadata.  Bytes are shown as text with
undecodable bytes escaped; MD5s and xattr blobs in hex.
"""

import dataclasses
import json

from obnamlib.cli import plugin
from obnamlib.repo import interface as repo_interface


class DumpRepoPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.boolean(
            ['dump-repo-file-metadata'], 'dump metadata about files too')
        self.app.add_subcommand('dump-repo', self.dump_repo)

    def dump_repo(self, args):
        """Dump (some) data structures from a repository"""
        with_files = self.app.settings['dump-repo-file-metadata']
        with self.app.open_repository() as repo:
            for obj in repository_objects(repo, with_files):
                self.app.ui.output.write(json.dumps(obj, indent=4) + '\n')


def repository_objects(repo, with_files=False):
    """The JSON-ready objects dump-repo prints, in order."""
    clients = repo.get_client_names()
    yield {'client-list': clients}
    yield {'chunk-ids': sorted(repo.get_chunk_ids())}
    for client in clients:
        yield {'client-name': client,
               'encryption-key': repo.get_client_key_id(client) or None,
               'client-keys': {}}
        for gen_id in repo.get_generation_ids(client):
            yield generation_object(repo, client, gen_id, with_files)


def generation_object(repo, client, gen_id, with_files):
    obj = {
        'client-name': client,
        'generation-id': repo.make_generation_spec(gen_id),
        'generation-keys': {
            'REPO_GENERATION_' + key.upper():
                repo.get_generation_key(gen_id, key)
            for key in repo_interface.GENERATION_KEYS},
        'generation-chunk-ids': sorted(repo.get_generation_chunk_ids(gen_id)),
    }
    if with_files:
        obj['files'] = list(file_objects(repo, gen_id))
    return obj


def file_objects(repo, gen_id):
    """Every file of a generation, parents before children, sorted."""
    pending = [b'/']
    while pending:
        path = pending.pop()
        if not repo.file_exists(gen_id, path):
            continue
        metadata = repo.get_metadata(gen_id, path)
        entry = {'pathname': _text(path), 'metadata': _metadata(metadata)}
        if metadata.isreg():
            entry['chunk-ids'] = repo.get_file_chunk_ids(gen_id, path)
        yield entry
        if metadata.isdir() or metadata.st_mode is None:
            children = repo.get_file_children(gen_id, path)
            pending.extend(_join(path, name) for name in reversed(children))


def _join(parent, name):
    return parent.rstrip(b'/') + b'/' + name


def _metadata(metadata):
    shown = {}
    for field in dataclasses.fields(metadata):
        value = getattr(metadata, field.name)
        if value is None:
            continue
        if field.name in ('md5', 'xattr'):
            value = value.hex()
        elif isinstance(value, bytes):
            value = _text(value)
        shown[field.name] = value
    return shown


def _text(data):
    return data.decode('utf-8', 'backslashreplace')
