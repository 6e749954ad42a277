"""The JSON documents of the listing commands: clients, generations,
genids, ls and diff (doc/json-output.md has their keys).

They carry the facts the text of obnamlib.engine.listing and
obnamlib.engine.differ shows, as typed values: numbers as numbers,
unknown values as null, names and times by the shared conventions of
obnamlib.cli.json_output.
"""

from obnamlib.cli import json_output
from obnamlib.engine import differ, listing

_CHANGES = {
    differ.ADDED: 'added',
    differ.REMOVED: 'removed',
    differ.CHANGED: 'changed',
}


def clients_document(client_names):
    return {'clients': [json_output.name_fields('name', name)
                        for name in client_names]}


def genids_document(repo, client_name, gen_ids):
    return dict(json_output.name_fields('client', client_name),
                generation_ids=[repo.make_generation_spec(gen_id)
                                for gen_id in gen_ids])


def generations_document(repo, client_name, gen_ids):
    generations = []
    for gen_id, (files, data), checkpoint in listing.generation_counts(
            repo, gen_ids):
        fields = generation_fields(repo, gen_id)
        fields.update(files=files, bytes=data, checkpoint=checkpoint)
        generations.append(fields)
    return dict(json_output.name_fields('client', client_name),
                generations=generations)


def generation_fields(repo, gen_id):
    """id, started and ended of one generation."""
    started, ended = listing.generation_times(repo, gen_id)
    fields = {'id': repo.make_generation_spec(gen_id)}
    fields.update(json_output.time_fields('started', started))
    fields.update(json_output.time_fields('ended', ended))
    return fields


def ls_document(repo, client_name, gen_ids, paths):
    """Each generation in gen_ids with the objects at and below paths,
    in the order of the text `ls`."""
    generations = []
    for gen_id in gen_ids:
        fields = generation_fields(repo, gen_id)
        fields['entries'] = [
            file_fields(name, metadata)
            for path in paths
            for name, metadata in listing.walk(repo, gen_id, path)]
        generations.append(fields)
    return dict(json_output.name_fields('client', client_name),
                generations=generations)


def diff_document(repo, client_name, old_gen, new_gen):
    changes = []
    for char, path, metadata in differ.diff(repo, old_gen, new_gen):
        fields = {'change': _CHANGES[char]}
        fields.update(file_fields(path, metadata))
        changes.append(fields)
    document = json_output.name_fields('client', client_name)
    document.update(old_generation=repo.make_generation_spec(old_gen),
                    new_generation=repo.make_generation_spec(new_gen),
                    changes=changes)
    return document


def file_fields(path, metadata):
    """What an `ls` line says about one object, as typed values."""
    fields = json_output.name_fields('path', path)
    fields.update(
        type=listing.type_name(metadata.st_mode),
        mode=metadata.st_mode,
        permissions=listing.mode_string(metadata.st_mode),
        nlink=metadata.st_nlink,
        uid=metadata.st_uid,
        gid=metadata.st_gid,
        size=metadata.st_size)
    fields.update(_optional_name('user', metadata.username))
    fields.update(_optional_name('group', metadata.groupname))
    fields.update(_mtime_fields(metadata))
    if metadata.islink() and metadata.target is not None:
        fields.update(json_output.name_fields('target', metadata.target))
    return fields


def _optional_name(key, name):
    return {key: None} if name is None else json_output.name_fields(key, name)


def _mtime_fields(metadata):
    """mtime (seconds, with the fraction) and mtime_utc, plus mtime_ns:
    the exact integer nanoseconds that a float cannot always hold."""
    seconds = metadata.st_mtime_sec
    if seconds is None:
        return dict(json_output.time_fields('mtime', None), mtime_ns=None)
    nanoseconds = seconds * 10**9 + (metadata.st_mtime_nsec or 0)
    fields = json_output.time_fields('mtime', nanoseconds / 10**9)
    fields['mtime_ns'] = nanoseconds
    return fields
