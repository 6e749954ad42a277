"""Something the bench starts for a mode (a gpg home, an sshd, a gluster
volume) and must undo even when starting it failed half-way."""


class Service:
    """A context manager around start() and close(): close() runs after a
    start() that raised, too, so it must undo only what was done."""

    def start(self):
        raise NotImplementedError

    def close(self):
        raise NotImplementedError

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
