"""What fsck counts as it goes: the engine's, its content check's (in
either of its processes: obnamlib.engine.fsck_side) and the progress
display's, one record."""

import dataclasses


@dataclasses.dataclass
class FsckStats:
    clients: int = 0
    generations: int = 0
    files: int = 0
    chunks: int = 0             # distinct chunks whose content was verified
    problems: int = 0
    fixed: int = 0
    chunks_total: int = 0       # chunk files in the repository
    chunk_reads: int = 0        # chunk files read (chunks + re-reads)
    chunk_bytes: int = 0        # bytes of chunk content read
    phase: str = ''             # what is being checked now
