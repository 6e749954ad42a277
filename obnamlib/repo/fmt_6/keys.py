"""Key layouts of the format-6 B-trees and the file-id rules (format-6.md §7).

Every function returns a key of exactly the size its forest uses, so callers
never build keys by hand.  Integers are big-endian unsigned 64-bit.
"""

import hashlib
import posixpath
import struct

MAX_ID = 2 ** 64 - 1
MAX_SUBTYPE = 255

# --- clientlist (§7.1) -------------------------------------------------------

CLIENTLIST_KEY_SIZE = 25
CLIENT_NAME = 0
CLIENT_KEYID = 1
_CLIENT_KEY = struct.Struct('!16sQB')


def md5(data):
    return hashlib.md5(data).digest()


def client_key(name, client_id, subkey):
    """Key of a client list entry; name is bytes."""
    return _CLIENT_KEY.pack(md5(name), client_id, subkey)


def parse_client_key(key):
    """(name MD5, client id, subkey)."""
    return _CLIENT_KEY.unpack(key)


# --- per-client trees (§7.2) -------------------------------------------------

CLIENT_KEY_SIZE = 18
PREFIX_FS = 0
PREFIX_CHUNK_REF = 1
PREFIX_GENERATION = 2

FILE_NAME = 0
FILE_CHUNKS = 1
FILE_METADATA = 3
DIR_CONTENTS = 4
FILE_DATA = 5

_TREE_KEY = struct.Struct('!B8sB8s')
_U64 = struct.Struct('!Q')
MIN_SUBKEY = b'\x00' * 8
MAX_SUBKEY = b'\xff' * 8


def pack_u64(value):
    return _U64.pack(value)


def unpack_u64(data):
    return _U64.unpack(data)[0]


def tree_key(prefix, main, subtype, subkey):
    """An 18-byte key; main and subkey are 8 bytes, or an int for subkey."""
    if isinstance(subkey, int):
        subkey = _U64.pack(subkey)
    return _TREE_KEY.pack(prefix, main, subtype, subkey)


def parse_tree_key(key):
    """(prefix, main bytes, subtype, subkey bytes)."""
    return _TREE_KEY.unpack(key)


_dir_halves = {}


def default_file_id(path):
    """MD5(dirname)[:4] + MD5(basename)[:4], the slot where a path's id is kept."""
    cut = path.rfind(b'/') + 1
    dirname, basename = path[:cut], path[cut:]
    if dirname and dirname != b'/' * len(dirname):
        dirname = dirname.rstrip(b'/')
    half = _dir_halves.get(dirname)
    if half is None:
        if len(_dir_halves) > 4096:
            _dir_halves.clear()
        half = _dir_halves[dirname] = md5(dirname)[:4]
    return half + md5(basename)[:4]


def parent_path(path):
    """The parent directory; '/' is its own parent."""
    return posixpath.dirname(path)


def file_key(file_id, subtype, subkey=0):
    return tree_key(PREFIX_FS, file_id, subtype, subkey)


def file_range(file_id, subtype):
    """(min, max) keys of one subtype of a file's entries."""
    return (tree_key(PREFIX_FS, file_id, subtype, MIN_SUBKEY),
            tree_key(PREFIX_FS, file_id, subtype, MAX_SUBKEY))


def whole_file_range(file_id):
    """Every prefix-0 key of a file: names, chunks, metadata, listing, data."""
    return (tree_key(PREFIX_FS, file_id, 0, MIN_SUBKEY),
            tree_key(PREFIX_FS, file_id, MAX_SUBTYPE, MAX_SUBKEY))


def name_slot_range(path):
    """Keys under the path's default file id: one per path sharing it."""
    return file_range(default_file_id(path), FILE_NAME)


def chunk_ref_key(chunk_id, file_id):
    return tree_key(PREFIX_CHUNK_REF, _U64.pack(chunk_id), 0, file_id)


def chunk_ref_range(chunk_id):
    main = _U64.pack(chunk_id)
    return (tree_key(PREFIX_CHUNK_REF, main, 0, MIN_SUBKEY),
            tree_key(PREFIX_CHUNK_REF, main, 0, MAX_SUBKEY))


def all_chunk_refs_range():
    return (tree_key(PREFIX_CHUNK_REF, MIN_SUBKEY, 0, MIN_SUBKEY),
            tree_key(PREFIX_CHUNK_REF, MAX_SUBKEY, 0, MAX_SUBKEY))


def chunk_id_of_ref(key):
    return unpack_u64(key[1:9])


# Generation metadata (§7.2.4): main is the default file id of 'generation'.
GEN_MAIN = default_file_id(b'generation')
GEN_ID = 0
GEN_STARTED = 1
GEN_ENDED = 2
GEN_IS_CHECKPOINT = 3
GEN_FILE_COUNT = 4
GEN_TOTAL_DATA = 5
GEN_TEST_DATA = 6


def gen_key(subkey):
    return tree_key(PREFIX_GENERATION, GEN_MAIN, 0, subkey)


def gen_range():
    return (tree_key(PREFIX_GENERATION, GEN_MAIN, 0, MIN_SUBKEY),
            tree_key(PREFIX_GENERATION, GEN_MAIN, 0, MAX_SUBKEY))


# --- chunk indexes (§7.4) ----------------------------------------------------

CHUNKLIST_KEY_SIZE = 8
CHUNKSUMS_KEY_SIZE = 48
_SUMS_KEY = struct.Struct('!32sQQ')


def chunklist_key(chunk_id):
    return _U64.pack(chunk_id)


def chunksums_key(checksum, chunk_id, client_id):
    """checksum: the 32-byte MD5hex of the chunk content."""
    return _SUMS_KEY.pack(checksum, chunk_id, client_id)


def parse_chunksums_key(key):
    """(checksum, chunk id, client id)."""
    return _SUMS_KEY.unpack(key)


def chunksums_range(checksum, chunk_id=None):
    lo_chunk, hi_chunk = (0, MAX_ID) if chunk_id is None else (chunk_id, chunk_id)
    return (_SUMS_KEY.pack(checksum, lo_chunk, 0),
            _SUMS_KEY.pack(checksum, hi_chunk, MAX_ID))


def content_checksum(data):
    """MD5hex of a chunk's plaintext, as both indexes store it."""
    return checksum_of_digest(hashlib.md5(data).digest())


def checksum_of_digest(md5_digest):
    """The index form (MD5hex) of an MD5 digest the caller computed."""
    return md5_digest.hex().encode('ascii')
