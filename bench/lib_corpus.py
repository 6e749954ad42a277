"""Running ../shared/bench/mkcorpus at any scale.

mkcorpus makes one file of 128 MiB times the scale with one
random.Random.randbytes call, and randbytes cannot make 256 MiB or more
at once (its bits must fit in a C int: OverflowError), so scale 2 and
above fail.  mkcorpus is not ours to change.  Here it runs with
randbytes asked for such sizes in pieces of PIECE bytes, one after the
other from the same generator: below 256 MiB nothing changes (a corpus
of scale 1 is byte for byte what mkcorpus makes), and above it the
corpus is just as deterministic.

Run as a program: `python3 lib_corpus.py MKCORPUS ARGS...`.
"""

import random
import runpy
import sys

# randbytes of this many bytes or more would overflow.
TOO_BIG = 256 << 20
# The size of each piece of a request that would.
PIECE = 64 << 20

_randbytes = random.Random.randbytes


def randbytes_in_pieces(self, n):
    """random.Random.randbytes, which any n can be asked of."""
    if n < TOO_BIG:
        return _randbytes(self, n)
    return b''.join(_randbytes(self, min(PIECE, n - at))
                    for at in range(0, n, PIECE))


def command(python, mkcorpus, *args):
    """The argv that runs mkcorpus with args, at any scale."""
    return [python, __file__, mkcorpus] + [str(a) for a in args]


def main(argv):
    mkcorpus = argv[1]
    random.Random.randbytes = randbytes_in_pieces
    sys.argv = [mkcorpus] + argv[2:]
    runpy.run_path(mkcorpus, run_name='__main__')


if __name__ == '__main__':
    main(sys.argv)
