"""Tests of bench/lib_corpus.py: mkcorpus at any scale."""

import os
import random
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lib_corpus  # noqa: E402

MKCORPUS = os.path.join(HERE, '..', '..', 'shared', 'bench', 'mkcorpus')


def test_below_the_limit_randbytes_is_unchanged():
    ours, theirs = random.Random('x'), random.Random('x')
    assert lib_corpus.randbytes_in_pieces(ours, 1000) == theirs.randbytes(1000)
    assert ours.random() == theirs.random()


def test_a_size_randbytes_refuses_comes_in_pieces_deterministically(
        monkeypatch):
    monkeypatch.setattr(lib_corpus, 'TOO_BIG', 1000)
    monkeypatch.setattr(lib_corpus, 'PIECE', 300)
    ours, again, theirs = (random.Random('y') for _ in range(3))
    data = lib_corpus.randbytes_in_pieces(ours, 1000)
    assert data == lib_corpus.randbytes_in_pieces(again, 1000)
    assert len(data) == 1000
    assert data == b''.join(theirs.randbytes(n) for n in (300, 300, 300, 100))


def test_randbytes_itself_cannot_make_the_limit():
    with pytest.raises(OverflowError):
        random.Random().getrandbits(lib_corpus.TOO_BIG * 8)


@pytest.mark.skipif(not os.path.exists(MKCORPUS), reason='no mkcorpus')
@pytest.mark.timeout(120)
def test_the_corpus_is_mkcorpus_own_below_the_limit(tmp_path):
    ours, theirs = tmp_path / 'ours', tmp_path / 'theirs'
    subprocess.run(lib_corpus.command(sys.executable, MKCORPUS, ours,
                                      '--scale', '0.01'),
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, MKCORPUS, theirs, '--scale', '0.01'],
                   check=True, stdout=subprocess.DEVNULL)
    digests = [subprocess.run([sys.executable, MKCORPUS, str(d), '--digest'],
                              check=True, capture_output=True).stdout
               for d in (ours, theirs)]
    assert digests[0] == digests[1]
