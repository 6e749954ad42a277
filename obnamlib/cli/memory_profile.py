"""`dump-memory-profile` and `memory-dump-interval`: at points a command
chooses, log (at DEBUG) how long the process has run, its CPU times and
its resident memory, at most once every `memory-dump-interval` seconds.
`none` turns this off; `simple` is the only other method."""

import logging
import os
import time


class MemoryProfiler:

    def __init__(self, settings, clock=time.time):
        self.settings = settings
        self.clock = clock
        self.started = clock()
        self.last_dump = None

    def dump(self, what):
        """Log the profile, naming `what` the program is doing."""
        if self.settings['dump-memory-profile'] == 'none':
            return
        now = self.clock()
        interval = self.settings['memory-dump-interval']
        if self.last_dump is not None and now < self.last_dump + interval:
            return
        self.last_dump = now
        times = os.times()
        logging.debug('process duration: %s s', now - self.started)
        logging.debug('CPU time, in process: %s s', times.user)
        logging.debug('CPU time, in system: %s s', times.system)
        logging.debug('CPU time, in children: %s s', times.children_user)
        logging.debug('CPU time, in system for children: %s s',
                      times.children_system)
        logging.debug('dumping memory profiling data: %s', what)
        logging.debug('VmRSS: %s KiB', resident_kib())


def resident_kib(status_path='/proc/self/status'):
    """The process's resident set size in KiB (0 where unknown)."""
    try:
        with open(status_path) as f:
            for line in f:
                if line.startswith('VmRSS'):
                    return line.split()[1]
    except OSError:
        pass
    return 0
