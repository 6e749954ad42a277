"""Generation ids of format 6."""


class GenId(int):
    """A generation id: the number users see, plus the client it belongs to
    (numbers are per client, so two clients can both have generation 2)."""

    def __new__(cls, number, client_name):
        self = super().__new__(cls, number)
        self.client_name = client_name
        return self

    def __repr__(self):
        return 'GenId(%d, %r)' % (int(self), self.client_name)

    def __reduce__(self):
        return (GenId, (int(self), self.client_name))


def client_name_of(gen_id):
    """The client a generation id names; None for a plain number."""
    return gen_id.client_name if isinstance(gen_id, GenId) else None
