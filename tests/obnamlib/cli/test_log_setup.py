"""obnamlib.cli.log_setup: log file (mode, rotation), syslog, stderr, none;
and obnamlib.cli.memory_profile."""

import logging
import logging.handlers
import os
import re
import socket

import pytest

from obnamlib.cli import log_setup, memory_profile, settings


def settings_with(**values):
    reg = settings.Settings()
    for name, value in values.items():
        reg[name.replace('_', '-')] = value
    return reg


@pytest.fixture
def logger():
    """A logger of its own, with its handlers closed afterwards."""
    log = logging.getLogger('obnam-test-log-setup')
    log.propagate = False
    yield log
    for handler in list(log.handlers):
        handler.close()
        log.removeHandler(handler)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_log_file_mode_and_line_format(tmp_path, logger, umask_022):
    path = tmp_path / 'obnam.log'
    log_setup.setup_logging(settings_with(log=str(path), log_mode='0640',
                                          log_level='info'),
                            'obnam', logger=logger)
    logger.info('hello %s', 'there')
    logger.debug('not at info level')
    assert os.stat(path).st_mode & 0o777 == 0o640
    assert re.fullmatch(r'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO hello there\n',
                        path.read_text())


def test_names_that_are_not_utf8_go_into_the_log_file_as_they_are(
        tmp_path, logger, capsys):
    """A file or client name may be any bytes (os.fsdecode gives lone
    surrogates for the rest): the log gets the bytes, not a 'Logging
    error' on stderr."""
    path = tmp_path / 'obnam.log'
    log_setup.setup_logging(settings_with(log=str(path)), 'obnam',
                            logger=logger)
    logger.error('fsck: client %s', os.fsdecode(b'clien\xf4'))
    for handler in logger.handlers:
        handler.flush()
    assert path.read_bytes().endswith(b' ERROR fsck: client clien\xf4\n')
    assert capsys.readouterr().err == ''


@pytest.mark.parametrize('mode', ['rw', '99', '-1', '17777', ''])
def test_a_log_mode_that_is_not_octal_is_a_coded_error(mode, tmp_path,
                                                       logger):
    path = tmp_path / 'obnam.log'
    with pytest.raises(log_setup.LogModeNotOctal) as e:
        log_setup.setup_logging(settings_with(log=str(path), log_mode=mode),
                                'obnam', logger=logger)
    assert str(e.value) == \
        'R30FA3X: log-mode %s is not an octal file mode (0 to 7777)' % mode
    assert not path.exists()


def test_existing_log_file_keeps_its_mode(tmp_path, logger):
    path = tmp_path / 'obnam.log'
    path.write_text('old\n')
    os.chmod(path, 0o644)
    log_setup.setup_logging(settings_with(log=str(path)), 'obnam',
                            logger=logger)
    logger.warning('w')
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert path.read_text().startswith('old\n')


def test_rotation_keeps_log_keep_files_newest_first(tmp_path, logger,
                                                    umask_022):
    path = tmp_path / 'obnam.log'
    log_setup.setup_logging(
        settings_with(log=str(path), log_max='100', log_keep=2,
                      log_mode='0600'), 'obnam', logger=logger)
    for i in range(6):
        logger.info('message %d %s', i, 'x' * 60)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ['obnam.log', 'obnam.log.1', 'obnam.log.2']
    assert 'message 5' in path.read_text()
    assert 'message 4' in (tmp_path / 'obnam.log.1').read_text()
    assert 'message 3' in (tmp_path / 'obnam.log.2').read_text()
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_log_max_zero_never_rotates(tmp_path, logger):
    path = tmp_path / 'obnam.log'
    log_setup.setup_logging(settings_with(log=str(path)), 'obnam',
                            logger=logger)
    for i in range(50):
        logger.info('x' * 100)
    assert [p.name for p in tmp_path.iterdir()] == ['obnam.log']


def test_stderr(logger, capsys):
    log_setup.setup_logging(settings_with(log='stderr', log_level='debug'),
                            'obnam', logger=logger)
    logger.debug('to stderr')
    assert capsys.readouterr() == ('', 'DEBUG to stderr\n')


@pytest.mark.parametrize('target', ['', 'none'])
def test_no_log(target, logger, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    handler = log_setup.setup_logging(settings_with(log=target), 'obnam',
                                      logger=logger)
    assert isinstance(handler, logging.NullHandler)
    assert logger.level == logging.FATAL
    logger.critical('nowhere')
    assert list(tmp_path.iterdir()) == []


def test_syslog(tmp_path, logger, monkeypatch):
    address = str(tmp_path / 'log.sock')
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(address)
    receiver.settimeout(10)
    monkeypatch.setattr(log_setup, 'SYSLOG_ADDRESS', address)
    try:
        handler = log_setup.setup_logging(
            settings_with(log='syslog', log_level='warning'), 'obnam',
            logger=logger)
        assert isinstance(handler, logging.handlers.SysLogHandler)
        logger.info('dropped')
        logger.warning('to syslog')
        assert receiver.recv(1000) == b'<12>obnam: WARNING to syslog\x00'
        logger.warning('name %s', os.fsdecode(b'clien\xf4'))
        assert receiver.recv(1000) == \
            b'<12>obnam: WARNING name clien\\xf4\x00'
    finally:
        receiver.close()


@pytest.mark.parametrize('name, level', sorted(log_setup.LEVELS.items()))
def test_levels(name, level, logger):
    log_setup.setup_logging(settings_with(log='stderr', log_level=name),
                            'obnam', logger=logger)
    assert logger.level == level


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_memory_profile_respects_interval_and_none(caplog):
    reg = settings_with(memory_dump_interval=300)
    clock = FakeClock()
    profiler = memory_profile.MemoryProfiler(reg, clock=clock)
    caplog.set_level(logging.DEBUG)
    profiler.dump('first')
    clock.now += 299
    profiler.dump('too soon')
    clock.now += 1
    profiler.dump('second')
    reg['dump-memory-profile'] = 'none'
    clock.now += 1000
    profiler.dump('off')
    dumps = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith('dumping memory profiling data')]
    assert dumps == ['dumping memory profiling data: first',
                     'dumping memory profiling data: second']
    assert any(r.getMessage().startswith('VmRSS: ') for r in caplog.records)


def test_resident_memory(tmp_path):
    status = tmp_path / 'status'
    status.write_text('Name:\tx\nVmRSS:\t  1234 kB\n')
    assert memory_profile.resident_kib(str(status)) == '1234'
    assert memory_profile.resident_kib(str(tmp_path / 'none')) == 0
