from obnamlib.larch.lru import LRUCache


def test_overflow_evicts_least_recently_used_first():
    cache = LRUCache()
    for i in range(5):
        cache[i] = str(i)
    cache.move_to_end(0)
    evicted = list(cache.overflow(3))
    assert evicted == [(1, '1'), (2, '2')]
    assert list(cache) == [3, 4, 0]


def test_overflow_below_limit_evicts_nothing():
    cache = LRUCache(a=1)
    assert list(cache.overflow(5)) == []
    assert dict(cache) == {'a': 1}
